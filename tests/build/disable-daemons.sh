#!/usr/bin/env bash
# `make check-disable-daemons`: proves that `./configure --disable-daemons &&
# make` builds spank_k8s.so on a host without the daemons' development
# packages (libuv, libcurl, jsoncpp, libmicrohttpd, GnuTLS, libseccomp). In a private
# mount namespace (unshare -m; unshare -rm as a normal user) their headers and
# pkg-config files are taken away (/usr/include and the pkg-config directory
# replaced by copies without them, their static and development libraries
# covered by /dev/null), then a fresh build directory is configured with
# --disable-daemons, built, and the plugin's unit tests run there.
# Prints "disable-daemons: N passed, N failed"; exits 77 when there is no
# dpkg or no way to make a mount namespace.
set -uo pipefail
top=${SK_TOP_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
pkgs=(libuv1-dev libcurl4-openssl-dev libcurl4-gnutls-dev libjsoncpp-dev libmicrohttpd-dev libgnutls28-dev libseccomp-dev)

if [ "${SK_IN_NAMESPACE:-0}" != 1 ]; then
  command -v dpkg >/dev/null 2>&1 || { echo "SKIP: disable-daemons needs dpkg (to list the packages' files)"; exit 77; }
  ns=(unshare -m --propagation private)
  [ "$(id -u)" = 0 ] || ns=(unshare -r -m --propagation private)
  "${ns[@]}" true 2>/dev/null || { echo "SKIP: disable-daemons needs a mount namespace (unshare -m)"; exit 77; }
  SK_IN_NAMESPACE=1 SK_TOP_SRCDIR="$top" exec "${ns[@]}" bash "${BASH_SOURCE[0]}"
fi

passed=0 failed=0
# shellcheck source=../lib/report.sh
source "$top/tests/lib/report.sh"
check() {  # check NAME COMMAND...: one counted step (and a record of it)
  local name=$1; shift
  if "$@"; then
    echo "PASS: $name"; passed=$((passed + 1)); report_record pass "disable-daemons: $name"
  else
    echo "FAIL: $name"; failed=$((failed + 1)); report_record fail "disable-daemons: $name"
  fi
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sk-disable-daemons.XXXXXX")
[ "${SK_KEEP:-0}" = 1 ] || trap 'umount -l "$work" 2>/dev/null; rmdir "$work"' EXIT
mount -t tmpfs tmpfs "$work" || exit 1
pcdir=$(pkg-config --variable pc_path pkg-config | tr ':' '\n' | grep -m1 "/usr/lib/.*/pkgconfig")
mkdir -p "$work/include" "$work/pkgconfig" "$work/build"
cp -a /usr/include/. "$work/include/"
cp -a "$pcdir/." "$work/pkgconfig/"
hidden=0 present=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || continue
  present+=("$p")
  while read -r f; do
    [ -d "$f" ] && [ ! -L "$f" ] && continue  # shared directories stay; their files go
    case $f in
      /usr/include/*) rm -rf "$work/include/${f#/usr/include/}" ;;
      "$pcdir"/*.pc) rm -f "$work/pkgconfig/${f#"$pcdir"/}" ;;
      /usr/lib/*.so | /usr/lib/*.a) [ -e "$f" ] && mount --bind /dev/null "$f" ;;
      *) continue ;;
    esac
    hidden=$((hidden + 1))
  done < <(dpkg -L "$p")
done
mount --bind "$work/include" /usr/include || exit 1
mount --bind "$work/pkgconfig" "$pcdir" || exit 1
echo "disable-daemons: $hidden files of ${present[*]:-no installed package} hidden"

absent() {  # none of the daemons' libraries can be found
  local m
  for m in libuv libcurl jsoncpp libmicrohttpd gnutls; do
    pkg-config --exists "$m" && { echo "pkg-config still finds $m"; return 1; }
  done
  for h in uv.h curl/curl.h json/json.h microhttpd.h gnutls/gnutls.h; do
    echo "#include <$h>" | ${CXX:-g++} -E -x c++ - >/dev/null 2>&1 && { echo "<$h> still found"; return 1; }
  done
  return 0
}
check "the daemons' headers and pkg-config files are gone" absent
b=$work/build
check "configure --disable-daemons" \
  bash -c "cd '$b' && '$top/configure' --disable-daemons --enable-werror >configure.out 2>&1 || { tail -20 configure.out; exit 1; }"
check "make builds spank_k8s.so" \
  bash -c "make -C '$b' -j${SK_JOBS:-2} >'$b/make.out' 2>&1 || { grep -E 'error|Error' '$b/make.out' | head -20; exit 1; }"
only_plugin() {
  [ -f "$b/spank/.libs/spank_k8s.so" ] || { echo "no spank_k8s.so"; return 1; }
  local x
  for x in agent/slurm-k8s-agent k8s-shim/slurm-k8s-shim cli/slurm-k8s; do
    [ -e "$b/$x" ] && { echo "$x was built"; return 1; }
  done
  ldd "$b/spank/.libs/spank_k8s.so" | grep -E "libjsoncpp|libuv|libcurl|libmicrohttpd|libgnutls" && return 1
  return 0
}
check "only the plugin, linking none of the daemons' libraries" only_plugin
check "the plugin's unit tests" \
  bash -c "make -C '$b' -j${SK_JOBS:-2} check TESTS='tests/unit/test_spank_logic tests/unit/test_spank_hooks tests/unit/test_plugin_symbols' >'$b/check.out' 2>&1 || { grep -E '^(FAIL|ERROR)' '$b/check.out'; cat '$b'/tests/unit/*.log | grep -v ':P:' | head -20; exit 1; }"
grep -E "^(PASS|FAIL|SKIP):" "$b/check.out" 2>/dev/null | sed 's/^/  /'
echo "disable-daemons: $passed passed, $failed failed"
[ "$failed" = 0 ]
