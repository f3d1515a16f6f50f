#!/usr/bin/env bash
# smoke.sh -- integration smoke test on a real local Slurm cluster.
#
#   SPANK_K8S_SO=/abs/path/spank_k8s.so tests/slurm/smoke.sh
#
# 1. starts the cluster with cluster.sh (unless SK_CLUSTER_RUNNING=1), loading
#    SPANK_K8S_SO (copied to a world-readable place) with SPANK_K8S_ARGS
#    through plugstack.conf: "required <so> <args>"; without SPANK_K8S_SO the
#    cluster runs with an empty plugstack and the plugin checks are skipped;
# 2. submits `sbatch -N$NUM_NODES --gres=gpu:$GPUS_PER_NODE` as TEST_USER;
#    the job runs one srun task per node that prints its hostname,
#    SLURMD_NODENAME and CUDA_VISIBLE_DEVICES; checks the output;
# 3. with the plugin: `sbatch --help` lists --k8s-gpus;
# 4. stops the cluster and checks that nothing of it is left (pid files and a
#    /proc scan).
# Last line: "N passed, N failed".  Exit: 0 ok, 1 failure, 77 skipped (not
# root, or Slurm not installed and SK_INSTALL!=1).

# `ok` evaluates its single-quoted condition itself (variables used only there):
# shellcheck disable=SC2016,SC2034
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NUM_NODES="${NUM_NODES:-3}"
GPUS_PER_NODE="${GPUS_PER_NODE:-4}"
export NUM_NODES GPUS_PER_NODE
SPANK_K8S_SO="${SPANK_K8S_SO:-}"
SPANK_K8S_ARGS="${SPANK_K8S_ARGS:-}"
SK_CLUSTER_RUNNING="${SK_CLUSTER_RUNNING:-0}"
JOB_TIMEOUT="${JOB_TIMEOUT:-60}"

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: smoke.sh needs root (it starts Slurm daemons)"; exit 77
fi
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
   || ! command -v munged >/dev/null || ! id "$TEST_USER" >/dev/null 2>&1; then
  if [ "${SK_INSTALL:-0}" = 1 ]; then
    "$SK_CLUSTER_SH" install || { echo "FAIL: cluster.sh install"; exit 1; }
  else
    echo "SKIP: Slurm/munge or user $TEST_USER missing (run: $SK_CLUSTER_SH install, or set SK_INSTALL=1)"
    exit 77
  fi
fi

# SK_NETNS=1: nodes as hosts of their own; this script in the site (hosts.sh).
sk_enter_site "$0" "$@"

t_start=$SECONDS
started=0
stopped=0
cleanup() {
  if [ "$started" = 1 ] && [ "$stopped" = 0 ]; then
    sk_log "stopping the cluster (cleanup)"
    "$SK_CLUSTER_SH" stop >&2 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------- cluster -----
plugin=""
if [ -n "$SPANK_K8S_SO" ]; then
  if [ -f "$SPANK_K8S_SO" ]; then
    plugin="$SK_SLURM_DIR/lib/$(basename "$SPANK_K8S_SO")"
    if [ "$SK_CLUSTER_RUNNING" != 1 ]; then
      # The build tree may not be readable by TEST_USER, who runs sbatch and
      # loads the plugin: use a world-readable copy.  Copy + rename, never
      # rewrite in place a .so that a running daemon may have mapped.
      mkdir -p "$SK_SLURM_DIR/lib"; chmod 755 "$SK_SLURM_DIR" "$SK_SLURM_DIR/lib"
      install -m 0644 "$SPANK_K8S_SO" "$plugin.tmp" && mv -f "$plugin.tmp" "$plugin"
    fi
    sk_log "plugin: $SPANK_K8S_SO (args: ${SPANK_K8S_ARGS:-none})"
  else
    ok 1 "SPANK_K8S_SO=$SPANK_K8S_SO exists"
  fi
else
  sk_log "SPANK_K8S_SO not set: running WITHOUT the slurm-k8s plugin (empty plugstack.conf)"
fi

if [ "$SK_CLUSTER_RUNNING" = 1 ]; then
  sk_log "SK_CLUSTER_RUNNING=1: using the running cluster as is"
  ok '"$SK_CLUSTER_SH" status >/dev/null' "cluster is running"
else
  if [ -n "$plugin" ]; then
    PLUGSTACK_LINES="required $plugin${SPANK_K8S_ARGS:+ $SPANK_K8S_ARGS}"
  else
    PLUGSTACK_LINES=""
  fi
  export PLUGSTACK_LINES
  t0=$SECONDS
  "$SK_CLUSTER_SH" start >&2; rc=$?
  started=1
  ok "$rc" "cluster.sh start ($((SECONDS - t0))s)"
  [ "$rc" = 0 ] || { sk_summary; exit 1; }
fi

idle="$(sinfo -h -N -t idle -o '%N %G' 2>/dev/null | sort -u | grep -c " gpu:$GPUS_PER_NODE" || true)"
ok '[ "$idle" -eq "$NUM_NODES" ]' "$NUM_NODES nodes idle with gpu:$GPUS_PER_NODE (got $idle)"

# ----------------------------------------------------------------- job -----
script="$SK_JOBS_DIR/smoke-job.sh"
cat > "$script" <<'EOF'
#!/bin/bash
echo "batch user=$(id -un) node=$SLURMD_NODENAME nodes=$SLURM_JOB_NUM_NODES"
srun -N "$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 bash -c \
  'echo "TASK host=$(hostname) node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES user=$(id -un) net=$(stat -L -c %i /proc/self/ns/net)"'
EOF
chmod 755 "$script"

jid="$(sk_submit_as_user -N "$NUM_NODES" --gres="gpu:$GPUS_PER_NODE" \
        -o "$SK_JOBS_DIR/smoke-%j.out" "$script")"
ok '[ -n "$jid" ]' "sbatch -N$NUM_NODES --gres=gpu:$GPUS_PER_NODE as $TEST_USER (job ${jid:-none})"
if [ -n "$jid" ]; then
  t0=$SECONDS
  sk_wait_state "$jid" COMPLETED "$JOB_TIMEOUT"; rc=$?
  ok "$rc" "job $jid COMPLETED ($((SECONDS - t0))s, state $(sk_job_state "$jid"))"
  out="$(sk_job_output "$jid")"
  ok '[ -s "$out" ]' "job output $out"
  if [ -s "$out" ]; then
    sed 's/^/  | /' "$out"
    gpus="$(seq -s, 0 $((GPUS_PER_NODE - 1)))"
    want_nodes="$(seq -f "${SK_NODE_PREFIX}%g" 1 "$NUM_NODES" | paste -sd' ')"
    got_nodes="$(sed -n 's/^TASK .* node=\([^ ]*\) .*/\1/p' "$out" | sort -V | paste -sd' ')"
    ok '[ "$(grep -c "^TASK " "$out")" -eq "$NUM_NODES" ]' "$NUM_NODES srun tasks wrote a line"
    ok '[ "$got_nodes" = "$want_nodes" ]' "one task on each node ($got_nodes)"
    ok '[ "$(grep -c "^TASK .* gpus=$gpus user=$TEST_USER net=" "$out")" -eq "$NUM_NODES" ]' \
       "each node sees CUDA_VISIBLE_DEVICES=$gpus"
    ok '[ "$(grep -c "^TASK host=$(hostname) " "$out")" -eq "$NUM_NODES" ]' "hostname is $(hostname)"
    ok 'grep -q "^batch user=$TEST_USER node=$N1 " "$out"' "batch script ran as $TEST_USER on $N1"
    if [ "$SK_NETNS" = 1 ]; then
      # Each task in its node's network namespace (hosts.sh), none in the
      # site's or the host's.
      bad=""
      for ((i = 1; i <= NUM_NODES; i++)); do
        grep -q "^TASK .* node=$(sk_node "$i") .* net=$(sk_netns_ino "$SK_NETNS_RUN/$(sk_netns_node "$i")")\$" "$out" \
          || bad="$bad $(sk_node "$i")"
      done
      ok '[ -z "$bad" ]' "each task ran in its node's network namespace${bad:+ (not:$bad)}"
    fi
  fi
  sk_wait_gone "$jid" 30
  ok $? "job $jid left the queue"
fi
if [ "$SK_NETNS" = 1 ]; then
  # srun from the site: each slurmd, on a host of its own, reaches back to
  # this srun at the site's address.
  nets="$(sk_as_user timeout 60 srun -N "$NUM_NODES" --ntasks-per-node=1 \
             bash -c 'echo "$SLURMD_NODENAME $(stat -L -c %i /proc/self/ns/net)"' 2>&1 | sort -V)"
  want="$(for ((i = 1; i <= NUM_NODES; i++)); do
            echo "$(sk_node "$i") $(sk_netns_ino "$SK_NETNS_RUN/$(sk_netns_node "$i")")"; done)"
  ok '[ "$nets" = "$want" ]' "srun from the site ($(sk_site_addr)) runs a task on each node's host (got: $(paste -sd, <<<"$nets"))"
fi
drained="$(sinfo -h -N -t drain,drained,draining,down,fail -o '%N %E' 2>/dev/null | sort -u)"
ok '[ -z "$drained" ]' "no node drained or down${drained:+ ($drained)}"

# -------------------------------------------------------------- plugin -----
help="$(sk_as_user sbatch --help 2>&1)"
if [ -n "$plugin" ]; then
  ok 'grep -q -- --k8s-gpus <<<"$help"' "sbatch --help lists --k8s-gpus"
else
  sk_skip "plugin checks (SPANK_K8S_SO not set)"
  ok '! grep -q -- --k8s-gpus <<<"$help"' "without plugin, sbatch --help has no --k8s-gpus"
fi

# ---------------------------------------------------------------- stop -----
if [ "$SK_CLUSTER_RUNNING" = 1 ]; then
  sk_skip "stop and leftover checks (SK_CLUSTER_RUNNING=1)"
else
  t0=$SECONDS
  "$SK_CLUSTER_SH" stop >&2; rc=$?
  stopped=1
  ok "$rc" "cluster.sh stop ($((SECONDS - t0))s)"
  alive=""
  for f in "$SK_SLURM_DIR/munge/munged.pid" "$SK_SLURM_DIR"/run/*.pid; do
    [ -s "$f" ] || continue
    pid="$(tr -dc '0-9' < "$f")"
    if sk_pid_alive "$pid"; then alive="$alive $(basename "$f"):$pid"; fi
  done
  ok '[ -z "$alive" ]' "no pid-file process alive${alive:+ ($alive)}"
  left="$(sk_cluster_procs)"
  [ -z "$left" ] || printf '  left: %s\n' "$left"
  ok '[ -z "$left" ]' "no process of this cluster left (/proc scan)"
  # Independent, cruder scan: any daemon whose argv mentions our directory.
  crude="$(ps -eo pid=,comm=,args= | awk -v d="$SK_SLURM_DIR" \
           '$2 ~ /^(munged|slurmctld|slurmd|slurmstepd)$/ && index($0, d)')"
  [ -z "$crude" ] || printf '  ps: %s\n' "$crude"
  ok '[ -z "$crude" ]' "ps shows no munged/slurmctld/slurmd/slurmstepd with $SK_SLURM_DIR"
  if [ "$SK_NETNS" = 1 ]; then
    # This script still runs in the site: its namespace ends with it.
    left="$(sk_netns_ours | paste -sd' ')"
    ok '[ -z "$left" ]' "no network namespace of this cluster left${left:+ ($left)}"
  fi
fi

sk_log "total $((SECONDS - t_start))s"
sk_summary
