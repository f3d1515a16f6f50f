# SK_CXX_FLAG_IFELSE(FLAG, [ACTION-IF-OK], [ACTION-IF-NOT])
# Compiles and links an empty program with FLAG added (and -Werror so that
# "unknown option" warnings count as failures).
AC_DEFUN([SK_CXX_FLAG_IFELSE], [
  AC_LANG_PUSH([C++])
  sk_save_CXXFLAGS=$CXXFLAGS
  CXXFLAGS="$CXXFLAGS -Werror $1"
  AC_MSG_CHECKING([whether $CXX accepts $1])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])],
    [AC_MSG_RESULT([yes]); $2], [AC_MSG_RESULT([no]); $3])
  CXXFLAGS=$sk_save_CXXFLAGS
  AC_LANG_POP([C++])
])

# SK_LD_FLAG_IFELSE(FLAG, [ACTION-IF-OK], [ACTION-IF-NOT])
AC_DEFUN([SK_LD_FLAG_IFELSE], [
  AC_LANG_PUSH([C++])
  sk_save_LDFLAGS=$LDFLAGS
  LDFLAGS="$LDFLAGS $1"
  AC_MSG_CHECKING([whether the linker accepts $1])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])],
    [AC_MSG_RESULT([yes]); $2], [AC_MSG_RESULT([no]); $3])
  LDFLAGS=$sk_save_LDFLAGS
  AC_LANG_POP([C++])
])

# SK_CXX17: C++17 is mandatory. Adds -std=c++17 to CXX when the compiler's
# default is older; fails configure when the compiler cannot do C++17.
AC_DEFUN([SK_CXX17], [
  AC_LANG_PUSH([C++])
  AC_MSG_CHECKING([whether $CXX supports C++17 by default])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#if __cplusplus < 201703L
#error not C++17
#endif
#include <optional>
#include <string_view>
]], [[std::optional<std::string_view> v; return v.has_value();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     sk_save_CXX=$CXX
     CXX="$CXX -std=c++17"
     AC_MSG_CHECKING([whether $CXX supports C++17])
     AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#if __cplusplus < 201703L
#error not C++17
#endif
]], [])],
       [AC_MSG_RESULT([yes])],
       [AC_MSG_RESULT([no]); AC_MSG_ERROR([slurm-k8s needs a C++17 compiler (g++ 8 or newer).])])])
  AC_LANG_POP([C++])
])

# SK_WARNINGS: warning flags go to SK_WARN_CXXFLAGS (used in AM_CXXFLAGS), never
# into the user's CXXFLAGS. --enable-werror turns them into errors.
AC_DEFUN([SK_WARNINGS], [
  AC_ARG_ENABLE([werror],
    [AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors])],
    [sk_werror=$enableval], [sk_werror=no])
  SK_WARN_CXXFLAGS=
  for sk_flag in -Wall -Wextra -Wshadow -Wformat=2 -Wnon-virtual-dtor \
                 -Wcast-qual -Wpointer-arith -Wundef -Wvla; do
    SK_CXX_FLAG_IFELSE([$sk_flag], [SK_WARN_CXXFLAGS="$SK_WARN_CXXFLAGS $sk_flag"])
  done
  AS_IF([test "x$sk_werror" = xyes], [SK_WARN_CXXFLAGS="$SK_WARN_CXXFLAGS -Werror"])
  AC_SUBST([SK_WARN_CXXFLAGS])
])

# SK_HARDENING: stack protector, _FORTIFY_SOURCE (only with optimisation:
# glibc warns at -O0), full RELRO. Kept in SK_HARDEN_* for AM_* variables.
AC_DEFUN([SK_HARDENING], [
  AC_ARG_ENABLE([hardening],
    [AS_HELP_STRING([--disable-hardening], [do not add stack protector, _FORTIFY_SOURCE and RELRO flags])],
    [sk_hardening=$enableval], [sk_hardening=yes])
  SK_HARDEN_CPPFLAGS=
  SK_HARDEN_CXXFLAGS=
  SK_HARDEN_LDFLAGS=
  AS_IF([test "x$sk_hardening" = xyes], [
    SK_CXX_FLAG_IFELSE([-fstack-protector-strong],
      [SK_HARDEN_CXXFLAGS="$SK_HARDEN_CXXFLAGS -fstack-protector-strong"])
    AS_CASE([" $CXXFLAGS "], [*" -O0 "*], [],
            [*" -O"*], [SK_HARDEN_CPPFLAGS="-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2"])
    SK_LD_FLAG_IFELSE([-Wl,-z,relro], [SK_HARDEN_LDFLAGS="$SK_HARDEN_LDFLAGS -Wl,-z,relro"])
    SK_LD_FLAG_IFELSE([-Wl,-z,now], [SK_HARDEN_LDFLAGS="$SK_HARDEN_LDFLAGS -Wl,-z,now"])
  ])
  AC_SUBST([SK_HARDEN_CPPFLAGS])
  AC_SUBST([SK_HARDEN_CXXFLAGS])
  AC_SUBST([SK_HARDEN_LDFLAGS])
])

# SK_SANITIZERS: --enable-sanitizers builds everything with ASan + UBSan for
# the test suite. The plugin cannot be loaded into slurmd under ASan, so the
# integration layer skips itself in such a build (SANITIZERS conditional).
AC_DEFUN([SK_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer (tests only)])],
    [sk_sanitizers=$enableval], [sk_sanitizers=no])
  SK_SAN_CXXFLAGS=
  SK_SAN_LDFLAGS=
  AS_IF([test "x$sk_sanitizers" = xyes], [
    sk_san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    SK_CXX_FLAG_IFELSE([$sk_san], [SK_SAN_CXXFLAGS="$sk_san"; SK_SAN_LDFLAGS="-fsanitize=address,undefined"],
      [AC_MSG_ERROR([--enable-sanitizers: $CXX cannot build with $sk_san])])
  ])
  AM_CONDITIONAL([SANITIZERS], [test "x$sk_sanitizers" = xyes])
  AC_SUBST([SK_SAN_CXXFLAGS])
  AC_SUBST([SK_SAN_LDFLAGS])
])
