# The Python helpers of the component, shim, soak, valgrind and bench layers
# (one importable package: tests/pylib/sktest).
EXTRA_DIST += \
	tests/pylib/sktest/__init__.py \
	tests/pylib/sktest/agent.py \
	tests/pylib/sktest/env.py \
	tests/pylib/sktest/h2front.py \
	tests/pylib/sktest/host.py \
	tests/pylib/sktest/kube.py \
	tests/pylib/sktest/memcheck.py \
	tests/pylib/sktest/programs.py \
	tests/pylib/sktest/suite.py
