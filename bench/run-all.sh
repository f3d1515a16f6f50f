#!/bin/bash
# Runs every slurm-k8s benchmark and writes one results file plus the table.
#   bench/run-all.sh [RESULTS.json]        (default: $SK_TOP_BUILDDIR/bench/results.json)
#   make bench                             (the same, from a build directory)
# Sizes come from environment variables (defaults = the final measurement):
#   BENCH_REPS=20 BENCH_PODS=3 BENCH_GRACE=5            bench_lifecycle.py
#   BENCH_STEADY_S=180 BENCH_STEADY_NODES=10 BENCH_STEADY_PODS=1   bench_steady.py
#   BENCH_RES_NODES=10 BENCH_RES_PODS=20 BENCH_RES_IDLE_S=20       bench_resources.py
#   BENCH_SCALE_N="10 100 1000" BENCH_SCALE_CONC=128    bench_scale.py
#   BENCH_EXEC_N=30 BENCH_PF_MIB=8                      bench_streams.py
#   BENCH_SLURM_JOBS=30 BENCH_SLURM_ROUNDS=2 BENCH_SLURM_NODES=1   bench_slurm_start.py (root)
#   BENCH_SLURM_PROFILE_JOBS=10  its hook-timing block (SlurmdDebug=debug)
#   BENCH_RL_STEPS=200 BENCH_RL_ROUNDS=3                bench_online_rl.py (root)
#   BENCH_MOUNTS_N=200                                  bench_mounts.py
#   BENCH_IMAGES_N=20                                   bench_images.py (root, podman)
#   BENCH_STORE_ROUNDS=3                                bench_image_store.py (root, podman, fuse-overlayfs, 8 GB free)
#   BENCH_NET_N=100 BENCH_NET_ROUNDS=3                  bench_pod_network.py (root, containernetworking-plugins)
#   BENCH_CGROUP_N=200 BENCH_CGROUP_ROUNDS=3            bench_cgroups.py (root, cgroup v1 or v2)
#   (BENCH_CGROUP_N=100, BENCH_SLURM_JOBS=6 defaults)  bench_cgroup_v2.py (root: v1 here, v2 in tests/vm)
#   BENCH_ONLY="lifecycle steady"   run only these;  BENCH_QUICK=1  small sizes (a smoke run)
# Against your own cluster instead of the test double (docs/benchmarks.md, "Against your own
# cluster"; lifecycle, scale and steady, the default BENCH_ONLY then):
#   BENCH_KUBECONFIG=FILE [BENCH_AGENT_KUBECONFIG=FILE] [BENCH_AUDIT_LOG=kube-apiserver's audit log]
# Needs a build (SK_TOP_BUILDDIR, default ./build or the source dir), python3, openssl;
# the Slurm part needs root and tests/slurm/cluster.sh install (skipped otherwise).
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
export SK_TOP_SRCDIR="${SK_TOP_SRCDIR:-$(cd "$HERE/.." && pwd)}"
if [ -z "${SK_TOP_BUILDDIR:-}" ]; then
  if [ -x "$SK_TOP_SRCDIR/build/agent/slurm-k8s-agent" ]; then SK_TOP_BUILDDIR="$SK_TOP_SRCDIR/build"
  else SK_TOP_BUILDDIR="$SK_TOP_SRCDIR"; fi
fi
export SK_TOP_BUILDDIR
PY="${PYTHON3:-/usr/bin/python3}"
OUT="${1:-${BENCH_OUT:-$SK_TOP_BUILDDIR/bench/results.json}}"
mkdir -p "$(dirname "$OUT")"
OUT="$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  : "${BENCH_REPS:=5}" "${BENCH_STEADY_S:=30}" "${BENCH_RES_IDLE_S:=5}"
  : "${BENCH_SCALE_N:=10 100}" "${BENCH_SLURM_JOBS:=6}" "${BENCH_STORE_ROUNDS:=1}"
  export BENCH_REPS BENCH_STEADY_S BENCH_RES_IDLE_S BENCH_SCALE_N BENCH_SLURM_JOBS BENCH_STORE_ROUNDS
fi
ALL="lifecycle mounts images image_store pod_network steady resources scale streams cgroups slurm_start online_rl cgroup_v2"
if [ -n "${BENCH_KUBECONFIG:-}" ]; then
  # the benchmarks that can measure another API server; the others need the double or Slurm
  ALL="lifecycle scale steady"
  for b in ${BENCH_ONLY:-}; do
    case " $ALL " in *" $b "*) ;; *) echo "note: $b runs against the test double, not BENCH_KUBECONFIG's cluster" >&2;; esac
  done
fi
ONLY="${BENCH_ONLY:-$ALL}"
rm -f "$OUT"
CMD="bench/run-all.sh $(basename "$OUT")"  # no machine paths in the results file
for v in $(env | sed -n 's/^\(BENCH_[A-Z_]*\)=.*/\1/p' | sort); do CMD="$v='${!v}' $CMD"; done
"$PY" - "$OUT" "$CMD" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SK_TOP_SRCDIR"], "bench"))
import sklib
json.dump({"command": sys.argv[2], "machine": sklib.machine(), "benchmarks": {}},
          open(sys.argv[1], "w"), indent=1)
PY
failed=""
for b in $ONLY; do
  echo "=== $b" >&2
  t0=$SECONDS
  "$PY" "$HERE/bench_$b.py" "$OUT" >/dev/null
  rc=$?
  echo "=== $b: exit $rc after $((SECONDS - t0)) s" >&2
  case $rc in 0|77) ;; *) failed="$failed $b";; esac
done
"$PY" "$HERE/report.py" "$OUT"
echo
echo "results: $OUT"
[ -z "$failed" ] || { echo "FAILED:$failed" >&2; exit 1; }
