#!/usr/bin/env bash
# bench-v2.sh -- the cgroup benchmarks on cgroup v2, in the guest of tests/vm
# (bench/bench_cgroup_v2.py runs it and the same benchmarks on this host's v1
# side by side):
#
#   tests/vm/vm.sh run tests/vm/bench-v2.sh
#
# bench/pod_cgroup_cost (a pod's own cgroup at its start and end: on v2 its
# directory under a Slurm-like job, its limits and its device program) and
# bench/bench_slurm_start.py (sbatch -> the script runs, without and with the
# plugin; a --k8s-gpus job registers with a real agent and the test API
# server in the guest). Sizes: BENCH_CGROUP_N, BENCH_CGROUP_ROUNDS,
# BENCH_SLURM_JOBS, BENCH_SLURM_PROFILE_JOBS (pass them with SK_VM_ENV).
# Prints the results between BENCH-JSON-BEGIN and BENCH-JSON-END lines.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOP="$(cd "$HERE/../.." && pwd)"
[ "$(id -u)" = 0 ] || { echo "bench-v2: needs root"; exit 77; }
[ "$(cut -d: -f1,2 /proc/self/cgroup)" = "0:" ] || { echo "bench-v2: not a pure cgroup v2 hierarchy: run it in tests/vm"; exit 77; }
export SK_TOP_SRCDIR="$TOP" SK_TOP_BUILDDIR="${SK_TOP_BUILDDIR:-$TOP/build}"
out="${SK_VM_OUT:-/tmp}/bench-v2.json"
echo '{"benchmarks": {}}' > "$out"
rc=0
python3 "$TOP/bench/bench_cgroups.py" "$out" >/dev/null || rc=1
python3 "$TOP/bench/bench_slurm_start.py" "$out" >/dev/null || rc=1
echo BENCH-JSON-BEGIN
cat "$out"
echo BENCH-JSON-END
exit "$rc"
