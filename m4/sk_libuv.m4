# SK_CHECK_LIBUV: libuv >= 1.40 through pkg-config; sets LIBUV_CFLAGS/LIBUV_LIBS.
AC_DEFUN([SK_CHECK_LIBUV], [
  PKG_CHECK_MODULES([LIBUV], [libuv >= 1.40], [],
    [AC_MSG_ERROR([libuv >= 1.40 not found: $LIBUV_PKG_ERRORS
Install it (Debian: apt-get install libuv1-dev) or set PKG_CONFIG_PATH.])])
])
