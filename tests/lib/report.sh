# The one result protocol of the test layers (README.md, "Building by
# hand"), sourced by every script layer.
#
# Each check is one TAP line appended to $SK_RESULT_FILE when it is set:
#   ok - DESCRIPTION             passed
#   not ok - DESCRIPTION         failed
#   ok - DESCRIPTION # SKIP      skipped (never counted as passed)
# beside what the script prints for people ("PASS: ...", "FAIL: ...",
# "N passed, N failed"). A line is one write() to a file opened O_APPEND, so
# the subshells and processes of a layer share one file. tests/lib/results.py
# reads the files: scripts/run-tests.sh adds the layers up from them, never
# from what the layers print.

REPORT_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# report_record pass|fail|skip DESCRIPTION
report_record() {
  [ -n "${SK_RESULT_FILE:-}" ] || return 0
  local d="${2//$'\n'/ }"
  case "$1" in
    pass) printf 'ok - %s\n' "$d" >>"$SK_RESULT_FILE" ;;
    fail) printf 'not ok - %s\n' "$d" >>"$SK_RESULT_FILE" ;;
    skip) printf 'ok - %s # SKIP\n' "$d" >>"$SK_RESULT_FILE" ;;
  esac
}

# report_run NAME COMMAND...: runs a layer (or a part of one) with a result
# file of its own, prints its output, adds its records to this script's
# (SK_RESULT_FILE, when set) and its counts to REPORT_PASSED, REPORT_FAILED
# and REPORT_SKIPPED. What its records cannot say is recorded for it: exit 77
# (automake's "skipped") with no record, a skip; another non-zero exit
# without a failed check, a failure; an exit 0 without a single record, a
# failure ("asserted nothing"). Returns the command's exit status.
REPORT_PASSED=0 REPORT_FAILED=0 REPORT_SKIPPED=0
report_run() {
  local name=$1 rc file counts p f s
  shift
  file=$(mktemp "${TMPDIR:-/tmp}/sk-result.XXXXXX") || return 1
  SK_RESULT_FILE="$file" "$@"
  rc=$?
  counts=$(python3 "$REPORT_LIB_DIR/results.py" count "$file")
  read -r p f s <<<"$counts"
  if [ "$rc" = 77 ] && [ "$((p + f))" = 0 ]; then
    SK_RESULT_FILE="$file" report_record skip "$name (a tool or a privilege it needs is missing: exit 77)"
    s=$((s + 1))
  elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
    SK_RESULT_FILE="$file" report_record fail "$name exited $rc without a failed check"
    f=1
  elif [ "$rc" = 0 ] && [ "$((p + f + s))" = 0 ]; then
    SK_RESULT_FILE="$file" report_record fail "$name asserted nothing"
    f=1
  fi
  [ -n "${SK_RESULT_FILE:-}" ] && cat "$file" >>"$SK_RESULT_FILE"
  rm -f "$file"
  REPORT_PASSED=$((REPORT_PASSED + p)) REPORT_FAILED=$((REPORT_FAILED + f))
  REPORT_SKIPPED=$((REPORT_SKIPPED + s))
  return "$rc"
}
