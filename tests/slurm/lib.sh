# shellcheck shell=bash
# lib.sh -- helpers for slurm-k8s integration tests on the local Slurm cluster
# built by cluster.sh.  Source it:   . "$(dirname "$0")/lib.sh"
#
# Sourcing only defines variables and functions (and exports SLURM_CONF);
# it starts nothing and does not change shell options.
#
# Settings (environment, same defaults as cluster.sh):
#   SK_SLURM_DIR  cluster directory (default /tmp/slurm-k8s-test)
#   SK_NODE_PREFIX  the nodes are ${SK_NODE_PREFIX}1..N: "n" for the default
#                 cluster directory, else "n" and three letters from a hash
#                 of SK_SLURM_DIR (e.g. nkcf1), so that two clusters on one
#                 host never share a node name, nor with it Slurm's and the
#                 agent's cgroup directories (slurm_<node>, slurm_k8s_<node>)
#   SK_FIRST_JOB_ID  slurm.conf FirstJobId: 1 for the default directory,
#                 else from the same hash (10000 apart), so that two
#                 clusters' job ids differ too
#   TEST_USER     non-root submitter (default k8suser), TEST_UID (2001)
#
# Functions:
#   sk_as_user CMD...             run CMD as TEST_USER with a clean login-like
#                                 environment + SLURM_CONF, cwd = jobs dir
#   sk_submit_as_user ARGS...     sbatch --parsable ARGS as TEST_USER; prints job id
#   sk_job_state JOBID            prints JobState (empty if unknown)
#   sk_wait_state JOBID STATE[|STATE..] [TIMEOUT=60]
#                                 0 when the job reaches one of the states;
#                                 1 on timeout or when it ends in another state
#   sk_wait_gone JOBID [TIMEOUT=60]
#                                 0 when the job is no longer pending/running/
#                                 completing (squeue no longer lists it)
#   sk_job_output JOBID           prints the job's StdOut path (from scontrol)
#   sk_pid_alive PID              0 if PID exists and is not a zombie
#   sk_cluster_procs              lists "pid comm args" of every live process
#                                 that belongs to this cluster (see below)
#   ok COND MSG...                assertion; COND is an exit status (digits)
#                                 or a shell command string run with eval
#   sk_skip MSG...                prints "SKIP: MSG" (not counted)
#   sk_summary                    prints "N passed, N failed" (last line);
#                                 returns 1 if anything failed
#   sk_log MSG...                 message to stderr
#   sk_node X                     the name of node X (1..N): ${SK_NODE_PREFIX}X;
#                                 N1, N2, N3 hold the first three
#   hosts.sh (sourced): SK_NETNS=1 puts each node in a network namespace
#                                 of its own, the site (slurmctld, the
#                                 scripts) in another

SK_SLURM_DIR="${SK_SLURM_DIR:-/tmp/slurm-k8s-test}"
if [ "$SK_SLURM_DIR" = /tmp/slurm-k8s-test ]; then
  SK_NODE_PREFIX="${SK_NODE_PREFIX:-n}"
  SK_FIRST_JOB_ID="${SK_FIRST_JOB_ID:-1}"
else
  sk_instance_hash="$(printf '%s' "$SK_SLURM_DIR" | md5sum | cut -c1-3)"
  SK_NODE_PREFIX="${SK_NODE_PREFIX:-n$(tr 0-9a-f a-p <<<"$sk_instance_hash")}"
  SK_FIRST_JOB_ID="${SK_FIRST_JOB_ID:-$(( (16#$sk_instance_hash % 600 + 1) * 10000 ))}"
fi
# Not exported: a cluster.sh started from here for another directory (e2e
# two_clusters) derives its own.
N1="${SK_NODE_PREFIX}1" N2="${SK_NODE_PREFIX}2" N3="${SK_NODE_PREFIX}3"
TEST_USER="${TEST_USER:-k8suser}"
TEST_UID="${TEST_UID:-2001}"
# A second job user (e2e: another user's jobs on the same nodes).
TEST_USER2="${TEST_USER2:-k8suser2}"
TEST_UID2="${TEST_UID2:-2002}"
SK_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SK_CLUSTER_SH="$SK_LIB_DIR/cluster.sh"
SK_CONF="$SK_SLURM_DIR/etc/slurm.conf"
SK_JOBS_DIR="$SK_SLURM_DIR/jobs"
# cluster.sh starts every daemon with this variable in its environment; every
# process Slurm forks from them (slurmstepd, slurmscriptd, prolog/epilog
# scripts) inherits it.  Nothing else on the host carries it.
SK_MARKER_VAR="SK_SLURM_CLUSTER"
export SLURM_CONF="$SK_CONF"
# SK_NETNS=1: each node a host of its own (network namespaces, hosts.sh).
# shellcheck source=hosts.sh
. "$SK_LIB_DIR/hosts.sh"

SK_PASSED=0
SK_FAILED=0

sk_log() { echo "[slurm-k8s-test] $*" >&2; }
sk_node() { echo "${SK_NODE_PREFIX}$1"; }

# ------------------------------------------------------------------ jobs ---
sk_as_user() {
  local home
  home="$(getent passwd "$TEST_USER" | cut -d: -f6)"
  [ -n "$home" ] || { sk_log "no user $TEST_USER (run: $SK_CLUSTER_SH install)"; return 1; }
  # The jobs dir (mode 1777) is a cwd the user can enter; sbatch's default
  # working directory is the cwd.  env -i: the job must not inherit root's
  # environment (sbatch exports the submitter's environment by default).
  ( cd "$SK_JOBS_DIR" 2>/dev/null || cd /
    exec runuser -u "$TEST_USER" -- env -i \
      HOME="$home" USER="$TEST_USER" LOGNAME="$TEST_USER" SHELL=/bin/bash \
      PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 SLURM_CONF="$SK_CONF" "$@" )
}

sk_submit_as_user() {
  local out rc
  out="$(sk_as_user sbatch --parsable "$@")"; rc=$?
  out="${out%%;*}"              # "jobid;cluster" -> "jobid"
  if [ "$rc" -ne 0 ] || ! [[ $out =~ ^[0-9]+$ ]]; then
    sk_log "sbatch failed (rc=$rc): $out"
    return 1
  fi
  echo "$out"
}

sk_job_state() {
  scontrol show job -o "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

sk_state_is_final() {
  case "$1" in
    COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|PREEMPTED|BOOT_FAIL|DEADLINE|OUT_OF_MEMORY) return 0 ;;
  esac
  return 1
}

# Writes the state job $1 ends in to file $2 the moment it ends (run in the
# background): slurmctld forgets a finished job MinJobAge after its end, so a
# check made later (after other cases) reads the state from here. Gives up
# after $3 s (default 900) and writes "unknown (last: <state>)".
sk_record_end_state() {
  local jid="$1" out="$2" end=$((SECONDS + ${3:-900})) st="" last=""
  while [ "$SECONDS" -lt "$end" ]; do
    st="$(sk_job_state "$jid")"
    [ -n "$st" ] && last="$st"
    if sk_state_is_final "$st"; then
      echo "$st" >"$out.tmp" && mv "$out.tmp" "$out"
      return 0
    fi
    sleep 0.2
  done
  echo "unknown (last: ${last:-never seen})" >"$out.tmp" && mv "$out.tmp" "$out"
  return 1
}

sk_wait_state() {
  local jid="$1" want="$2" timeout="${3:-60}" st=""
  local end=$((SECONDS + timeout))
  while :; do
    st="$(sk_job_state "$jid")"
    if [ -n "$st" ] && [[ "|$want|" == *"|$st|"* ]]; then return 0; fi
    if sk_state_is_final "$st"; then
      sk_log "job $jid ended as $st (wanted $want)"; return 1
    fi
    if [ "$SECONDS" -ge "$end" ]; then
      sk_log "timeout (${timeout}s): job $jid is '${st:-unknown}' (wanted $want)"
      scontrol show job "$jid" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.1
  done
}

sk_wait_gone() {
  local jid="$1" timeout="${2:-60}" out
  local end=$((SECONDS + timeout))
  while :; do
    out="$(squeue -h -j "$jid" -o %T 2>/dev/null)"
    [ -z "$out" ] && return 0
    if [ "$SECONDS" -ge "$end" ]; then
      sk_log "timeout (${timeout}s): job $jid still $out"; return 1
    fi
    sleep 0.1
  done
}

sk_job_output() {
  scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n 's/^StdOut=//p'
}

# ------------------------------------------------------ process scanning ---
# Alive = exists and is not a zombie.  PID 1 of a container or VM may reap
# orphans late (here: ~2 s after a daemon exits) and kill -0 succeeds on a
# zombie.
sk_pid_alive() {
  [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null || return 1
  local st
  st="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null)" || return 1
  [ -n "$st" ] && [ "${st:0:1}" != Z ]
}

# A live (non-zombie) process belongs to this cluster when
#  1. its environment carries $SK_MARKER_VAR=$SK_SLURM_DIR (daemons started by
#     cluster.sh and all their descendants: slurmstepd, slurmscriptd, scripts);
#  2. it is munged/slurmctld/slurmd/slurmstepd/slurmscriptd and its argv
#     mentions $SK_SLURM_DIR or its environment has SLURM_CONF=$SK_CONF;
#  3. its environment has SLURM_CONF=$SK_CONF and SLURMD_NODENAME (a job task
#     launched by one of our slurmstepd; a user's own shell or srun/salloc
#     client has no SLURMD_NODENAME).
# The calling shell and its ancestors are never listed.
sk_cluster_procs() {
  local -A skip=() hit=()
  local p f pid comm args state ppid
  p=$BASHPID
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    skip[$p]=1
    p="$(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2>/dev/null)" || break
  done
  skip[$$]=1
  # One grep over all /proc/*/{environ,cmdline} files (NUL-separated records).
  while read -r f; do
    pid="${f#/proc/}"; hit[${pid%%/*}]="marker"
  done < <(grep -lzx -e "$SK_MARKER_VAR=$SK_SLURM_DIR" /proc/[0-9]*/environ 2>/dev/null)
  local daemon_re='^(munged|slurmctld|slurmd|slurmstepd|slurmscriptd)$'
  while read -r f; do
    pid="${f#/proc/}"; pid="${pid%%/*}"
    comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || continue
    [[ $comm =~ $daemon_re ]] && hit[$pid]="argv"
  done < <(grep -lzF -e "$SK_SLURM_DIR" /proc/[0-9]*/cmdline 2>/dev/null)
  while read -r f; do
    pid="${f#/proc/}"; pid="${pid%%/*}"
    comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || continue
    if [[ $comm =~ $daemon_re ]] || grep -qz '^SLURMD_NODENAME=' "$f" 2>/dev/null; then
      hit[$pid]="env"
    fi
  done < <(grep -lzx -e "SLURM_CONF=$SK_CONF" /proc/[0-9]*/environ 2>/dev/null)
  for pid in "${!hit[@]}"; do
    [ -n "${skip[$pid]:-}" ] && continue
    # Field 3 of /proc/PID/stat is the state; comm (field 2) may hold spaces.
    state="$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null)" || continue
    read -r state ppid _ <<<"$state"
    if [ -z "$state" ] || [ "$state" = Z ]; then continue; fi
    comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || continue
    args="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" || continue
    printf '%s %s ppid=%s %s\n' "$pid" "$comm" "$ppid" "${args% }"
  done | sort -n
}

# ------------------------------------------------------------ assertions ---
# Each also a record of the one result protocol (tests/lib/report.sh).
# shellcheck source=../lib/report.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/report.sh"
ok() {
  local cond="$1"; shift
  local rc
  if [[ $cond =~ ^[0-9]+$ ]]; then
    rc="$cond"
  elif eval "$cond"; then
    rc=0
  else
    rc=1
  fi
  if [ "$rc" -eq 0 ]; then
    SK_PASSED=$((SK_PASSED + 1)); echo "PASS: $*"; report_record pass "$*"
  else
    SK_FAILED=$((SK_FAILED + 1)); echo "FAIL: $*"; report_record fail "$*"
  fi
  return 0
}

sk_skip() { echo "SKIP: $*"; report_record skip "$*"; }

sk_summary() {
  echo "$SK_PASSED passed, $SK_FAILED failed"
  [ "$SK_FAILED" -eq 0 ]
}
