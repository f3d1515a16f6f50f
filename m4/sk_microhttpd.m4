# SK_CHECK_MICROHTTPD: libmicrohttpd >= 0.9.70 through pkg-config; sets MHD_CFLAGS/MHD_LIBS.
AC_DEFUN([SK_CHECK_MICROHTTPD], [
  PKG_CHECK_MODULES([MHD], [libmicrohttpd >= 0.9.70], [],
    [AC_MSG_ERROR([libmicrohttpd >= 0.9.70 not found: $MHD_PKG_ERRORS
Install it (Debian: apt-get install libmicrohttpd-dev) or set PKG_CONFIG_PATH.])])
])
