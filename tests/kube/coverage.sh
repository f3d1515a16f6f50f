#!/bin/bash
# How much of the test double its own API suite runs (tests/kube/README.md, "Scope": each
# modelled behaviour asserted in test_kube_api.py, one that nothing asserts cut): runs
# tests/kube/run-tests.sh with the server under python3-coverage (Debian's python3-coverage)
# and prints the statement coverage per file, then every function of the double that no test
# of the suite ran (a candidate for an assertion or for the cut).
#   tests/kube/coverage.sh [OUT_DIR]     (default: a temporary directory, removed)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
"$PY" -m coverage --version >/dev/null 2>&1 \
    || { echo "coverage.sh: needs python3-coverage (apt-get install python3-coverage)"; exit 77; }
OUT=${1:-}
if [ -z "$OUT" ]; then
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/kube-coverage.XXXXXX")
    trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT"
rm -f "$OUT"/.coverage*
KUBE_SERVER_COVERAGE=$OUT bash "$HERE/run-tests.sh" >"$OUT/run-tests.out" 2>&1
rc=$?
tail -n 1 "$OUT/run-tests.out"
"$PY" -m coverage combine --data-file="$OUT/.coverage" "$OUT"/.coverage.* >/dev/null \
    || { echo "coverage.sh: no coverage data (did the server stop through its SIGTERM handler?)"; exit 1; }
"$PY" -m coverage report --data-file="$OUT/.coverage" | sed "s|$HERE/||"
"$PY" -m coverage json --data-file="$OUT/.coverage" -o "$OUT/coverage.json" >/dev/null
echo "functions no test of the API suite ran:"
"$PY" - "$OUT/coverage.json" "$HERE" <<'PY'
import ast, json, sys
data, here = json.load(open(sys.argv[1])), sys.argv[2] + "/"
for path, info in sorted(data["files"].items()):
    ran = set(info["executed_lines"])
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = {n.lineno for n in ast.walk(node) if n is not node and hasattr(n, "lineno")}
            if lines and not lines & ran:
                print("  %s:%d %s" % (path.replace(here, ""), node.lineno, node.name))
PY
exit "$rc"
