#!/bin/sh
# The online-RL example's programs as plain processes (tests/examples/online_rl_test.py):
# the rollout's weight versions, its and the reward service's refusals, the loop learning,
# a rollout killed mid-run and started again. Runs as any user in about 30 s.
# Skipped (77) when python3 has no numpy (scripts/install-deps.sh installs python3-numpy).
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${PYTHON3:=python3}"
if ! "$PYTHON3" -c 'import numpy' 2>/dev/null; then
  echo "0 passed, 0 failed ($PYTHON3 has no numpy: apt-get install python3-numpy; SKIP)"
  exit 77
fi
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/examples/online_rl_test.py"
