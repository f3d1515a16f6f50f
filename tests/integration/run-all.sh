#!/usr/bin/env bash
# The integration layer: every script here and the Slurm smoke test, each
# starting and stopping its own real Slurm cluster through tests/slurm/.
# Needs root (slurmd, munge, mknod): as another user it runs nothing and
# exits 77 (automake's "skipped"), so that nothing reads a skip as a pass.
# Prints each script's summary and a final "integration: N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)

if [ "$(id -u)" != 0 ]; then
  echo "integration: skipped (needs root to run slurmd and munged)"
  exit 77
fi

passed=0 failed=0
run() {
  local name=$1; shift
  echo "--- $name"
  local out rc
  out=$(mktemp)
  "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E "^([a-z0-9-]+: )?[0-9]+ passed, [0-9]+ failed" "$out" | tail -1)
  if [ "$rc" = 77 ]; then
    echo "$name: skipped"
  elif [ -n "$line" ]; then
    passed=$((passed + $(sed -nE 's/.*\b([0-9]+) passed.*/\1/p' <<<"$line")))
    failed=$((failed + $(sed -nE 's/.*\b([0-9]+) failed.*/\1/p' <<<"$line")))
    [ "$rc" != 0 ] && ! grep -qE "[1-9][0-9]* failed" <<<"$line" && failed=$((failed + 1))
  else
    [ "$rc" = 0 ] && passed=$((passed + 1)) || failed=$((failed + 1))
  fi
  rm -f "$out"
}

run smoke bash "$top/tests/slurm/smoke.sh"
for t in "$here"/test_*.sh; do
  [ -e "$t" ] || continue
  run "$(basename "$t" .sh)" bash "$t"
done

echo "integration: $passed passed, $failed failed"
[ "$failed" = 0 ]
