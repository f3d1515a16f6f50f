# SK_CHECK_GNUTLS: GnuTLS >= 3.6 through pkg-config; the kubelet endpoint
# verifies the API server's client certificate with it (libmicrohttpd's TLS
# backend is GnuTLS too).
AC_DEFUN([SK_CHECK_GNUTLS], [
  PKG_CHECK_MODULES([GNUTLS], [gnutls >= 3.6], [],
    [AC_MSG_ERROR([gnutls >= 3.6 not found: $GNUTLS_PKG_ERRORS
Install it (Debian: apt-get install libgnutls28-dev) or set PKG_CONFIG_PATH.])])
])
