#!/usr/bin/env bash
# make check: the one result protocol itself (tests/lib/report.sh, tests/lib/results.py):
# what report_run records for a command that fails without a failed check, asserts nothing,
# exits 77, or fails one of its checks; what the summary counts and its exit status.
# Prints "report: N passed, N failed".
set -u
unset SK_RESULT_FILE  # its records are its own, not a caller's
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=report.sh
source "$here/report.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/sk-report-test.XXXXXX")
trap 'rm -rf "$t"' EXIT
passed=0 failed=0
expect() {  # expect NAME WANT GOT
  if [ "$2" = "$3" ]; then echo "PASS: $1"; passed=$((passed + 1))
  else echo "FAIL: $1: want [$2] got [$3]"; failed=$((failed + 1)); fi
}
f="$t/01-layer.tap"
: >"$f"
SK_RESULT_FILE="$f" report_run "exit1" bash -c "exit 1"; rc1=$?
SK_RESULT_FILE="$f" report_run "silent" true
SK_RESULT_FILE="$f" report_run "skipped" bash -c "exit 77"
SK_RESULT_FILE="$f" report_run "one-fails" bash -c \
  "source '$here/report.sh'; report_record pass x; report_record fail y; exit 1"
SK_RESULT_FILE="$f" report_run "passes" bash -c \
  "source '$here/report.sh'; report_record pass 'z
on two lines'; report_record skip w"
expect "report_run returns the command's exit status" 1 "$rc1"
expect "its counters" "2 3 2" "$REPORT_PASSED $REPORT_FAILED $REPORT_SKIPPED"
expect "a failure without a failed check is one" "not ok - exit1 exited 1 without a failed check" "$(sed -n 1p "$f")"
expect "a run that asserted nothing is a failure" "not ok - silent asserted nothing" "$(sed -n 2p "$f")"
expect "exit 77 without a record is a skip" 1 "$(grep -c '^ok - skipped .*# SKIP$' "$f")"
expect "a failed check is not doubled by its exit status" 1 "$(grep -c '^not ok - y$' "$f")"
expect "a description stays on one line" "ok - z on two lines" "$(grep '^ok - z' "$f")"
expect "count: passed failed skipped" "2 3 2" "$(python3 "$here/results.py" count "$f")"
out=$(python3 "$here/results.py" summary "$t"); rc=$?
expect "summary: the layer's line" "layer: 2 passed, 3 failed, 2 skipped" "$(sed -n 1p <<<"$out")"
expect "summary: the total" "total: 2 passed, 3 failed, 2 skipped (not passed)" "$(tail -n 1 <<<"$out")"
expect "summary: exit 1 on a failure" 1 "$rc"
mkdir "$t/ok" && printf 'ok - a\n1..1\n# comment\n' >"$t/ok/01-good.tap"
python3 "$here/results.py" summary "$t/ok" >/dev/null; expect "summary: exit 0 without one" 0 "$?"
mkdir -p "$t/trs/tests" && printf ':test-result: PASS\n' >"$t/trs/tests/a.trs" \
  && printf ':test-result: FAIL\n' >"$t/trs/tests/b.trs" && printf ':test-result: SKIP\n' >"$t/trs/tests/c.trs"
expect "from-trs: automake's results as records" "ok - tests/a|not ok - tests/b (FAIL)|ok - tests/c # SKIP" \
  "$(python3 "$here/results.py" from-trs "$t/trs" | paste -sd'|')"
printf 'ok   first\nnot ok second (got 3)\nFAIL: third\nnot ok 4 - fourth\nnot ok fifth\n' >"$t/trs/tests/b.log"
expect "from-trs: a failed test's record names the checks its log says failed" \
  "not ok - tests/b (FAIL: second (got 3); third; fourth; and 1 more)" \
  "$(python3 "$here/results.py" from-trs "$t/trs" | grep tests/b)"
echo "report: $passed passed, $failed failed"
[ "$failed" = 0 ]
