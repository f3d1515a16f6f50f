#!/usr/bin/env bash
# Checks on a real GPU node that a pod on a job's virtual node sees exactly
# the GPUs lent to it, and none of the job's own: submits a job that lends
# GPUs (sbatch --gres=gpu:N --k8s-gpus=M), lists the job step's GPUs with
# nvidia-smi -L, runs a pod there that asks for the M GPUs
# (nvidia.com/gpu: M) from a CUDA image and runs `nvidia-smi -L` in it (the
# driver's tool and libraries come from the node's CDI specification:
# docs/admin-guide.md "GPUs in images (CDI)"), and compares:
#   - the pod lists M GPUs, each with its UUID;
#   - none of them is one of the job step's (the trainer keeps the rest);
# then cancels the job. Exit 0 when both hold, 1 when not, 2 on a usage or
# setup error. Run it as a user who may submit jobs and create pods in the
# namespace (kubectl's current context).
#
# usage: check-gpu-pods.sh [--image IMAGE] [--gres gpu:N] [--lend M]
#                          [--namespace NS] [--timeout SECONDS] [-- SBATCH-OPTION...]
#   --image      a CUDA base image (default nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04)
#   --gres       the job's GPUs (default gpu:2)
#   --lend       the GPUs lent to Kubernetes and asked for by the pod (default 1)
#   --namespace  the pod's namespace (default: default); the job lends to it
#   --timeout    seconds to wait for the job, the Node and the pod (default 300)
#   after --: more sbatch options (-p PARTITION, -w NODE, -A ACCOUNT ...)
# env: KUBECTL (default kubectl), SBATCH (default sbatch) and NVIDIA_SMI
#      (default nvidia-smi, the job step's), each split into words, for a
#      kubeconfig or a wrapper.
set -euo pipefail

image=nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04 gres=gpu:2 lend=1 ns=default timeout=300
while [ $# -gt 0 ]; do
  case "$1" in
    --image) image="$2"; shift 2 ;;
    --gres) gres="$2"; shift 2 ;;
    --lend) lend="$2"; shift 2 ;;
    --namespace) ns="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check-gpu-pods.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$lend" in '' | *[!0-9]* | 0) echo "check-gpu-pods.sh: --lend needs a number of GPUs (1 or more)" >&2; exit 2 ;; esac
read -r -a kubectl <<<"${KUBECTL:-kubectl}"
read -r -a sbatch <<<"${SBATCH:-sbatch}"
smi="${NVIDIA_SMI:-nvidia-smi}"

dir="$(mktemp -d)"
chmod 1777 "$dir"  # the job's output, written by the job's user (who may be another)
job="" pod="gpu-check-$$"
cleanup() {
  [ -z "$job" ] || scancel "$job" 2>/dev/null || true
  "${kubectl[@]}" delete pod -n "$ns" "$pod" --wait=false >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

# The job: its virtual node's name, its own GPUs, then it waits for us.
cat >"$dir/job.sh" <<EOF
#!/bin/sh
echo "node=\$SLURM_K8S_NODE error=\$SLURM_K8S_ERROR"
$smi -L | sed 's/^/job: /'
echo done
sleep $timeout
EOF
chmod 755 "$dir/job.sh"
out="$("${sbatch[@]}" --parsable --gres="$gres" --k8s-gpus="$lend" --k8s-namespace="$ns" \
  -o "$dir/job.out" "$@" "$dir/job.sh")" || { echo "check-gpu-pods.sh: sbatch failed: $out" >&2; exit 2; }
job="${out%%;*}"
echo "job $job submitted (--gres=$gres --k8s-gpus=$lend)"

deadline=$((SECONDS + timeout))
until grep -q '^done$' "$dir/job.out" 2>/dev/null; do
  [ "$SECONDS" -lt "$deadline" ] || { echo "check-gpu-pods.sh: job $job did not start in ${timeout} s" >&2; exit 2; }
  sleep 1
done
node="$(sed -n 's/^node=\([^ ]*\) .*/\1/p' "$dir/job.out" | head -1)"
[ -n "$node" ] || { echo "check-gpu-pods.sh: job $job got no virtual node: $(grep -m1 '^node=' "$dir/job.out")" >&2; exit 1; }
echo "virtual node $node; the job's own GPUs:"
sed -n 's/^job: /  /p' "$dir/job.out"

"${kubectl[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $pod, namespace: $ns}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$job", effect: NoSchedule}]
  restartPolicy: Never
  containers:
  - name: check
    image: $image
    command: [nvidia-smi, -L]
    resources: {limits: {nvidia.com/gpu: $lend}}
EOF
phase=""
until [ "$phase" = Succeeded ] || [ "$phase" = Failed ]; do
  [ "$SECONDS" -lt "$deadline" ] || { echo "check-gpu-pods.sh: pod $pod not done in ${timeout} s (phase '$phase')" >&2; exit 1; }
  sleep 1
  phase="$("${kubectl[@]}" get pod -n "$ns" "$pod" -o 'jsonpath={.status.phase}' 2>/dev/null || true)"
done
"${kubectl[@]}" logs -n "$ns" "$pod" >"$dir/pod.out" 2>&1 || true
echo "the pod's GPUs ($phase):"
sed 's/^/  /' "$dir/pod.out"

uuids() { sed -n 's/.*(UUID: \([^)]*\)).*/\1/p' "$1"; }
sed -n 's/^job: //p' "$dir/job.out" >"$dir/job.gpus"
pod_n="$(uuids "$dir/pod.out" | sort -u | wc -l)"
shared="$(comm -12 <(uuids "$dir/pod.out" | sort -u) <(uuids "$dir/job.gpus" | sort -u) | paste -sd' ')"
rc=0
if [ "$phase" = Succeeded ] && [ "$pod_n" = "$lend" ]; then
  echo "ok: the pod sees $pod_n GPU(s), as lent"
else
  echo "FAILED: the pod sees $pod_n GPU(s) (phase $phase), $lend lent"; rc=1
fi
if [ -z "$shared" ]; then
  echo "ok: none of them is one of the job's own"
else
  echo "FAILED: the pod sees the job's own GPU(s) $shared"; rc=1
fi
exit "$rc"
