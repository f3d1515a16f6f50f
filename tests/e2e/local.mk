# tests/e2e: the end-to-end scenario's library and the fault/bad-input tests
# (real Slurm + agents + the API test double; root). Run by
# tests/integration/test_e2e.sh (make check-integration) and
# scripts/run-scenario.sh; not part of `make check`.
EXTRA_DIST += \
	tests/e2e/lib.sh \
	tests/e2e/online_rl.sh \
	tests/e2e/cases.sh \
	tests/e2e/run-all.sh \
	tests/e2e/sanitizers.sh \
	tests/e2e/watch.py \
	tests/images/registry.sh

