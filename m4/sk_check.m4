# SK_CHECK_CHECK: the Check unit-test framework is optional. Without it the
# unit tests are not built (HAVE_CHECK conditional) and `make check` still runs
# the script tests; the configure summary says so.
AC_DEFUN([SK_CHECK_CHECK], [
  PKG_CHECK_MODULES([CHECK], [check >= 0.11], [sk_have_check=yes], [sk_have_check=no])
  AM_CONDITIONAL([HAVE_CHECK], [test "x$sk_have_check" = xyes])
])
