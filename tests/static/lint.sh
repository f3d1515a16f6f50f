#!/usr/bin/env bash
# Static analysis: clang-tidy (.clang-tidy) and cppcheck
# (tests/static/cppcheck-suppressions.txt) over the sources in LINT_DIRS,
# using a compile database recorded with bear from a separate normal build
# (SK_LINT_BUILDDIR, default one per source tree under ${TMPDIR:-/tmp};
# configured once, then rebuilt incrementally with --append so changed files are re-recorded).
#
#   LINT_DIRS="common spank" tests/static/lint.sh      (make lint does this)
#
# Prints the findings and "lint: clang-tidy N findings, cppcheck M findings";
# exits 1 when there is any, 77 when a tool is missing.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "${SK_TOP_SRCDIR:-$here/../..}" && pwd)
dirs=${LINT_DIRS:-common spank agent k8s-shim cli tests/unit tests/fuzz tests/component}
# The default build is one per source tree: a build configured from another
# checkout would lint that checkout's files.
build=${SK_LINT_BUILDDIR:-${TMPDIR:-/tmp}/build-lint-$(printf '%s' "$top" | md5sum | cut -c1-8)}
jobs=${SK_LINT_JOBS:-2}

tidy=
for t in clang-tidy clang-tidy-14 clang-tidy-16; do command -v "$t" >/dev/null && { tidy=$t; break; }; done
for tool in "$tidy" cppcheck bear; do
  [ -n "$tool" ] && command -v "$tool" >/dev/null \
    || { echo "SKIP: lint needs clang-tidy, cppcheck and bear (apt-get install clang-tidy cppcheck bear)"; exit 77; }
done

mkdir -p "$build"
# A build configured from another source tree is made again from nothing (its
# dependency files and compile database name that tree's sources).
if [ -f "$build/Makefile" ] && \
   [ "$(sed -n 's/^abs_top_srcdir = //p' "$build/Makefile")" != "$top" ]; then
  echo "lint.sh: $build was configured from another source tree; building it again"
  rm -rf "$build" && mkdir -p "$build"
fi
if [ ! -f "$build/Makefile" ]; then
  (cd "$build" && "$top/configure" -q) || { echo "lint.sh: configure failed ($build/config.log)" >&2; exit 1; }
fi
db="$build/compile_commands.json"
append=()
[ -f "$db" ] && append=(--append)
# `check TESTS=` builds the test programs without running any. -k: a file
# that does not compile (someone's work in progress) must not hide the rest;
# bear records every compiler call, failed or not.
# SK_LINT_DB_READY=1: the caller recorded the database with a complete build
# (scripts/run-tests.sh, which runs tests in that tree meanwhile): no make.
if [ "${SK_LINT_DB_READY:-0}" != 1 ]; then
  # bear's compiler wrappers, not its preloaded library (which reports every
  # process of libtool's scripts: far slower).
  (cd "$build" && bear --force-wrapper --output "$db" "${append[@]}" -- make -k -s -j"$jobs" all >"$build/lint-build.log" 2>&1
   bear --force-wrapper --output "$db" --append -- make -k -s -j"$jobs" check TESTS= >>"$build/lint-build.log" 2>&1) \
    || echo "lint.sh: warning: the build has errors (see $build/lint-build.log); linting what it compiled"
fi
[ -f "$db" ] || { echo "lint.sh: no compile database $db" >&2; exit 1; }

# The translation units of LINT_DIRS in the database (absolute paths, unique).
files=$(python3 - "$db" "$top" $dirs <<'PY'
import json, os, sys
db, top, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
seen = set()
for e in json.load(open(db)):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    rel = os.path.relpath(f, top)
    if any(rel.startswith(d.rstrip("/") + "/") for d in dirs) and f not in seen:
        seen.add(f)
        print(f)
PY
)
[ -n "$files" ] || { echo "lint.sh: no sources of '$dirs' in $db" >&2; exit 1; }

dir_re=$(echo "$dirs" | sed 's/ \+/|/g')
out="$build/lint"
mkdir -p "$out"
# clang-tidy: headers of LINT_DIRS too; one process per file, $jobs at a time.
# The test programs (tests/) get every check but the path-sensitive analyzer
# (clang-analyzer-*: about two thirds of clang-tidy's time, and what it finds,
# a leak or a null path in a test, costs a test run, not a node) and the
# function size (a test's tables are long by design).
run_tidy() {
  xargs -r -P "$jobs" -n 1 "$tidy" -p "$build" --quiet "$@" \
    --header-filter="^$top/($dir_re)/" --extra-arg=-Wno-unknown-warning-option --extra-arg=-std=c++17
}
{ grep -v "^$top/tests/" <<<"$files" | run_tidy
  grep "^$top/tests/" <<<"$files" | run_tidy '--checks=-clang-analyzer-*,-readability-function-size'
} >"$out/clang-tidy.txt" 2>"$out/clang-tidy.err"
# A header's finding is reported once per including file: keep the first.
grep -E '^/.*: (warning|error): ' "$out/clang-tidy.txt" | sort -u >"$out/clang-tidy.findings"
tidy_n=$(wc -l <"$out/clang-tidy.findings")

filters=()
for d in $dirs; do filters+=("--file-filter=$top/$d/*"); done
cppcheck --project="$db" "${filters[@]}" -j "$jobs" --quiet --std=c++17 --library=posix \
  --enable=warning,performance,portability --inline-suppr \
  --suppressions-list="$here/cppcheck-suppressions.txt" \
  --template='{file}:{line}:{column}: {severity}: {message} [{id}]' \
  2>"$out/cppcheck.txt" >/dev/null
sort -u "$out/cppcheck.txt" | grep -E '^/.*: ' >"$out/cppcheck.findings"
cpp_n=$(wc -l <"$out/cppcheck.findings")

cat "$out/clang-tidy.findings" "$out/cppcheck.findings" | sed "s|^$top/||"
echo "lint: clang-tidy $tidy_n findings, cppcheck $cpp_n findings (dirs: $dirs; details in $out)"
# Each tool's verdict a record of the one result protocol (tests/lib/report.sh).
# shellcheck source=../lib/report.sh
. "$here/../lib/report.sh"
for t in clang-tidy cppcheck; do
  n=$tidy_n; [ "$t" = cppcheck ] && n=$cpp_n
  if [ "$n" -eq 0 ]; then report_record pass "lint: $t finds nothing"; else report_record fail "lint: $t: $n findings ($out)"; fi
done
[ "$tidy_n" -eq 0 ] && [ "$cpp_n" -eq 0 ]
