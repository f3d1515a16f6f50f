# Valgrind memcheck over the agent's component tests: opt-in, not part of
# `make check` (it takes minutes). tests/pylib/sktest/memcheck.py is the wrapper
# the component harness (tests/pylib/sktest/env.py) loads.
EXTRA_DIST += \
	tests/valgrind/run.sh \
	tests/valgrind/sigterm_busy.py \
	tests/valgrind/slurm-k8s.supp

# The fake-runtime suites start the agent's test build (tests/agent/local.mk).
check-valgrind: all tests/agent/slurm-k8s-test-agent$(EXEEXT)
	SK_TOP_SRCDIR='$(abs_top_srcdir)' SK_TOP_BUILDDIR='$(abs_top_builddir)' \
	  PYTHON3='$(PYTHON3)' bash $(top_srcdir)/tests/valgrind/run.sh

.PHONY: check-valgrind
