#!/usr/bin/env bash
# The online-RL loop with every part a plain process on this machine: no
# Slurm, no Kubernetes. The same programs as train.sbatch and the manifests
# run (1 reward service, ROLLOUTS rollout services, RANKS trainer ranks),
# so a run here and a run in an allocation can be compared side by side
# (bench/bench_online_rl.sh) and the learning settings tried quickly.
#
#   examples/online-rl/run-local.sh [OUTDIR]
#
# Settings: RANKS [3], ROLLOUTS [3], BASE_PORT [18180] (reward at BASE_PORT,
# rollouts at BASE_PORT+1..), MASTER_PORT [BASE_PORT+100], and the trainer's
# (STEPS, PROMPTS, GROUP, LR, SEED, MARGIN, MAX_STALENESS: trainer.py).
# Writes OUTDIR (default a new temporary directory)/online-rl-local.json
# (and .png) and the services' logs; exits with the trainer ranks' worst code.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$(mktemp -d)}
ranks=${RANKS:-3} rollouts=${ROLLOUTS:-3} base=${BASE_PORT:-18180}
py=${PYTHON3:-python3}
mkdir -p "$out"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

wait_http() {  # wait_http URL: until it answers (services start in ~0.2 s)
  local i
  for i in $(seq 1 100); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done
  echo "run-local: $1 did not answer" >&2; return 1
}

PORT=$base POD_NAME=reward "$py" "$here/reward.py" >"$out/reward.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$base/healthz" || exit 1
: >"$out/endpoints.tmp"
for i in $(seq 1 "$rollouts"); do
  PORT=$((base + i)) POD_NAME=rollout-$i REWARD_URL=http://127.0.0.1:$base \
    "$py" "$here/rollout.py" >"$out/rollout-$i.log" 2>&1 &
  pids+=($!)
  echo "127.0.0.1:$((base + i))" >>"$out/endpoints.tmp"
done
for i in $(seq 1 "$rollouts"); do wait_http "http://127.0.0.1:$((base + i))/healthz" || exit 1; done
mv "$out/endpoints.tmp" "$out/endpoints.txt"

tpids=()
for r in $(seq 0 $((ranks - 1))); do
  SLURM_PROCID=$r SLURM_NTASKS=$ranks SLURM_JOB_ID=local SLURMD_NODENAME=local \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-$((base + 100))} \
    ROLLOUT_ENDPOINTS_FILE="$out/endpoints.txt" SUMMARY_DIR="$out" \
    "$py" "$here/trainer.py" >"$out/trainer-$r.log" 2>&1 &
  tpids+=($!)
done
rc=0
for p in "${tpids[@]}"; do wait "$p"; c=$?; [ "$c" -gt "$rc" ] && rc=$c; done
cat "$out/trainer-0.log"
echo "run-local: trainer exit $rc; results in $out"
exit "$rc"
