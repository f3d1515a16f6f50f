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

# shellcheck source=../lib/report.sh
source "$top/tests/lib/report.sh"
# Each script's checks are records (tests/lib/report.sh), counted from there.
run() {
  local name=$1; shift
  echo "--- $name"
  report_run "$name" "$@" 2>&1
  [ $? = 77 ] && echo "$name: skipped"
}

run smoke bash "$top/tests/slurm/smoke.sh"
# The same cluster with each node a host of its own: its own network
# namespace and address, slurmctld and the clients in the site's
# (tests/slurm/hosts.sh).
run smoke-hosts env SK_NETNS=1 bash "$top/tests/slurm/smoke.sh"
for t in "$here"/test_*.sh; do
  [ -e "$t" ] || continue
  if [ "$(basename "$t")" = test_e2e.sh ] && [ "${SK_E2E_IN_DISTCHECK:-0}" = 1 ]; then
    echo "--- test_e2e: its cases run in the distcheck's ASan + UBSan build (scripts/run-tests.sh)"
    continue
  fi
  run "$(basename "$t" .sh)" bash "$t"
done

echo "integration: $REPORT_PASSED passed, $REPORT_FAILED failed"
[ "$REPORT_FAILED" = 0 ]
