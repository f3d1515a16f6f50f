# SK_CHECK_LIBCURL: libcurl >= 7.74 through pkg-config; sets LIBCURL_CFLAGS/LIBCURL_LIBS.
AC_DEFUN([SK_CHECK_LIBCURL], [
  PKG_CHECK_MODULES([LIBCURL], [libcurl >= 7.74], [],
    [AC_MSG_ERROR([libcurl >= 7.74 not found: $LIBCURL_PKG_ERRORS
Install it (Debian: apt-get install libcurl4-openssl-dev) or set PKG_CONFIG_PATH.])])
])
