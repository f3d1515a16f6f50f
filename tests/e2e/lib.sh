# shellcheck shell=bash
# tests/e2e/lib.sh -- bring the whole slurm-k8s stack up and down on one host:
# the Kubernetes API test double (or a given kubeconfig), one slurm-k8s-agent
# per Slurm node, and a real Slurm cluster (tests/slurm/cluster.sh) whose
# plugstack loads spank_k8s.so. Used by scripts/run-scenario.sh and by the
# fault tests in tests/e2e/. Source it after setting (all optional):
#
#   SK_BUILD_DIR   build tree with the binaries       [$top/build]
#   SK_DAEMON_BUILD_DIR  build tree of the agent and the shim only [SK_BUILD_DIR]
#                  (the ASan + UBSan build: scripts/run-tests.sh; ASAN_OPTIONS,
#                  UBSAN_OPTIONS and LSAN_OPTIONS of the caller reach the agents
#                  and, through slurmd and the plugin, the shims)
#   SK_SLURM_DIR   cluster dir (everything lives here) [/tmp/sk-e2e]; the
#                  node names (N1, N2, N3: sk_node X) and job ids follow from
#                  it (tests/slurm/lib.sh: SK_NODE_PREFIX, SK_FIRST_JOB_ID), so
#                  that two instances on one host share no node name, cgroup
#                  directory or job id
#   CTLD_PORT, SLURMD_BASE_PORT   [28817, 29001] (below the ephemeral range)
#   E2E_KUBELET_BASE_PORT  agent X's kubelet port = base + X - 1 [29250]
#   E2E_REGISTRY_PORT  the image registry on loopback, +1 and +2 [29300]
#   E2E_GRACE      plugstack grace= (pods' stop budget at job end) [15]
#   E2E_PLUGIN_ARGS  extra plugstack key=value words
#   E2E_KUBECONFIG a kubeconfig: target that cluster instead of the double
#                  (kubectl as the admin and the job's user use it)
#   E2E_AGENT_KUBECONFIG  the agents' own credential there (a kubeconfig of
#                  the ServiceAccount etc/rbac.yaml makes) [E2E_KUBECONFIG]
#   E2E_NODE_IDENTITY  the agents' node_identity [bootstrap]
#   E2E_LEASE_GRACE  the double's --lease-grace       [40]
#   E2E_NODE_AUTHORIZER_LAG  the double's --node-authorizer-lag: a binding
#                  reaches its Node authorizer this many seconds late, as on
#                  a real server, so a node identity's first reads for a pod
#                  are refused (403) and the agent must retry them [0.3]
#   E2E_KUBELET_CERT, E2E_KUBELET_KEY, E2E_KUBELET_CLIENT_CA  the agents'
#                  kubelet endpoint with E2E_KUBECONFIG (the double's own
#                  kubelet-serving certificate and CA are used otherwise)
#   SK_NETNS       1: each Slurm node a host of its own (tests/slurm/hosts.sh):
#                  its slurmd and its agent in the node's network namespace,
#                  its virtual nodes' InternalIP the node's address; the
#                  double (which then refuses to proxy to an address that is
#                  not global unicast, as kube-apiserver does), the registry,
#                  kubectl and the calling script in the site's. The script
#                  calls sk_enter_site first. 0: every node on this host's
#                  loopback (127.0.1.N), where, as on a real server, no
#                  Service publishes a pod's address (e2e online_rl fails) [1]
#   E2E_POD_NETWORK cni: with SK_NETNS=1 each pod its own network (agent.conf
#                  pod_network = cni, node N's pods in 10.244.N.0/24, the
#                  bridge in the node's namespace; E2E_POD_CIDR overrides
#                  the range of an agent conf written meanwhile); host: every
#                  pod on its node's network [cni]
#
# Functions (each returns non-zero with a message on stderr on failure):
#   e2e_start [NODES]     install binaries, start API server, agents, Slurm
#   e2e_stop              stop everything this library started (by pid)
#   e2e_agent_start N / e2e_agent_stop N [SIG]   one agent (nN)
#   e2e_kubectl ARGS...   kubectl against the target with the admin kubeconfig
#   e2e_api METHOD PATH [BODY]  raw admin request to the double (curl)
#   e2e_wait SECONDS CMD  poll CMD (eval) every 0.2 s until it succeeds
#   e2e_node_names JOB    virtual nodes of JOB (names), one a line
#   e2e_pod_field NS/NAME JSONPATH
#   e2e_leftovers JOB     prints what of JOB is left (nodes, leases, processes,
#                         run files, agent state, cgroups); empty = clean
#   e2e_procs             prints every process this library is responsible for
#   e2e_pod_log NS/NAME   the pod's container log (kubectl logs; fails when
#                         kubectl does); sets E2E_LOG_SOURCE
#   e2e_on_host ADDR CMD...  CMD in the network namespace of the node whose
#                         address ADDR is (SK_NETNS=1), else here

E2E_TOP="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export SK_SLURM_DIR="${SK_SLURM_DIR:-/tmp/sk-e2e}"
export CTLD_PORT="${CTLD_PORT:-28817}" SLURMD_BASE_PORT="${SLURMD_BASE_PORT:-29001}"
export NUM_NODES="${NUM_NODES:-3}" GPUS_PER_NODE="${GPUS_PER_NODE:-4}"
# Typed GPUs (gres.conf Type=): requests with and without the type both work,
# and the virtual nodes carry the type as nvidia.com/gpu.product.
export GPU_TYPE="${GPU_TYPE:-a100}"
SK_BUILD_DIR="${SK_BUILD_DIR:-$E2E_TOP/build}"
E2E_KUBELET_BASE_PORT="${E2E_KUBELET_BASE_PORT:-29250}"
E2E_GRACE="${E2E_GRACE:-15}"
E2E_PLUGIN_ARGS="${E2E_PLUGIN_ARGS:-}"
E2E_KUBECONFIG="${E2E_KUBECONFIG:-}"
E2E_LEASE_GRACE="${E2E_LEASE_GRACE:-40}"
export SK_NETNS="${SK_NETNS:-1}"
# shellcheck source=../slurm/lib.sh
. "$E2E_TOP/tests/slurm/lib.sh"
E2E_CLUSTER="$E2E_TOP/tests/slurm/cluster.sh"
E2E_D="$SK_SLURM_DIR"
E2E_LIB="$E2E_D/lib"             # world-readable copies of the binaries
E2E_AGENTS="$E2E_D/agents"       # agents/NODE/{agent.conf,agent.sock,state,shim,agent.log}
E2E_RUNDIR="$E2E_D/rundir"       # the plugin's run files
E2E_KSD="$E2E_D/kube"            # the double's state dir
E2E_EXAMPLES="$E2E_D/examples"   # examples/online-rl, readable by the job user
E2E_REGISTRY_DIR="$E2E_D/registry"  # tests/images/registry.sh: the images' registry
E2E_REGISTRY_PORT="${E2E_REGISTRY_PORT:-29300}"
# The registry's host: loopback, or the site's address, which the nodes'
# pulls reach (SK_NETNS=1).
E2E_REGISTRY_HOST=127.0.0.1
[ "$SK_NETNS" = 1 ] && E2E_REGISTRY_HOST="$(sk_site_addr)"
E2E_REGISTRY="$E2E_REGISTRY_HOST:$E2E_REGISTRY_PORT"
E2E_REGISTRY_AUTH="$E2E_REGISTRY_HOST:$((E2E_REGISTRY_PORT + 1))"  # asks for e2e:s3cret
E2E_REGISTRY_STUCK="$E2E_REGISTRY_HOST:$((E2E_REGISTRY_PORT + 2))"  # accepts, never answers (e2e image_pods)
declare -A E2E_AGENT_PID=()
E2E_KUBE_PID=""
E2E_ADMIN_KUBECONFIG=""

e2e_log() { echo "[e2e $(date +%T.%3N)] $*" >&2; }
e2e_die() { e2e_log "ERROR: $*"; return 1; }

e2e_wait() {  # e2e_wait SECONDS CMD...: poll until CMD (eval) succeeds
  local t="$1"; shift
  local end=$((SECONDS + t))
  until eval "$*"; do
    [ "$SECONDS" -ge "$end" ] && return 1
    sleep 0.2
  done
}

# ------------------------------------------------------------- binaries ---
e2e_install_bins() {
  local b="$SK_BUILD_DIR" f
  for f in spank/.libs/spank_k8s.so agent/slurm-k8s-agent k8s-shim/slurm-k8s-shim; do
    [ -f "$b/$f" ] || { e2e_die "$b/$f missing: build first (SK_BUILD_DIR=$b)"; return 1; }
  done
  mkdir -p "$E2E_D" "$E2E_LIB" "$E2E_EXAMPLES"
  chmod 755 "$E2E_D" "$E2E_LIB" "$E2E_EXAMPLES"
  # The agent and the shim may come from another build (SK_DAEMON_BUILD_DIR:
  # the ASan + UBSan one); the plugin is loaded by slurmd, which is not
  # instrumented, so it always comes from SK_BUILD_DIR.
  local d="${SK_DAEMON_BUILD_DIR:-$b}"
  # libtool wrappers: the real binaries live in .libs/ when shared libs exist.
  local agent="$d/agent/slurm-k8s-agent" shim="$d/k8s-shim/slurm-k8s-shim"
  [ -x "$d/agent/.libs/slurm-k8s-agent" ] && agent="$d/agent/.libs/slurm-k8s-agent"
  [ -x "$d/k8s-shim/.libs/slurm-k8s-shim" ] && shim="$d/k8s-shim/.libs/slurm-k8s-shim"
  [ -x "$agent" ] && [ -x "$shim" ] || { e2e_die "no agent/shim in $d: build first"; return 1; }
  install -m 755 "$b/spank/.libs/spank_k8s.so" "$E2E_LIB/spank_k8s.so"
  install -m 755 "$agent" "$E2E_LIB/slurm-k8s-agent"
  install -m 755 "$shim" "$E2E_LIB/slurm-k8s-shim"
  # The example's files only (not a __pycache__ a local run left).
  find "$E2E_TOP/examples/online-rl" -maxdepth 1 -type f -exec install -m 644 -t "$E2E_EXAMPLES/" {} +
  # Runtime templates (plugstack runtime_config, e2e runtime_template): images
  # e2e-rt/* run through a stand-in for apptainer, which says how it was
  # called and runs the command (no image runtime is installed here).
  cat >"$E2E_LIB/fake-apptainer" <<'EOF'
#!/bin/sh
echo "runtime: $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --bind) echo "bind $2"; shift 2 ;;
    docker://*) echo "image ${1#docker://}"; shift; break ;;
    *) shift ;;
  esac
done
exec "$@"
EOF
  chmod 755 "$E2E_LIB/fake-apptainer"
  # The podman runtime (e2e image_pods): images of the harness's registry on
  # loopback (tests/images/registry.sh) run through rootless podman; the
  # fake GPUs' device nodes are the cluster's.
  # E2E_REGISTRY_OFF=1: no registry (tests/vm/e2e-v2.sh: no image case runs
  # in the guest, which has no podman nor docker-registry).
  "$E2E_TOP/tests/images/registry.sh" stop "$E2E_REGISTRY_DIR" >/dev/null 2>&1 || true
  if [ "${E2E_REGISTRY_OFF:-0}" != 1 ]; then
    "$E2E_TOP/tests/images/registry.sh" start "$E2E_REGISTRY_DIR" "$E2E_REGISTRY_PORT" "$E2E_REGISTRY_HOST" >/dev/null \
      || { e2e_die "the image registry did not start"; return 1; }
  fi
  cat >"$E2E_LIB/runtime.conf" <<EOF
template = e2e-rt/* $E2E_LIB/fake-apptainer exec {mounts:--bind} docker://{image} {command}
podman = $E2E_REGISTRY/*
podman = $E2E_REGISTRY_AUTH/*
insecure_registry = $E2E_REGISTRY
insecure_registry = $E2E_REGISTRY_AUTH
podman = $E2E_REGISTRY_STUCK/*
insecure_registry = $E2E_REGISTRY_STUCK
gpu_device = $SK_SLURM_DIR/dev/nvidia{index}
EOF
  chmod 644 "$E2E_LIB/runtime.conf"
}

# ------------------------------------------------------------- API side ---
e2e_start_kube() {
  if [ -n "$E2E_KUBECONFIG" ]; then
    [ -r "$E2E_KUBECONFIG" ] || { e2e_die "kubeconfig $E2E_KUBECONFIG is not readable"; return 1; }
    E2E_ADMIN_KUBECONFIG="$E2E_KUBECONFIG"
    kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" get nodes >/dev/null \
      || { e2e_die "the cluster of $E2E_KUBECONFIG does not answer 'kubectl get nodes'"; return 1; }
    return 0
  fi
  rm -rf "$E2E_KSD"
  local vars hosts=() i
  if [ "$SK_NETNS" = 1 ]; then
    # On the site's address, which the nodes reach; its certificates name
    # it and the nodes' addresses (the kubelet endpoints it dials); and as
    # kube-apiserver, it proxies to no loopback node address.
    hosts=(--listen "$(sk_site_addr):0" --cert-ip "$(sk_site_addr)" --node-proxy-global-only)
    for ((i = 1; i <= NUM_NODES; i++)); do hosts+=(--cert-ip "$(sk_node_addr "$i")"); done
  fi
  vars="$("$E2E_TOP/tests/kube/start-server.sh" "$E2E_KSD" --lease-grace "$E2E_LEASE_GRACE" \
    --node-authorizer-lag "${E2E_NODE_AUTHORIZER_LAG:-0.3}" "${hosts[@]}")" \
    || { e2e_die "the test API server did not start (log: $E2E_KSD/server.log)"; return 1; }
  eval "$vars"
  E2E_KUBE_PID="$KUBE_SERVER_PID"
  E2E_ADMIN_KUBECONFIG="$KUBECONFIG"
  export KUBE_URL KUBE_TOKEN KUBE_CA
  e2e_agent_rbac && e2e_agent_policy
}

# etc/vap-agent-nodes.yaml applied with kubectl as an admin would, its match
# condition naming the double's agent user: every case's agent then creates,
# patches and deletes its Nodes under the policy, so a change the agent makes
# to a Node it did not label fails the e2e.
e2e_agent_policy() {
  sed "s/system:serviceaccount:kube-system:slurm-k8s-agent/slurm-k8s-agent/" \
      "$E2E_TOP/etc/vap-agent-nodes.yaml" | e2e_kubectl apply -f - >/dev/null \
    || { e2e_die "kubectl apply -f etc/vap-agent-nodes.yaml failed"; return 1; }
  # In force: the agent's credential cannot delete a Node the admin made.
  local probe=e2e-not-a-virtual-node out
  e2e_api POST /api/v1/nodes "{\"metadata\":{\"name\":\"$probe\"}}" >/dev/null
  out=$(curl -sS --max-time 20 --cacert "$KUBE_CA" -H "Authorization: Bearer $(cat "$E2E_KSD/agent.token")" \
    -X DELETE "$KUBE_URL/api/v1/nodes/$probe")
  e2e_api DELETE "/api/v1/nodes/$probe" >/dev/null
  grep -q "ValidatingAdmissionPolicy 'slurm-k8s-agent-nodes'" <<<"$out" \
    || { e2e_die "etc/vap-agent-nodes.yaml is not in force: the agent deleted a foreign Node ($out)"; return 1; }
}

# With node identities the double's agent gets exactly the rights of
# etc/rbac-node-identity.yaml, so that a right the agent needs and the
# manifest lacks fails the e2e: its (Cluster)Roles as rule lists (a Role's
# namespace kept), its bindings to the bootstrap ClusterRoles by the double's
# names for them.
# e2e_agent_rbac [MANIFEST]: MANIFEST's (Cluster)Roles' rules too (the output
# of etc/slurm-k8s-impersonation-rbac, e2e impersonation).
e2e_agent_rbac() {
  [ "${E2E_NODE_IDENTITY:-bootstrap}" = bootstrap ] || return 0
  local roles
  roles="$(python3 - "$E2E_TOP/etc/rbac-node-identity.yaml" "${1:-}" <<'PYEOF'
import json, sys, yaml
builtin = {"system:node-bootstrapper": "node-bootstrapper",
           "system:certificates.k8s.io:certificatesigningrequests:nodeclient": "nodeclient"}
roles = []
for d in list(yaml.safe_load_all(open(sys.argv[1]))) + list(yaml.safe_load_all(sys.argv[2])):
    if not d:
        continue
    if d["kind"] in ("ClusterRole", "Role"):
        for r in d["rules"]:
            r = dict(r)
            if d["kind"] == "Role":
                r["namespaces"] = [d["metadata"]["namespace"]]
            roles.append(r)
    elif d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] in builtin:
        roles.append(builtin[d["roleRef"]["name"]])
print(json.dumps({"subject": "group:slurm-k8s:agent", "role": roles}))
PYEOF
)" || { e2e_die "cannot read etc/rbac-node-identity.yaml"; return 1; }
  e2e_api POST /_test/rbac "$roles" | grep -q '"subject"' \
    || { e2e_die "the double refused the agent's rules of etc/rbac-node-identity.yaml"; return 1; }
}

e2e_stop_kube() {
  [ -n "$E2E_KUBE_PID" ] || return 0
  "$E2E_TOP/tests/kube/start-server.sh" --stop "$E2E_KSD"
  E2E_KUBE_PID=""
}

e2e_kubectl() { kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" --request-timeout=20s "$@"; }

# Raw admin request to the double (its /_test controls included).
e2e_api() {
  local m="$1" p="$2" body="${3:-}"
  if [ -n "$body" ]; then
    curl -sS --max-time 20 --cacert "$KUBE_CA" -H "Authorization: Bearer $KUBE_TOKEN" \
      -H 'Content-Type: application/json' -X "$m" -d "$body" "$KUBE_URL$p"
  else
    curl -sS --max-time 20 --cacert "$KUBE_CA" -H "Authorization: Bearer $KUBE_TOKEN" -X "$m" "$KUBE_URL$p"
  fi
}

# ---------------------------------------------------------------- agents ---
e2e_agent_conf() {  # e2e_agent_conf N -> writes agents/$(sk_node N)/agent.conf
  local n="$1" a="$E2E_AGENTS/$(sk_node "$1")"
  mkdir -p "$a/state"
  chmod 755 "$E2E_AGENTS" "$a"   # the job user reaches its shim dir below
  {
    if [ -n "$E2E_KUBECONFIG" ]; then
      echo "kubeconfig = ${E2E_AGENT_KUBECONFIG:-$E2E_KUBECONFIG}"
    else
      # The double's agent identity: role 'agent' (least rights, as etc/rbac.yaml).
      echo "api_server = $KUBE_URL"
      echo "api_ca_file = $E2E_KSD/ca.crt"
      echo "api_token_file = $E2E_KSD/agent.token"
      # kubectl logs: the double proxies to this endpoint with its
      # kubelet-client certificate (signed by its CA).
      echo "kubelet_cert = $E2E_KSD/kubelet-serving.crt"
      echo "kubelet_key = $E2E_KSD/kubelet-serving.key"
      echo "kubelet_client_ca = $E2E_KSD/ca.crt"
    fi
    [ -z "${E2E_KUBELET_CERT:-}" ] || echo "kubelet_cert = $E2E_KUBELET_CERT"
    [ -z "${E2E_KUBELET_KEY:-}" ] || echo "kubelet_key = $E2E_KUBELET_KEY"
    [ -z "${E2E_KUBELET_CLIENT_CA:-}" ] || echo "kubelet_client_ca = $E2E_KUBELET_CLIENT_CA"
    cat <<EOF
cluster_name = e2e
slurm_node = $(sk_node "$n")
node_address = $(e2e_node_address "$n")
kubelet_port = $((E2E_KUBELET_BASE_PORT + n - 1))
state_dir = $a/state
shim_state_dir = $a/shim
socket_path = $a/agent.sock
socket_mode = 0666
admin_uids = 0
shim_auth = cgroup
gpu_device = $SK_SLURM_DIR/dev/nvidia{index}
pod_pids_max = 256
job_alive_command = squeue -h -t all -j {job} -o %T
end_time_check_interval = 2s
job_state_check_interval = ${E2E_JOB_STATE_CHECK:-2s}
gc_interval = 10s
# Leases renewed every 5 s for 20 s (the agent's defaults: 10 s, 40 s): a
# dead node's are stale after 30 s (e2e node_fail waits that long).
lease_duration = 20s
lease_renew_interval = 5s
# ConfigMap and Secret volumes read again every 2 s (default 60 s).
volume_refresh_interval = 2s
log_level = verbose
# Jobs that name no --k8s-namespace lend to "default" only (e2e namespace).
allowed_namespaces = default
# hostPath and claim volumes only below the e2e's shared directory (e2e volumes).
volume_roots = $E2E_D/shared
# Each virtual node its own system:node:<node> certificate (a kubelet-client
# CSR, approved and signed by the double as by the controller-manager).
node_identity = ${E2E_NODE_IDENTITY:-bootstrap}
EOF
    # The node's image store: public images pulled once per node (e2e
    # image_store); none where the e2e runs no registry (no image pods).
    [ "${E2E_REGISTRY_OFF:-0}" = 1 ] || cat <<EOF
image_store = $a/images
image_store_user = slurm-k8s-images
image_store_insecure_registries = $E2E_REGISTRY,$E2E_REGISTRY_AUTH,$E2E_REGISTRY_STUCK
image_store_size = ${E2E_IMAGE_STORE_SIZE:-100G}
EOF
    # Each pod its own network where each node is a host of its own
    # (SK_NETNS=1: the bridge is made in the node's namespace, never on this
    # machine's own): node N's pods in 10.244.N.0/24.
    [ "$SK_NETNS" != 1 ] || [ "${E2E_POD_NETWORK:-cni}" != cni ] || cat <<EOF
pod_network = cni
pod_cidr = ${E2E_POD_CIDR:-10.244.$n.0/24}
pod_network_dir = $a/net
EOF
    # Agent 1 also collects what agents that died with their node left (e2e node_fail).
    [ "$n" != 1 ] || echo "gc_failed_nodes = true"
  } > "$a/agent.conf"
}

# The InternalIP of Slurm node nN's virtual nodes: its host's address
# (SK_NETNS=1, tests/slurm/hosts.sh; the double's certificates name it:
# --cert-ip), as nodes of a real cluster have addresses of their own: pods on
# different nodes may then use the same port (e2e online_rl's Deployment).
# With SK_NETNS=0: 127.0.1.N, a loopback address of its own per node (the
# double's kubelet-serving certificate names 127.0.1.1-16), or 127.0.0.1
# against a cluster of E2E_KUBECONFIG, whose kubelet certificate the harness
# does not make.
e2e_node_address() {
  if [ "$SK_NETNS" = 1 ]; then sk_node_addr "$1"
  elif [ -n "$E2E_KUBECONFIG" ]; then echo 127.0.0.1
  else echo "127.0.1.$1"; fi
}

# e2e_on_host ADDR CMD...: CMD on the host whose address ADDR is (with
# SK_NETNS=1 a node's network namespace: its sockets, e.g. for ss), else here.
e2e_on_host() {
  local addr=$1 i; shift
  if [ "$SK_NETNS" = 1 ]; then
    for ((i = 1; i <= NUM_NODES; i++)); do
      if [ "$(sk_node_addr "$i")" = "$addr" ]; then
        sk_in_netns "$(sk_netns_node "$i")" "$@"
        return
      fi
    done
  fi
  "$@"
}

e2e_agent_start() {  # e2e_agent_start N
  local n="$1" a="$E2E_AGENTS/$(sk_node "$1")" netns=()
  [ -f "$a/agent.conf" ] || e2e_agent_conf "$n"
  # SK_NETNS=1: on its node's host, beside its slurmd.
  [ "$SK_NETNS" = 1 ] && netns=(nsenter --net="$SK_NETNS_RUN/$(sk_netns_node "$n")" --)
  # SLURM_CONF: the job_alive_command (squeue) must reach this cluster.
  "${netns[@]}" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SLURM_CONF="$SK_CONF" \
    "$E2E_LIB/slurm-k8s-agent" --config "$a/agent.conf" </dev/null >>"$a/agent.log" 2>&1 &
  E2E_AGENT_PID[$n]=$!
  echo "${E2E_AGENT_PID[$n]}" > "$a/agent.pid"
  # Up = its socket answers (a stale socket file may exist).
  if ! e2e_wait 10 "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' '$a/agent.sock' 2>/dev/null"; then
    tail -n 20 "$a/agent.log" >&2
    e2e_die "agent $(sk_node "$n") did not start (log: $a/agent.log)"; return 1
  fi
}

e2e_agent_stop() {  # e2e_agent_stop N [SIGNAL]
  # The pid file names the current agent (a subshell may have restarted it).
  local n="$1" sig="${2:-TERM}" pid
  pid="$(cat "$E2E_AGENTS/$(sk_node "$n")/agent.pid" 2>/dev/null)"
  [ -n "$pid" ] || pid="${E2E_AGENT_PID[$1]:-}"
  [ -n "$pid" ] || return 0
  kill -"$sig" "$pid" 2>/dev/null
  e2e_wait 10 "! sk_pid_alive $pid" || { kill -KILL "$pid" 2>/dev/null; sleep 0.2; }
  wait "$pid" 2>/dev/null
  unset "E2E_AGENT_PID[$n]"
  rm -f "$E2E_AGENTS/$(sk_node "$n")/agent.pid"
}

# ----------------------------------------------------------------- Slurm ---
e2e_plugstack() {
  echo "required $E2E_LIB/spank_k8s.so socket=$E2E_AGENTS/{node}/agent.sock rundir=$E2E_RUNDIR shim=$E2E_LIB/slurm-k8s-shim timeout=5 grace=$E2E_GRACE shim_log_level=verbose cluster=e2e runtime_config=$E2E_LIB/runtime.conf gpu_device=$SK_SLURM_DIR/dev/nvidia{index} $E2E_PLUGIN_ARGS"
}

e2e_start_slurm() {
  export PLUGSTACK_LINES SLURM_CONF_EXTRA GPU_PARTITION_OPTS CONSTRAIN_RAM_SPACE
  PLUGSTACK_LINES="$(e2e_plugstack)"
  # Jobs confined in memory as sites run them: the pods' own memory cgroups
  # go below the job's (e2e pod_devices).
  CONSTRAIN_RAM_SPACE=yes
  # Preemption (e2e preempt): jobs of the higher-tier partition "urgent"
  # cancel jobs of "gpu" on the nodes they need, requeue those of
  # "requeue" (e2e preempt_requeue) and suspend those of "suspend" until
  # they end (e2e preempt_suspend). SUSPEND needs GANG at the cluster level
  # (slurm.conf(5)); each partition names its own mode. None of them
  # oversubscribes, so GANG time-slices nothing and only resumes what a
  # preemption suspended.
  GPU_PARTITION_OPTS="PreemptMode=CANCEL"
  SLURM_CONF_EXTRA="PreemptType=preempt/partition_prio
PreemptMode=SUSPEND,GANG
PartitionName=urgent Nodes=${SK_NODE_PREFIX}[1-$NUM_NODES] PriorityTier=10 PreemptMode=OFF MaxTime=INFINITE State=UP
PartitionName=requeue Nodes=${SK_NODE_PREFIX}[1-$NUM_NODES] PriorityTier=1 PreemptMode=REQUEUE MaxTime=INFINITE State=UP
PartitionName=suspend Nodes=${SK_NODE_PREFIX}[1-$NUM_NODES] PriorityTier=1 PreemptMode=SUSPEND MaxTime=INFINITE State=UP"
  "$E2E_CLUSTER" start >"$E2E_D/cluster-start.log" 2>&1 \
    || { tail -n 30 "$E2E_D/cluster-start.log" >&2; e2e_die "Slurm cluster did not start"; return 1; }
}

# ------------------------------------------------------------- together ---
e2e_start() {
  [ "$(id -u)" = 0 ] || { e2e_die "needs root (slurmd, munge, agents)"; return 1; }
  local i
  # A previous run's cluster (same dir) is stopped first; its cgroups removed.
  "$E2E_CLUSTER" clean >/dev/null 2>&1 || true
  # SK_NETNS=1: the hosts (the clean removed them) before the agents go there.
  if [ "$SK_NETNS" = 1 ]; then
    sk_netns_up "$NUM_NODES" || { e2e_die "could not make the hosts' network namespaces"; return 1; }
  fi
  e2e_install_bins || return 1
  rm -rf "$E2E_AGENTS" "$E2E_RUNDIR"
  mkdir -p "$E2E_AGENTS"
  e2e_start_kube || return 1
  for ((i = 1; i <= NUM_NODES; i++)); do e2e_agent_conf "$i"; e2e_agent_start "$i" || return 1; done
  e2e_start_slurm || return 1
}

e2e_stop() {
  local rc=0 n
  "$E2E_CLUSTER" stop >"$E2E_D/cluster-stop.log" 2>&1 || { rc=1; tail -n 20 "$E2E_D/cluster-stop.log" >&2; }
  "$E2E_TOP/tests/images/registry.sh" stop "$E2E_REGISTRY_DIR" >/dev/null 2>&1 || true
  # e2e cdi_gpus' specification and device node, had it stopped midway.
  rm -f /var/run/cdi/slurm-k8s-e2e-*.yaml "$SK_SLURM_DIR/dev/nvidia-uvm-e2e"
  for n in "${!E2E_AGENT_PID[@]}"; do e2e_agent_stop "$n"; done
  # Agents started by an earlier process of this test (pid files).
  for n in "$E2E_AGENTS"/"$SK_NODE_PREFIX"*/agent.pid; do
    [ -e "$n" ] || continue
    n="${n%/agent.pid}"; e2e_agent_stop "${n##*/"$SK_NODE_PREFIX"}"
  done
  e2e_stop_kube
  # SK_NETNS=1: the hosts' namespaces the cluster's stop kept for the agents.
  if [ "$SK_NETNS" = 1 ]; then sk_netns_down || rc=1; fi
  return "$rc"
}

# ------------------------------------------------------------ inspection ---
e2e_node_names() {  # virtual nodes of JOB
  e2e_kubectl get nodes -l "slurm-k8s/job-id=$1" -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}' 2>/dev/null
}

e2e_pod_field() {  # e2e_pod_field NS/NAME JSONPATH
  e2e_kubectl get pod -n "${1%%/*}" "${1#*/}" -o "jsonpath=$2" 2>/dev/null
}

# A pod's log: kubectl logs through the API server's proxy to the agent's
# kubelet endpoint, and nothing else. When kubectl fails, its error goes to
# stderr and the function fails (E2E_LOG_SOURCE says so): a check that reads
# the log must fail with it, never take the absence of a line in a log it
# could not read for a pass.
e2e_pod_log() {
  local ns="${1%%/*}" name="${1#*/}" out err
  err="$(mktemp)"
  if out="$(e2e_kubectl logs -n "$ns" "$name" 2>"$err")"; then
    E2E_LOG_SOURCE="kubectl logs"; rm -f "$err"
    [ -z "$out" ] || printf '%s\n' "$out"
    return 0
  fi
  E2E_LOG_SOURCE="kubectl logs, which failed: $(head -c 200 "$err")"
  echo "e2e_pod_log $1: $E2E_LOG_SOURCE" >&2
  rm -f "$err"
  return 1
}
declare -A E2E_POD_UID=()
E2E_LOG_SOURCE=""

# Every live process this library is responsible for.
e2e_procs() {
  local p
  sk_cluster_procs
  for p in $(pgrep -f "$E2E_LIB/slurm-k8s-(agent|shim)" 2>/dev/null); do
    [ "$p" = "$$" ] || ps -o pid=,comm=,args= -p "$p" 2>/dev/null
  done
  pgrep -a -f "$E2E_EXAMPLES/|e2e-pod-[0-9]+-" 2>/dev/null | grep -v "^$$ " || true
  [ -n "$E2E_KUBE_PID" ] && sk_pid_alive "$E2E_KUBE_PID" && echo "$E2E_KUBE_PID kube_test_server"
  return 0
}

# What is left of JOB: API objects, processes, files, cgroups. Empty = clean.
e2e_leftovers() {
  local j="$1" out f err
  # What the API holds of the job: each query must answer, else that is
  # what is reported (a Forbidden or an outage is not "nothing left").
  err="$(mktemp)"
  if out="$(e2e_kubectl get nodes -l "slurm-k8s/job-id=$j" -o name 2>"$err")"; then
    [ -z "$out" ] || echo "nodes: $(echo $out)"
  else
    echo "nodes: kubectl failed: $(head -c 200 "$err")"
  fi
  if out="$(e2e_kubectl get leases -n kube-node-lease -o name 2>"$err")"; then
    out="$(grep -- "-$j\$" <<<"$out")"; [ -z "$out" ] || echo "leases: $(echo $out)"
  else
    echo "leases: kubectl failed: $(head -c 200 "$err")"
  fi
  # Pods still bound to one of the job's nodes (slurm-<node>-<job>).
  if out="$(e2e_kubectl get pods -A -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.nodeName}{"\n"}{end}' 2>"$err")"; then
    out="$(awk -v s="-$j" '$2 != "" && substr($2, length($2) - length(s) + 1) == s { print $1 }' <<<"$out")"
    [ -z "$out" ] || echo "pods: $(echo $out)"
  else
    echo "pods: kubectl failed: $(head -c 200 "$err")"
  fi
  rm -f "$err"
  out="$(pgrep -a -u "$TEST_UID" -f "slurm-k8s-shim --job-id $j " 2>/dev/null)"; [ -z "$out" ] || echo "shim: $out"
  out="$(sk_cluster_procs | grep -E "job_$j|SLURM_JOB_ID=$j" || true)"; [ -z "$out" ] || echo "slurm procs: $out"
  for f in "$E2E_RUNDIR"/job_"$j"_* "$E2E_AGENTS"/*/state/job_"$j"_* "$E2E_AGENTS"/*/shim/job_"$j"_*; do
    [ -e "$f" ] && echo "file: $f"
  done
  # The tmpfs of its pods' memory volumes (their source names the job), and
  # the bind of its shim directory onto itself (agent/pod_tmpfs.h share_job_dir).
  out="$(grep " slurm-k8s:job_${j}_" /proc/self/mountinfo | awk '{print $5}' | paste -sd' ')"
  [ -z "$out" ] || echo "mounts: $out"
  out="$(awk -v s="/shim/job_${j}_" 'index($5, s) { print $5 }' /proc/self/mountinfo | paste -sd' ')"
  [ -z "$out" ] || echo "mounts: $out"
  # Its pods' own networks (agent/network/pod_network.h): each held
  # namespace's directory names its job in result.json.
  for f in "$E2E_AGENTS"/*/net/pods/*/result.json; do
    [ -e "$f" ] && grep -q "\"job_${j}_" "$f" && echo "network: ${f%/result.json}"
  done
  for f in /sys/fs/cgroup/*/slurm_"$SK_NODE_PREFIX"*/uid_*/job_"$j" /sys/fs/cgroup/*/slurm_k8s_"$SK_NODE_PREFIX"*/job_"$j" \
      /sys/fs/cgroup/system.slice/"$SK_NODE_PREFIX"*_slurmstepd.scope/job_"$j"; do
    [ -d "$f" ] && echo "cgroup: $f"
  done
  return 0
}

# ------------------------------------------------------- jobs and pods ---
# A batch script readable by the test user.
e2e_script() {  # e2e_script NAME BODY -> path
  local p="$SK_JOBS_DIR/$1.sh"
  printf '#!/bin/bash\n%s\n' "$2" > "$p"; chmod 644 "$p"; echo "$p"
}

# Submit a job that sleeps (as the test user), wait until it runs and its
# NODES virtual nodes are Ready. Sets E2E_JOB. e2e_job NODES SBATCH_ARGS...
e2e_job() {
  local want="$1"; shift
  local s
  s="$(e2e_script sleeper 'echo "node=$SLURM_K8S_NODE gpus=$SLURM_K8S_GPUS error=$SLURM_K8S_ERROR"; echo "namespaces=$SLURM_K8S_NAMESPACES"; sleep 600')"
  E2E_JOB="$(sk_submit_as_user -o "$SK_JOBS_DIR/e2e-%j.out" "$@" "$s")" || { E2E_JOB=""; return 1; }
  sk_wait_state "$E2E_JOB" RUNNING 30 || return 1
  [ "$want" = 0 ] && return 0
  e2e_wait 20 "[ \"\$(e2e_ready_nodes $E2E_JOB)\" = $want ]" \
    || { e2e_log "job $E2E_JOB: $(e2e_ready_nodes "$E2E_JOB") of $want nodes Ready"; return 1; }
}

e2e_ready_nodes_by() {  # e2e_ready_nodes_by LABEL VALUE: Ready Nodes with slurm-k8s/LABEL=VALUE
  e2e_kubectl get nodes -l "slurm-k8s/$1=$2" \
    -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True
}

e2e_ready_nodes() {  # number of Ready virtual nodes of JOB
  e2e_kubectl get nodes -l "slurm-k8s/job-id=$1" \
    -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True
}

# A pod on JOB's nodes that logs its GPUs, answers SIGTERM with
# "received signal 15" and exit 0, and carries the marker e2e-pod-JOB-NAME in
# its command line (for pgrep). Settings (env): GPUS [1], NS [default],
# NODE (bind directly with spec.nodeName, bypassing the scheduler),
# RESTART [Always], EXTRA_SPEC (YAML lines inside the container, 4 spaces),
# EXTRA_META (YAML lines in its metadata, 2 spaces).
e2e_pod_yaml() {  # e2e_pod_yaml JOB NAME
  local j="$1" name="$2"
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: ${NS:-default}
  labels: {e2e: "yes"}
${EXTRA_META:-}
spec:
$( [ -n "${NODE:-}" ] && echo "  nodeName: $NODE" )
  nodeSelector: {slurm-k8s/job-id: "$j"}
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  restartPolicy: ${RESTART:-Always}
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: e2e/sleeper:1
    command: ["/bin/sh", "-c", "trap 'echo received signal 15; exit 0' TERM; echo started CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES=\$NVIDIA_VISIBLE_DEVICES; while :; do sleep 1 & wait \$!; done", "e2e-pod-$j-$name"]
    resources:
      limits: {nvidia.com/gpu: ${GPUS:-1}}
${EXTRA_SPEC:-}
EOF
}

e2e_pod() {  # e2e_pod JOB NAME: create it (see e2e_pod_yaml)
  e2e_pod_yaml "$1" "$2" | e2e_kubectl apply -f - >/dev/null
}

e2e_pod_phase() { e2e_pod_field "${NS:-default}/$1" '{.status.phase}'; }

e2e_pod_running() {  # e2e_pod_running NAME [TIMEOUT]: Running and Ready
  e2e_kubectl wait -n "${NS:-default}" --for=condition=Ready --timeout="${2:-30}s" "pod/$1" >/dev/null 2>&1
}

e2e_pod_pids() {  # pids of the pod's main process
  pgrep -f "^/bin/sh -c .* e2e-pod-$1-$2\$" 2>/dev/null | paste -sd' '
}

# scancel JOB and wait until it, its Nodes and its Leases are gone.
e2e_end_job() {
  local j="$1"
  scancel "$j" 2>/dev/null
  sk_wait_gone "$j" 60 || return 1
  e2e_wait 30 "[ -z \"\$(e2e_node_names $j)\" ]"
}

# The Event on the job's Node(s) that names how the job ended (REASON).
check_job_end_event() {  # check_job_end_event JOB WHAT REASON
  local got
  got="$(e2e_kubectl get events -n default --field-selector involvedObject.kind=Node \
         -o jsonpath='{range .items[*]}{.involvedObject.name} {.reason} {.type}: {.message}{"\n"}{end}' 2>&1 \
         | grep -E "^slurm-[^ ]*-$1 ")"
  grep -q "^[^ ]* $3 " <<<"$got" && grep -q "Slurm job $1 " <<<"$got"
  ok $? "$2: the Node's Event says $3: $(grep -m1 "^[^ ]* $3 " <<<"$got")"
}

# Assert: nothing of JOB is left (API objects, processes, files, cgroups).
e2e_assert_clean() {  # e2e_assert_clean JOB WHAT
  local left
  e2e_wait 10 "[ -z \"\$(e2e_leftovers $1)\" ] && [ -z \"\$(pgrep -f 'e2e-pod-$1-')\" ]"
  left="$(e2e_leftovers "$1"; pgrep -af "e2e-pod-$1-" | sed 's/^/pod process: /')"
  [ -z "$left" ]; ok $? "$2: nothing of job $1 left (Node, Lease, shim, pods, run file, agent state, cgroup)${left:+: $(echo $left)}"
}
