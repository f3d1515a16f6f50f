# SK_CHECK_LIBSECCOMP: libseccomp >= 2.5 through pkg-config; sets
# LIBSECCOMP_CFLAGS/LIBSECCOMP_LIBS. The shim's exec helper loads the
# RuntimeDefault seccomp filter with it (k8s-shim/confine.cc).
AC_DEFUN([SK_CHECK_LIBSECCOMP], [
  PKG_CHECK_MODULES([LIBSECCOMP], [libseccomp >= 2.5], [],
    [AC_MSG_ERROR([libseccomp >= 2.5 not found: $LIBSECCOMP_PKG_ERRORS
Install it (Debian: apt-get install libseccomp-dev) or set PKG_CONFIG_PATH.])])
])
