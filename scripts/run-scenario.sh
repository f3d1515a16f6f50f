#!/usr/bin/env bash
# The main scenario, from a fresh Debian 12 machine, as root:
#
#   bash scripts/run-scenario.sh [--images] [KUBECONFIG]
#
#  1. installs the packages (scripts/install-deps.sh) and builds ($SK_BUILD_DIR,
#     default ./build);
#  2. starts the Kubernetes API test double with its scheduler and
#     node-lifecycle controller (tests/kube/), one slurm-k8s-agent per Slurm
#     node (socket, state dir, kubelet port and the address of its own
#     host, below; the double's least-rights agent token) and a local Slurm cluster of 3
#     nodes x 4 fake GPUs whose plugstack loads spank_k8s.so (tests/slurm/);
#  3. submits, as the unprivileged user k8suser,
#       sbatch -N3 --gres=gpu:4 --k8s-gpus=2 --k8s-labels=team=rl examples/online-rl/train.sbatch
#     shows the 3 virtual nodes, applies the manifests with kubectl (the
#     rollouts a Deployment of 3 replicas, the reward model a pod, each behind
#     a Service), lets the trainer, which finds them through the Services'
#     Endpoints with kubectl and a read-only kubeconfig of its own
#     (srun, 2 GPUs per node), learn from the services' samples (a policy
#     gradient all-reduced over its 3 ranks, the weights pushed to the
#     rollouts after every step; the reward must rise, no sample be lost),
#     and follows the
#     job's end: pods stopped with SIGTERM and their grace, Nodes and Leases
#     deleted, then the Deployment and Services;
#  4. prints timings and verifies that nothing is left running or on disk.
#
# With --images (or SK_SCENARIO_IMAGES=1) the rollout and reward services run
# from images instead of as processes: examples/online-rl/build-images.sh
# builds them from this machine's Debian packages (python3, numpy) and pushes
# them to the harness's registry in the site; rollout-image.yaml and
# reward-image.yaml start them by their ENTRYPOINT through the podman runtime
# (rootless podman as the job's user, in the job's cgroups), each container
# with its own GPUs' device nodes only.
#
# Each Slurm node is a host of its own, as on a cluster (SK_NETNS=1, the default)
# (tests/slurm/hosts.sh): its slurmd, its agent and so its jobs and pods in a
# network namespace of its own with an address that is not loopback
# (10.239.K.11-13), the API server, the registry, kubectl and this script in
# the site's (10.239.K.1); the double then refuses, as kube-apiserver does,
# to proxy to a node address that is not global unicast.
#
# With a KUBECONFIG argument the agents and kubectl target that cluster
# instead of the double. A real API server refuses loopback node addresses
# (it will not proxy to them, and its Endpoints controller drops loopback pod
# IPs), so the control plane runs in the site, where the nodes reach it:
#   SK_SLURM_DIR=/tmp/sk-scenario tests/slurm/cluster.sh hosts
#       (makes the namespaces; prints the site's name sk-<p>-site and address)
#   nsenter --net=/run/netns/sk-<p>-site kube-apiserver --bind-address=<site>
#       --advertise-address=<site> ... (etcd, the controller-manager and the
#       scheduler there too, as docs/admin-guide.md says; the server's
#       certificate names the site's address; the kubeconfig's server is
#       https://<site>:6443)
#   bash scripts/run-scenario.sh KUBECONFIG
# Before that, apply etc/rbac-node-identity.yaml and etc/vap-agent-nodes.yaml
# there (etc/rbac.yaml with E2E_NODE_IDENTITY=agent); KUBECONFIG is
# the admin's (kubectl); the agents' own credential is E2E_AGENT_KUBECONFIG (a
# kubeconfig of the slurm-k8s-agent ServiceAccount, e.g. with a tokenFile from
# `kubectl create token`; default: KUBECONFIG itself). The agents run with
# node_identity = bootstrap (E2E_NODE_IDENTITY=agent for the old way): the
# controller-manager must approve and sign their CSRs
# (docs/admin-guide.md, "Node identities"). The
# API server must reach the nodes' kubelet endpoints (<node address>:19250-19252
# here; set E2E_KUBELET_BASE_PORT) for `kubectl logs`, and the cluster's
# scheduler places the pods.
#
# Every check prints PASS:/FAIL:; the last line is "scenario: N passed, N failed";
# the exit code is 0 only when every check passed. Everything started is
# stopped by pid on exit, also on failure or Ctrl-C.
#
# Every variable it reads:
#   SK_BUILD_DIR [./build]          the build tree
#   SK_SKIP_INSTALL=1               the packages are there: no apt-get
#   SK_JOBS [nproc]                 make -j
#   SK_SCENARIO_IMAGES=1            as --images
#   SK_SLURM_DIR [/tmp/sk-scenario] the cluster's directory (state, logs, run files);
#                                   its node names and job ids follow from it
#                                   (tests/slurm/lib.sh: SK_NODE_PREFIX, SK_FIRST_JOB_ID),
#                                   so the e2e (/tmp/sk-e2e) runs beside the scenario
#   CTLD_PORT [18817], SLURMD_BASE_PORT [19001]  slurmctld's port, node X's slurmd = base + X - 1
#   E2E_KUBELET_BASE_PORT [19250]   agent X's kubelet endpoint = base + X - 1; the API
#                                   server must reach it at the node's address
#   E2E_REGISTRY_PORT [19300]       the image registry (--images), and +1, +2: on loopback,
#                                   with SK_NETNS=1 on the site's address
#   SK_NETNS [1]                    1: each Slurm node a host of its own (above); 0: all on
#                                   this host's loopback (127.0.1.N), where no Service
#                                   publishes a pod's address, as on a real server
#   SK_NETNS_NET [10.239.K]         the hosts' /24 (tests/slurm/hosts.sh; K from SK_SLURM_DIR)
#   E2E_GRACE [15]                  plugstack grace= (the pods' stop budget at job end)
#   E2E_LEASE_GRACE [40], E2E_NODE_AUTHORIZER_LAG [0.3]  the double's --lease-grace and
#                                   --node-authorizer-lag (unused with a KUBECONFIG)
#   E2E_AGENT_KUBECONFIG [KUBECONFIG]  the agents' own credential on a real cluster
#   E2E_NODE_IDENTITY [bootstrap]   the agents' node_identity
#   E2E_KUBELET_CERT, E2E_KUBELET_KEY, E2E_KUBELET_CLIENT_CA  the agents' kubelet
#                                   endpoint on a real cluster (else the double's own)
#   E2E_PLUGIN_ARGS                 extra plugstack key=value words
#   TEST_USER [k8suser]             the unprivileged user the job runs as
# On a real cluster the trainer gets a ServiceAccount rl-trainer whose Role may only read
# Endpoints in default, its token in a kubeconfig of its own (never the admin's); it and
# the example's objects are deleted on every exit path.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SK_BUILD_DIR=${SK_BUILD_DIR:-$top/build}
export SK_SLURM_DIR=${SK_SLURM_DIR:-/tmp/sk-scenario}
export CTLD_PORT=${CTLD_PORT:-18817} SLURMD_BASE_PORT=${SLURMD_BASE_PORT:-19001}
export E2E_KUBELET_BASE_PORT=${E2E_KUBELET_BASE_PORT:-19250}
export E2E_REGISTRY_PORT=${E2E_REGISTRY_PORT:-19300}
RL_IMAGES=${SK_SCENARIO_IMAGES:-0}
case ${1:-} in
  --images) RL_IMAGES=1; shift ;;
  -*) echo "run-scenario: unknown option $1 (usage: run-scenario.sh [--images] [KUBECONFIG])" >&2; exit 2 ;;
esac
export RL_IMAGES
export E2E_KUBECONFIG=${1:-}
jobs=${SK_JOBS:-$(nproc)}
T0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { printf '\n=== %s (t+%ss) ===\n' "$1" "$(since "$T0")"; }

[ "$(id -u)" = 0 ] || { echo "run-scenario: run as root (it starts slurmd, munged and the agents)" >&2; exit 1; }
export SK_NETNS=${SK_NETNS:-1}
if [ "$SK_NETNS" = 1 ]; then
  # Each node a host of its own: this script re-runs in the site's network
  # namespace (tests/slurm/hosts.sh), before anything starts.
  # shellcheck source=../tests/slurm/lib.sh
  . "$top/tests/slurm/lib.sh"
  export SK_SCENARIO_IMAGES=$RL_IMAGES  # --images, shifted away above
  sk_enter_site "$0" "$@"
fi

# ---------------------------------------------------------------- 1. build
if [ "${SK_SKIP_INSTALL:-0}" != 1 ]; then
  say "installing packages"
  bash "$top/scripts/install-deps.sh" || { echo "run-scenario: package installation failed" >&2; exit 1; }
fi
say "building in $SK_BUILD_DIR"
if [ ! -x "$top/configure" ]; then
  (cd "$top" && autoreconf -fi >/dev/null 2>&1) || { echo "run-scenario: autoreconf failed" >&2; exit 1; }
fi
mkdir -p "$SK_BUILD_DIR"
if [ ! -f "$SK_BUILD_DIR/Makefile" ]; then
  (cd "$SK_BUILD_DIR" && "$top/configure" -q) || { echo "run-scenario: configure failed" >&2; exit 1; }
fi
make -C "$SK_BUILD_DIR" -j"$jobs" >"$SK_BUILD_DIR/scenario-make.out" 2>&1 \
  || { grep -E "error" "$SK_BUILD_DIR/scenario-make.out" | head -20; echo "run-scenario: build failed" >&2; exit 1; }
id "${TEST_USER:-k8suser}" >/dev/null 2>&1 || bash "$top/tests/slurm/cluster.sh" install >/dev/null

# shellcheck source=../tests/e2e/lib.sh
. "$top/tests/e2e/lib.sh"
# shellcheck source=../tests/e2e/online_rl.sh
. "$top/tests/e2e/online_rl.sh"

WATCH_PID=""
SUMMARY_SAID=0
# Whatever way the script ends (a failed step, an unset variable, Ctrl-C): the
# example's objects it applied are deleted (on a real cluster they would stay),
# everything it started is stopped, and the summary line is printed.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [ -n "$WATCH_PID" ] && { kill "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null; }
  rl_stop_log_followers
  if [ "${#RL_MANIFESTS[@]}" -gt 0 ]; then
    local m files=()
    for m in "${RL_MANIFESTS[@]}"; do files+=(-f "$m"); done
    e2e_kubectl delete --ignore-not-found --wait=false "${files[@]}" >/dev/null 2>&1 \
      || echo "run-scenario: the example's objects could not be deleted: kubectl delete ${files[*]}" >&2
  fi
  rl_delete_trainer_access || echo "run-scenario: the trainer's ServiceAccount, Role and binding could not be deleted" >&2
  e2e_stop || echo "run-scenario: stopping the stack reported a problem (see $E2E_D/cluster-stop.log)" >&2
  if [ "$SUMMARY_SAID" = 0 ]; then
    sk_summary >/dev/null 2>&1
    [ "$rc" = 0 ] && rc=1  # ended before its end: a failure whatever the checks said
    echo "scenario: ${SK_PASSED:-0} passed, $(( ${SK_FAILED:-0} + 1 )) failed (ended early, exit $rc)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- 2. start
say "starting: test API server, 3 agents, Slurm cluster (3 nodes x 4 GPUs)"
e2e_start || exit 1
if [ -n "$E2E_KUBECONFIG" ]; then echo "Kubernetes: $E2E_KUBECONFIG"; else echo "Kubernetes: test double at $KUBE_URL (pid $E2E_KUBE_PID)"; fi
for n in 1 2 3; do
  echo "agent $(sk_node "$n"): pid ${E2E_AGENT_PID[$n]}, socket $E2E_AGENTS/$(sk_node "$n")/agent.sock, node address $(e2e_node_address "$n")"
done
echo "plugstack.conf: $(cat "$SK_SLURM_DIR/etc/plugstack.conf")"
python3 "$top/tests/e2e/watch.py" record "$E2E_D/watch.jsonl" --kubeconfig "$E2E_ADMIN_KUBECONFIG" &
WATCH_PID=$!

if [ "$RL_IMAGES" = 1 ]; then
  say "building the rollout and reward images (examples/online-rl/build-images.sh) into $E2E_REGISTRY"
  t_img=$(date +%s.%N)
  bash "$top/examples/online-rl/build-images.sh" "$E2E_REGISTRY" --tls-verify=false
  ok $? "images built from Debian's python3 and numpy and pushed to the registry at $E2E_REGISTRY ($(since "$t_img") s)"
fi

# ---------------------------------------------------------------- 3. the job
say "submitting as $TEST_USER: sbatch -N3 --gres=gpu:4 --k8s-gpus=2 --k8s-labels=team=rl train.sbatch"
rl_submit -N3 --gres=gpu:4 --k8s-gpus=2 --k8s-labels=team=rl || exit 1
J=$RL_JOB
echo "job $J"

say "kubectl get nodes"
rl_check_nodes "$J" 3 2 "team=rl"

if [ "$RL_IMAGES" = 1 ]; then
  say "kubectl apply: a Deployment of 3 rollouts + 1 reward pod, their Services, from images"
  rl_apply_and_wait "$J" "$top/examples/online-rl/rollout-image.yaml" "$top/examples/online-rl/reward-image.yaml"
  rl_check_pulled
else
  say "kubectl apply: a Deployment of 3 rollouts + 1 reward pod, their Services"
  rl_apply_and_wait "$J"
fi
rl_check_pod_gpus "$J"

say "kubectl apply: the Services, whose Endpoints tell the trainer where the rollouts and the reward model are"
rl_publish_services

say "training"
rl_wait_job_and_check_trainer "$J" 3
rl_check_found_endpoints "$J"
rl_check_learning "$J"

say "job end"
rl_check_teardown "$J"
rl_delete_trainer_access; ok $? "the trainer's access (ServiceAccount, Role, binding) removed"

say "account"
python3 "$top/tests/e2e/watch.py" report "$E2E_D/watch.jsonl" "$J" "${RL_JOB_END:-0}" "$RL_SUBMIT_T"
kill "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null; WATCH_PID=""
rl_stop_log_followers

left="$(e2e_leftovers "$J" | grep -E '^(nodes|leases|pods): ')"
ok "[ -z \"\$left\" ]" "no Node, Lease or pod of job $J left in the API${left:+: $left}"

say "stopping everything"
t_stop=$(date +%s.%N)
e2e_stop; ok $? "the Slurm cluster, the agents and the API server stopped"
echo "stop took $(since "$t_stop") s"
left="$(e2e_procs)"
ok "[ -z \"\$left\" ]" "no process left (slurm daemons, steps, shims, pods, agents, test server)${left:+: $left}"
# What is on this host (the API's part was checked above, while it ran).
left="$(e2e_leftovers "$J" | grep -vE '^(nodes|leases|pods): ')"
ok "[ -z \"\$left\" ]" "no run file, agent state or cgroup dir of job $J left${left:+: $left}"

echo
sk_summary >/dev/null
echo "scenario: $SK_PASSED passed, $SK_FAILED failed"
SUMMARY_SAID=1
[ "$SK_FAILED" = 0 ]
