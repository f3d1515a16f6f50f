#!/bin/sh
# Component tests of slurm-k8s-shim with real processes (tests/shim/driver.py
# plays the agent). Runs as a normal user in about 30 s.
set -u
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/shim/driver.py" "$SK_TOP_BUILDDIR/k8s-shim/slurm-k8s-shim" "$@"
