# Component tests: the real shim binary against a Python driver that plays
# the agent's side of the socket (tests/shim/driver.py).
EXTRA_DIST += \
	tests/shim/run.sh \
	tests/shim/driver.py \
	tests/shim/refuse_pivot_root.py

if BUILD_DAEMONS
TESTS += tests/shim/run.sh
endif
