#!/usr/bin/env bash
# Short fuzz run for the test suite: every target for SK_FUZZ_SECONDS seconds
# (default 20), two at a time. Prints one line per target and
# "N passed, N failed"; exits 77 when clang++ or libFuzzer is missing.
# Any build-and-run.sh option may follow (--build-dir, target names).
exec bash "$(dirname "${BASH_SOURCE[0]}")/build-and-run.sh" --seconds "${SK_FUZZ_SECONDS:-20}" "$@"
