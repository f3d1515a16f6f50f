# The scenario's programs and manifests (scripts/run-scenario.sh).
EXTRA_DIST += \
	examples/online-rl/train.sbatch \
	examples/online-rl/trainer.py \
	examples/online-rl/rollout.py \
	examples/online-rl/reward.py \
	examples/online-rl/rlcore.py \
	examples/online-rl/run-local.sh \
	examples/online-rl/README.md \
	examples/online-rl/rollout.yaml \
	examples/online-rl/reward.yaml \
	examples/online-rl/rollout-image.yaml \
	examples/online-rl/reward-image.yaml \
	examples/online-rl/build-images.sh

# vLLM's own GPU manifest on a job's virtual nodes, and its stand-in image
# (examples/vllm/README.md; e2e vllm).
EXTRA_DIST += \
	examples/vllm/README.md \
	examples/vllm/vllm-gpu.yaml \
	examples/vllm/site-pv.yaml \
	examples/vllm/standin/vllm \
	examples/vllm/standin/Containerfile
