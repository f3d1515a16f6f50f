#!/usr/bin/env bash
# `make format-check`: clang-format --dry-run -Werror (the repository's
# .clang-format) over every tracked C/C++ source; in an unpacked tarball (no
# git) over every *.c, *.cc and *.h of the tree. Prints the files that would
# change and "format-check: N passed, N failed"; exits 1 when any would,
# 77 when clang-format is missing.
set -uo pipefail
top=${SK_TOP_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cf=${CLANG_FORMAT:-clang-format}
command -v "$cf" >/dev/null 2>&1 \
  || { echo "SKIP: format-check needs clang-format (apt-get install clang-format)"; exit 77; }
cd "$top" || exit 1
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.c' '*.cc' '*.h')
else
  mapfile -t files < <(find . -path ./build -prune -o -type f \( -name '*.c' -o -name '*.cc' -o -name '*.h' \) \
    ! -path ./config.h -print | sed 's|^\./||' | sort)
fi
# shellcheck source=../lib/report.sh
source "$top/tests/lib/report.sh"
passed=0 failed=0
for f in "${files[@]}"; do
  if "$cf" --dry-run -Werror --style=file "$f" >/dev/null 2>&1; then
    passed=$((passed + 1))
    report_record pass "format: $f"
  else
    echo "FAIL: $f (clang-format --dry-run -Werror; fix with: $cf -i $f)"
    failed=$((failed + 1))
    report_record fail "format: $f (fix with: $cf -i $f)"
  fi
done
echo "format-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
