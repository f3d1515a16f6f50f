# SK_CHECK_JSONC: json-c >= 0.15 through pkg-config; sets JSONC_CFLAGS/JSONC_LIBS.
# The SPANK plugin's JSON (common/jsonc.h): needed by every build, the
# --disable-daemons one included.
AC_DEFUN([SK_CHECK_JSONC], [
  PKG_CHECK_MODULES([JSONC], [json-c >= 0.15], [],
    [AC_MSG_ERROR([json-c >= 0.15 not found: $JSONC_PKG_ERRORS
Install it (Debian: apt-get install libjson-c-dev) or set PKG_CONFIG_PATH.])])
])
