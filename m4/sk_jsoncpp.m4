# SK_CHECK_JSONCPP: jsoncpp >= 1.9 through pkg-config; sets JSONCPP_CFLAGS/JSONCPP_LIBS.
AC_DEFUN([SK_CHECK_JSONCPP], [
  PKG_CHECK_MODULES([JSONCPP], [jsoncpp >= 1.9], [],
    [AC_MSG_ERROR([jsoncpp >= 1.9 not found: $JSONCPP_PKG_ERRORS
Install it (Debian: apt-get install libjsoncpp-dev) or set PKG_CONFIG_PATH.])])
])
