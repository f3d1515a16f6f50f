#!/usr/bin/env bash
# Integration layer entry for the e2e fault and bad-input tests
# (tests/e2e/run-all.sh): real Slurm, real agents and shims, the API test
# double. Its last line is "e2e: N passed, N failed"; exit 77 = skipped.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/../e2e/run-all.sh" "$@"
