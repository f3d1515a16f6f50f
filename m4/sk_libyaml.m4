# SK_CHECK_LIBYAML: libyaml >= 0.2 through pkg-config; sets
# LIBYAML_CFLAGS/LIBYAML_LIBS. The agent reads kubeconfigs with it, YAML as
# kubectl reads it (agent/kube/kubeconfig.cc).
AC_DEFUN([SK_CHECK_LIBYAML], [
  PKG_CHECK_MODULES([LIBYAML], [yaml-0.1 >= 0.2], [],
    [AC_MSG_ERROR([libyaml >= 0.2 not found: $LIBYAML_PKG_ERRORS
Install it (Debian: apt-get install libyaml-dev) or set PKG_CONFIG_PATH.])])
])
