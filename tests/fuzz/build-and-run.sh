#!/usr/bin/env bash
# Builds the libFuzzer targets in a separate clang build and runs each for a
# bounded time (tests/fuzz/README.md).
#
#   build-and-run.sh [--seconds N] [--jobs N] [--build-dir DIR] [--build-only] [TARGET...]
#
# TARGET is a name (protocol, json, ...); default: every tests/fuzz/fuzz_*.cc.
# The build dir (SK_FUZZ_BUILDDIR, default one per source tree under
# ${TMPDIR:-/tmp}) is configured once with clang++, CXXFLAGS='-fsanitize=fuzzer-no-link,address,
# undefined ... -g1 -O1' and reused. The source tree is never written: new inputs go to
# BUILD/tests/fuzz/work/<target>/, crashes to BUILD/tests/fuzz/artifacts/<target>/.
# Prints one PASS/FAIL line per target and "N passed, N failed"; exits 1 on a
# failure, 77 (automake's SKIP) when clang++ or libFuzzer is missing.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
seconds=${SK_FUZZ_SECONDS:-20}
jobs=${SK_FUZZ_JOBS:-2}
# The default build is one per source tree: a build configured from another
# checkout builds that checkout's files (or fails once it is gone).
build=${SK_FUZZ_BUILDDIR:-${TMPDIR:-/tmp}/build-fuzz-$(printf '%s' "$top" | md5sum | cut -c1-8)}
build_only=0
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "build-and-run.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$here"/fuzz_*.cc; do
    n=${f##*/fuzz_}; targets+=("${n%.cc}")
  done
fi

# ---- toolchain: clang++ with libFuzzer, ASan and UBSan runtimes ----
cxx=${SK_FUZZ_CXX:-}
if [ -z "$cxx" ]; then
  for c in clang++ clang++-14 clang++-16 clang++-15; do
    command -v "$c" >/dev/null 2>&1 && { cxx=$c; break; }
  done
fi
if [ -z "$cxx" ]; then
  echo "SKIP: no clang++ (Debian: apt-get install clang libclang-rt-dev)"; exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t *, size_t) { return 0; }\n' \
  >"$probe/t.cc"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/t.cc" -o "$probe/t" >"$probe/log" 2>&1; then
  echo "SKIP: $cxx cannot link -fsanitize=fuzzer,address,undefined (libFuzzer runtime missing:" \
       "apt-get install libclang-rt-dev):"
  sed 's/^/  /' "$probe/log" | head -5
  exit 77
fi

# ---- build (configure included in the time printed) ----
t_start=$SECONDS
san='-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer'
mkdir -p "$build"
# A build configured from another source tree is made again from nothing (its
# dependency files name that tree's sources).
if [ -f "$build/Makefile" ] && \
   [ "$(sed -n 's/^abs_top_srcdir = //p' "$build/Makefile")" != "$top" ]; then
  echo "build-and-run.sh: $build was configured from another source tree; building it again"
  rm -rf "$build" && mkdir -p "$build"
fi
if [ ! -f "$build/Makefile" ]; then
  echo "build-and-run.sh: configuring $build with $cxx"
  (cd "$build" && CXX=$cxx CXXFLAGS="$san -g1 -O1" "$top/configure" -q --disable-hardening) \
    || { echo "build-and-run.sh: configure failed (see $build/config.log)" >&2; exit 1; }
fi
bins=()
for t in "${targets[@]}"; do
  [ -f "$here/fuzz_$t.cc" ] || { echo "build-and-run.sh: no target $t (tests/fuzz/fuzz_$t.cc)" >&2; exit 2; }
  bins+=("tests/fuzz/bin/fuzz_$t")
done
make -C "$build" -s -j"$jobs" "${bins[@]}" >"$build/fuzz-build.log" 2>&1 \
  || { tail -30 "$build/fuzz-build.log"; echo "build-and-run.sh: build failed ($build/fuzz-build.log)" >&2; exit 1; }
[ "$build_only" = 1 ] && { echo "build-and-run.sh: built ${bins[*]} in $build"; exit 0; }
t_built=$SECONDS

# ---- run, $jobs targets at a time ----
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
out="$build/tests/fuzz"
run_one() {
  local t=$1 work="$out/work/$1" art="$out/artifacts/$1/" log="$out/logs/$1.log"
  mkdir -p "$work" "$art" "$out/logs"
  local seeds=("$here/corpus/$t")
  [ -d "$here/regressions/$t" ] && seeds+=("$here/regressions/$t")
  # -timeout: one input running 10 s is a hang; the outer timeout catches a stuck binary.
  timeout $((seconds + 120)) "$build/tests/fuzz/bin/fuzz_$t" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$art" -print_final_stats=1 \
    "$work" "${seeds[@]}" >"$log" 2>&1
  echo $? >"$out/logs/$t.rc"
}
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

# Each target's verdict also a record of the one result protocol.
# shellcheck source=../lib/report.sh
source "$top/tests/lib/report.sh"
passed=0 failed=0
for t in "${targets[@]}"; do
  rc=$(cat "$out/logs/$t.rc" 2>/dev/null || echo 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/logs/$t.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$out/logs/$t.log" | tail -1)
  if [ "$rc" = 0 ]; then
    echo "PASS: $t (${runs:-?} runs, ${cov:-cov: ?})"
    report_record pass "fuzz: $t"
    passed=$((passed + 1))
  else
    echo "FAIL: $t (exit $rc; log $out/logs/$t.log)"
    report_record fail "fuzz: $t (exit $rc; log $out/logs/$t.log)"
    grep -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fuzz property violated|SUMMARY' \
      "$out/logs/$t.log" | head -5 | sed 's/^/  /'
    ls "$out/artifacts/$t/" 2>/dev/null | sed "s|^|  crash input: $out/artifacts/$t/|"
    failed=$((failed + 1))
  fi
done
echo "fuzz: build $((t_built - t_start)) s, ${#targets[@]} targets x $seconds s in $((SECONDS - t_built)) s ($jobs at a time)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
