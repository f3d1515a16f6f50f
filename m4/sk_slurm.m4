# SK_CHECK_SLURM: finds slurm/spank.h. pkg-config "slurm" first, then
# --with-slurm=PREFIX (default: the compiler's search path, then /usr).
# Records SLURM_VERSION_NUMBER (the plugin's plugin_version must match the
# running Slurm's major.minor, so the build states what it was built against).
AC_DEFUN([SK_CHECK_SLURM], [
  AC_ARG_WITH([slurm],
    [AS_HELP_STRING([--with-slurm=PREFIX], [Slurm installation prefix holding include/slurm/spank.h])],
    [sk_slurm_prefix=$withval], [sk_slurm_prefix=])
  SLURM_CPPFLAGS=
  AS_IF([test -z "$sk_slurm_prefix"],
    [PKG_CHECK_MODULES([SLURM_PC], [slurm], [SLURM_CPPFLAGS=$SLURM_PC_CFLAGS], [:])],
    [SLURM_CPPFLAGS="-I$sk_slurm_prefix/include"])
  AC_LANG_PUSH([C++])
  sk_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $SLURM_CPPFLAGS"
  AC_CHECK_HEADER([slurm/spank.h], [],
    [AC_MSG_ERROR([slurm/spank.h not found. Install Slurm's development headers (Debian: apt-get install libslurm-dev) or pass --with-slurm=PREFIX.])],
    [[extern "C" {
#include <slurm/spank.h>
}]])
  AC_MSG_CHECKING([the Slurm version the plugin is built against])
  AC_COMPUTE_INT([sk_slurm_version_number], [SLURM_VERSION_NUMBER],
    [[#include <slurm/slurm_version.h>]],
    [AC_MSG_ERROR([cannot read SLURM_VERSION_NUMBER from slurm/slurm_version.h])])
  SLURM_VERSION_STRING=$(( sk_slurm_version_number >> 16 & 255 )).$(( sk_slurm_version_number >> 8 & 255 )).$(( sk_slurm_version_number & 255 ))
  AC_MSG_RESULT([$SLURM_VERSION_STRING])
  CPPFLAGS=$sk_save_CPPFLAGS
  AC_LANG_POP([C++])
  AC_DEFINE_UNQUOTED([SK_SLURM_VERSION_STRING], ["$SLURM_VERSION_STRING"], [Slurm version the plugin was built against])
  AC_SUBST([SLURM_CPPFLAGS])
  AC_SUBST([SLURM_VERSION_STRING])
])
