#!/usr/bin/env bash
# The e2e layer (run-all.sh) with an ASan + UBSan agent and shim: SK_DAEMON_BUILD_DIR
# names that build (configure --enable-sanitizers), SK_BUILD_DIR the normal build whose
# plugin slurmd loads (slurmd is not instrumented). The agents and the shims (through
# slurmd, slurmstepd and the plugin, which pass the *SAN_OPTIONS on) write any report
# into a private directory, which must stay empty.
# Run by `make distcheck` in scripts/run-tests.sh (tests/build/local.mk, installcheck-local).
# Prints run-all.sh's output, then "sanitizers e2e: N passed, N failed" (run-all's
# counts) and "sanitizers e2e reports: N passed, N failed"; exits 1 on a failure.
# The checks, the reports' among them, are records of the one result protocol
# (tests/lib/report.sh) in $SK_RESULT_FILE.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib/report.sh
source "$here/../lib/report.sh"
: "${SK_DAEMON_BUILD_DIR:?the sanitizer build}" "${SK_BUILD_DIR:?the normal build (its plugin)}"
# Under /tmp: the shims run as the test user, who may not reach the build trees.
reports=$(mktemp -d /tmp/sk-sanitizer-reports.XXXXXX)
chmod 1777 "$reports"
out=$(mktemp /tmp/sk-sanitizer-e2e.XXXXXX)
trap 'rm -rf "$reports" "$out"' EXIT
ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1" \
UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1" \
LSAN_OPTIONS="log_path=$reports/lsan" \
  bash "$here/run-all.sh" 2>&1 | tee "$out"
line=$(grep -E '^e2e: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
rc=0
echo "sanitizers ${line:-e2e: 0 passed, 1 failed (no summary line)}"
[ -n "$line" ] && ! grep -qE ' [1-9][0-9]* failed' <<<"$line" || rc=1
if [ -n "$(find "$reports" -type f -size +0 2>/dev/null)" ]; then
  for f in "$reports"/*; do [ -s "$f" ] && { echo "--- $f"; head -c 6000 "$f"; }; done
  echo "sanitizers e2e reports: 0 passed, 1 failed"
  report_record fail "sanitizers e2e: the agents and shims wrote ASan/UBSan/LSan reports"
  rc=1
else
  echo "sanitizers e2e reports: 1 passed, 0 failed (none)"
  report_record pass "sanitizers e2e: no ASan/UBSan/LSan report from the agents and shims"
fi
exit "$rc"
