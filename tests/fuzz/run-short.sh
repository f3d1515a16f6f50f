#!/usr/bin/env bash
# Short fuzz run for CI and the test suite: every target for SK_FUZZ_SECONDS
# seconds (default 8), two at a time (SK_FUZZ_JOBS), in the clang build
# SK_FUZZ_BUILDDIR (default one per source tree under ${TMPDIR:-/tmp}; built on
# first use).
# Sized for CI: 17 targets x 8 s / 2 jobs = about 70 s of fuzzing, plus about
# 2-3 min for a fresh clang build on 2 cores. The long runs are fuzz-long's.
# Prints one PASS/FAIL line per target, then "N passed, N failed"; exits 0
# when all passed, 1 on a failure, 77 when clang++ or libFuzzer is missing.
# Any build-and-run.sh option may follow (--build-dir, --jobs, target names).
exec bash "$(dirname "${BASH_SOURCE[0]}")/build-and-run.sh" --seconds "${SK_FUZZ_SECONDS:-8}" "$@"
