#!/usr/bin/env bash
# Integration layer entry for the e2e fault and bad-input tests
# (tests/e2e/run-all.sh): real Slurm, real agents and shims, the API test
# double. Its last line is "e2e: N passed, N failed"; exit 77 = skipped.
# SK_E2E_IN_DISTCHECK=1 (scripts/run-tests.sh, when its distcheck builds with
# the sanitizers and runs these cases there): nothing here, exit 77.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ "${SK_E2E_IN_DISTCHECK:-0}" = 1 ]; then
  echo "e2e: the cases run in the distcheck's ASan + UBSan build (scripts/run-tests.sh), not here"
  exit 77
fi
exec bash "$here/../e2e/run-all.sh" "$@"
