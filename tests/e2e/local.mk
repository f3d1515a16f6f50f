# tests/e2e: the end-to-end scenario's library and the fault/bad-input tests
# (real Slurm + agents + the API test double; root). Run by
# tests/integration/test_e2e.sh (make check-integration) and
# scripts/run-scenario.sh; not part of `make check`.
EXTRA_DIST += \
	tests/e2e/lib.sh \
	tests/e2e/online_rl.sh \
	tests/e2e/cases.sh \
	tests/e2e/run-all.sh \
	tests/e2e/watch.py \
	tests/integration/test_e2e.sh

# The scenario's programs and manifests (scripts/run-scenario.sh).
EXTRA_DIST += \
	examples/online-rl/train.sbatch \
	examples/online-rl/trainer.py \
	examples/online-rl/rollout.py \
	examples/online-rl/reward.py \
	examples/online-rl/rollout.yaml \
	examples/online-rl/reward.yaml
