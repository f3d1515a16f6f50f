# SK_CHECK_ZLIB: zlib >= 1.2.11 through pkg-config; sets ZLIB_CFLAGS/ZLIB_LIBS.
# SPDY's header blocks are zlib streams (agent/kubelet/streams/spdy.h).
AC_DEFUN([SK_CHECK_ZLIB], [
  PKG_CHECK_MODULES([ZLIB], [zlib >= 1.2.11], [],
    [AC_MSG_ERROR([zlib >= 1.2.11 not found: $ZLIB_PKG_ERRORS
Install it (Debian: apt-get install zlib1g-dev) or set PKG_CONFIG_PATH.])])
])
