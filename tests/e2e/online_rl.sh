# shellcheck shell=bash
# tests/e2e/online_rl.sh -- the steps of the online-RL scenario, as functions
# that scripts/run-scenario.sh and the e2e fault tests share. Source after
# tests/e2e/lib.sh (which starts the stack). Each rl_* function asserts with
# `ok` (PASS:/FAIL: lines) and returns non-zero only when the scenario cannot
# go on.
#
#   rl_submit SBATCH_ARGS...      submit train.sbatch as the test user; RL_JOB
#                                 (RL_EXPORT="K=V,..." more of the trainer's environment)
#   rl_check_nodes JOB N GPUS K=V the job's N virtual nodes: Ready, GPUs, label, taint
#   rl_apply_and_wait JOB [MANIFESTS...]  kubectl apply (placeholders filled): the rollout
#                                 Deployment available, every pod of the example Ready
#                                 (RL_PODS), one rollout per node
#   rl_check_pod_gpus JOB         each pod's CUDA_VISIBLE_DEVICES within its node's lent GPUs,
#                                 only its GPUs' device nodes in its view (RL_IMAGES=1:
#                                 pods from the example's images, GPUs renumbered from 0)
#   rl_check_pulled               each pod's image pulled (Pulled event) and reported
#   rl_publish_services           kubectl apply the manifests' Services: the trainer starts
#   rl_check_found_endpoints JOB  the trainer found every rollout and the reward pod
#                                 in the Services' Endpoints, at its pod IP
#   rl_delete_workloads           kubectl delete the applied manifests (the Deployment
#                                 would re-create its pods after the job), wait for the pods
#   rl_wait_job_and_check_trainer JOB RANKS
#   rl_check_learning JOB [faults] the trainer's summary: reward rose, no sample lost,
#                                 every rollout holds the last weight version
#                                 (faults: late samples allowed when accounted for,
#                                 the killed rollout seen restarted)
#   rl_check_teardown JOB         SIGTERM in the pod logs, final statuses, nodes gone

RL_JOB=""
RL_JOB_END=""
RL_PODS=()                 # ns/name of the pods applied
declare -A RL_LENT=()      # slurm node -> lent GPUs ("2,3"), from the run files
declare -A RL_POD_NODE=()  # ns/name -> virtual node
declare -A RL_POD_IP=()    # ns/name -> pod IP
RL_FOLLOWERS=()            # background followers (kubectl logs -f, tail -F) to stop
RL_LOG_FOLLOWS=()          # of those, the kubectl logs -f ones (end by themselves)
RL_MANIFESTS=()            # the filled manifests applied
RL_TRAINER_ACCESS=0        # the trainer's ServiceAccount, Role and binding were applied (real cluster)
E2E_LOG_SOURCE="${E2E_LOG_SOURCE:-}"

# A kubeconfig for the trainer (the job's user) that may only read Endpoints
# in default, never more (what a site's user kubeconfig or a ServiceAccount's
# Role gives: examples/online-rl/README.md): with the double, a token of user
# rl-trainer bound by its controls; against E2E_KUBECONFIG's cluster, the
# token of a ServiceAccount rl-trainer with a Role of that one right (removed
# again by rl_delete_trainer_access). CA inline: the double's state dir is
# root's, and the job's user must not read the admin's kubeconfig.
rl_trainer_kubeconfig() {
  local f="$SK_JOBS_DIR/rl-trainer.kubeconfig" tok server ca caf
  if [ -n "$E2E_KUBECONFIG" ]; then
    e2e_kubectl apply -f - >/dev/null <<EOF || return 1
apiVersion: v1
kind: ServiceAccount
metadata: {name: rl-trainer, namespace: default, labels: {slurm-k8s/example: online-rl}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: rl-trainer-endpoints, namespace: default, labels: {slurm-k8s/example: online-rl}}
rules:
- apiGroups: [""]
  resources: ["endpoints"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rl-trainer-endpoints, namespace: default, labels: {slurm-k8s/example: online-rl}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: rl-trainer-endpoints}
subjects:
- {kind: ServiceAccount, name: rl-trainer, namespace: default}
EOF
    RL_TRAINER_ACCESS=1
    tok="$(e2e_kubectl create token rl-trainer -n default --duration=2h)" || return 1
    server="$(e2e_kubectl config view --raw --minify -o 'jsonpath={.clusters[0].cluster.server}')"
    ca="$(e2e_kubectl config view --raw --minify -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}')"
    if [ -z "$ca" ]; then
      caf="$(e2e_kubectl config view --raw --minify -o 'jsonpath={.clusters[0].cluster.certificate-authority}')"
      [ -n "$caf" ] && ca="$(base64 -w0 < "$caf")"
    fi
    [ -n "$server" ] && [ -n "$ca" ] || { echo "rl_trainer_kubeconfig: no server or CA in $E2E_KUBECONFIG" >&2; return 1; }
  else
    tok="$(e2e_api POST /_test/tokens '{"user": "rl-trainer", "uid": "rl-trainer"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')" || return 1
    e2e_api POST /_test/rbac '{"subject": "user:rl-trainer", "role": [{"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get", "list", "watch"], "namespaces": ["default"]}]}' >/dev/null || return 1
    server="$KUBE_URL"
    ca="$(base64 -w0 < "$KUBE_CA")"
  fi
  ( umask 077; cat > "$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: rl-trainer
  user:
    token: $tok
contexts:
- name: e2e
  context: {cluster: e2e, user: rl-trainer, namespace: default}
current-context: e2e
EOF
  )
  chown "$TEST_USER" "$f"
  echo "$f"
}

rl_submit() {
  local out="$SK_JOBS_DIR/online-rl-%j.out" kc
  kc="$(rl_trainer_kubeconfig)"; ok $? "a kubeconfig for the trainer that may read Endpoints (${kc:-none})"
  RL_SUBMIT_T=$(date +%s.%N)
  # The trainer finds the rollouts and the reward service through the
  # Endpoints of their Services (train.sbatch: ROLLOUT_SERVICE, REWARD_SERVICE).
  RL_JOB="$(sk_submit_as_user "$@" -o "$out" \
    --export=ALL,EXAMPLES_DIR="$E2E_EXAMPLES",KUBECONFIG="$kc",SUMMARY_DIR="$SK_JOBS_DIR"${RL_EXPORT:+,$RL_EXPORT} \
    "$E2E_EXAMPLES/train.sbatch")"
  ok $? "sbatch accepted the job as $TEST_USER (job ${RL_JOB:-none})"
  [ -n "$RL_JOB" ] || return 1
  sk_wait_state "$RL_JOB" RUNNING 30
  ok $? "job $RL_JOB is RUNNING"
  rl_follow_shim_logs "$RL_JOB"
}

# The job's shims' logs (<rundir>/job_J_NODE.json.shim.log, which the epilog
# removes) followed into shimlogs/: a final status that is not what the job's
# end should give is then shown with the shim's and the agent's words on that
# pod (rl_show_stop).
rl_follow_shim_logs() {
  local j="$1" n f
  mkdir -p "$E2E_D/shimlogs"
  for n in "$N1" "$N2" "$N3"; do
    f="$E2E_RUNDIR/job_${j}_${n}.json.shim.log"
    timeout 900 tail -n +1 -F "$f" >"$E2E_D/shimlogs/job_${j}_${n}.log" 2>/dev/null &
    RL_FOLLOWERS+=("$!")
  done
}

# What the shims and agents logged about a pod's stop (its name), for a
# failing end-of-job check.
rl_show_stop() {
  local name="${1#*/}"
  echo "  --- the shims' and agents' lines on $name:"
  grep -h -- "$name" "$E2E_D"/shimlogs/*.log "$E2E_AGENTS"/n*/agent.log 2>/dev/null \
    | grep -Ei "stop|kill|grace|exit|shutdown|sigterm|delet|signal" | tail -n 25 | sed 's/^/    /'
}

# Prints "name ready gpu_capacity gpu_allocatable labels taints" per node of JOB.
rl_nodes_json() {
  e2e_kubectl get nodes -l "slurm-k8s/job-id=$1" -o json 2>/dev/null
}

rl_check_nodes() {
  local j="$1" want="$2" gpus="$3" label="$4" t0 js
  t0=$SECONDS
  e2e_wait 30 "[ \"\$(e2e_ready_nodes $j)\" = $want ]"
  ok $? "$want virtual nodes of job $j are Ready ($((SECONDS - t0)) s after RUNNING)"
  e2e_kubectl get nodes -o wide
  e2e_kubectl get nodes -l "slurm-k8s/job-id=$j" \
    -o 'custom-columns=NAME:.metadata.name,GPU:.status.capacity.nvidia\.com/gpu,ALLOCATABLE-GPU:.status.allocatable.nvidia\.com/gpu,TEAM:.metadata.labels.team,SLURM-NODE:.metadata.labels.slurm-k8s/slurm-node,TAINTS:.spec.taints[*].key'
  js="$(rl_nodes_json "$j")"
  local res
  res="$(JS="$js" python3 - "$j" "$want" "$gpus" "$label" <<'PY'
import json, os, sys
job, want, gpus, label = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
k, v = label.split("=", 1)
items = json.loads(os.environ["JS"] or '{"items": []}')["items"]
bad = []
for n in items:
    name, st, md = n["metadata"]["name"], n["status"], n["metadata"]
    if st["capacity"].get("nvidia.com/gpu") != gpus or st["allocatable"].get("nvidia.com/gpu") != gpus:
        bad.append(f"{name}: nvidia.com/gpu {st['capacity'].get('nvidia.com/gpu')}/{st['allocatable'].get('nvidia.com/gpu')}")
    if md["labels"].get(k) != v or md["labels"].get("slurm-k8s/job-id") != job:
        bad.append(f"{name}: labels {md['labels']}")
    if {"key": "slurm-k8s/job", "value": job, "effect": "NoSchedule"} not in n["spec"].get("taints", []):
        bad.append(f"{name}: taints {n['spec'].get('taints')}")
    if not name.endswith("-" + job):
        bad.append(f"{name}: name")
print(f"{len(items)} " + "; ".join(bad))
PY
)"
  [ "${res%% *}" = "$want" ] && [ -z "${res#* }" ]; ok $? \
    "each virtual node has nvidia.com/gpu: $gpus (capacity and allocatable), label $label, taint slurm-k8s/job=$j:NoSchedule${res#* }"
  # Lent GPUs per Slurm node, from the plugin's run files (root-only).
  local f n
  for f in "$E2E_RUNDIR"/job_"$j"_*.json; do
    [ -e "$f" ] || continue
    n="${f##*_}"; n="${n%.json}"
    RL_LENT[$n]="$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["gpus"])))' "$f")"
  done
  ok "[ ${#RL_LENT[@]} = $want ]" "the plugin lent GPUs on $want nodes: $(for n in "${!RL_LENT[@]}"; do printf '%s=[%s] ' "$n" "${RL_LENT[$n]}"; done)"
}

rl_fill_manifest() {  # rl_fill_manifest JOB FILE -> path of the filled copy
  mkdir -p "$E2E_D/manifests"
  local out
  out="$E2E_D/manifests/$(basename "$2")"
  sed -e "s|__JOB_ID__|$1|g" -e "s|__EXAMPLES__|$E2E_EXAMPLES|g" -e "s|__REGISTRY__|$E2E_REGISTRY|g" "$2" > "$out"
  echo "$out"
}

# Follow a pod's log from the start (kubectl logs -f) into podlogs/NAME.log:
# the pod and its node are gone after the job, and so is `kubectl logs`.
# A copy of the CRI log file the shim writes (tail -F, as root) is kept too:
# what the follow must have delivered (rl_followed_log).
rl_follow_log() {
  mkdir -p "$E2E_D/podlogs"
  local ns="${1%%/*}" name="${1#*/}" uid f
  # Once the pod's node serves its log with a line in it (Running in the API
  # comes a moment before its agent indexed the container): a follow begun
  # earlier fails.
  e2e_wait 15 "[ -n \"\$(e2e_kubectl logs -n '$ns' '$name' 2>/dev/null)\" ]"
  timeout 900 kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" logs -f -n "$ns" "$name" \
    >"$E2E_D/podlogs/$name.log" 2>"$E2E_D/podlogs/$name.err" &
  local follow=$!
  RL_FOLLOWERS+=("$follow") RL_LOG_FOLLOWS+=("$follow")
  # Returns once the follow is under way (it delivered the pod's first line;
  # every pod followed prints one at its start): a job ended right after
  # must not find it still connecting (the pod gone: NotFound, no line).
  e2e_wait 15 "[ -s '$E2E_D/podlogs/$name.log' ] || ! kill -0 $follow 2>/dev/null"
  uid="$(e2e_pod_field "$1" '{.metadata.uid}')"
  for f in "$E2E_AGENTS"/n*/shim/job_*/pods/"$uid"/*/0.log; do
    [ -f "$f" ] || continue
    timeout 900 tail -n +1 -F "$f" >"$E2E_D/podlogs/$name.cri" 2>/dev/null &
    RL_FOLLOWERS+=("$!")
    break
  done
}

# The followed log of a pod (see rl_follow_log); sets E2E_LOG_SOURCE. Only
# what `kubectl logs -f` delivered counts: when it has fewer lines than the
# CRI file the shim wrote (the follow lost the container's last lines), the
# function prints what it got, fails, and E2E_LOG_SOURCE says how many lines
# were missing, so the check that reads the log fails and says why.
rl_followed_log() {
  local name="${1#*/}" d="$E2E_D/podlogs" nk nc
  nk=$(grep -c . "$d/$name.log" 2>/dev/null); nc=$(grep -c . "$d/$name.cri" 2>/dev/null)
  cat "$d/$name.log" 2>/dev/null
  if [ -s "$d/$name.log" ] && [ "${nk:-0}" -ge "${nc:-0}" ]; then
    E2E_LOG_SOURCE="kubectl logs -f"
    return 0
  fi
  E2E_LOG_SOURCE="kubectl logs -f, which delivered ${nk:-0} of the container's ${nc:-0} lines; missing: $(rl_cri_text "$d/$name.cri" | tail -n "$(( ${nc:-0} - ${nk:-0} ))" | head -c 200 | tr '\n' '|') $(head -c 200 "$d/$name.err" 2>/dev/null)"
  return 1
}

# The text of a CRI log file (partial records joined into their lines), as
# kubectl logs shows it.
rl_cri_text() {
  python3 - "$1" <<'PY'
import sys
out, line = [], ""
for rec in open(sys.argv[1], "rb").read().decode("utf-8", "replace").splitlines():
    parts = rec.split(" ", 3)
    if len(parts) < 3:
        continue
    line += parts[3] if len(parts) == 4 else ""
    if parts[2] == "F":
        out.append(line)
        line = ""
sys.stdout.write("".join(l + "\n" for l in out))
PY
}


# Stops the followers. A `kubectl logs -f` ends by itself a moment after its
# container's end (the node sends what the runtime still drains, then ends
# the stream): it is given up to 15 s for that, so that no line in flight is
# cut off by the kill (`rl_stop_log_followers now`: killed at once, for a
# cleanup while pods may run on); the file copies (tail -F) never end
# by themselves and are killed.
rl_stop_log_followers() {
  local p i alive
  if [ "${1:-}" != now ]; then
    for i in $(seq 150); do
      alive=""
      for p in "${RL_LOG_FOLLOWS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ -z "$alive" ] && break
      sleep 0.1
    done
  fi
  for p in "${RL_FOLLOWERS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  RL_FOLLOWERS=() RL_LOG_FOLLOWS=()
}

rl_apply_and_wait() {
  local j="$1"; shift
  local m files=() t0 p name
  [ $# -gt 0 ] || set -- "$E2E_TOP/examples/online-rl/rollout.yaml" "$E2E_TOP/examples/online-rl/reward.yaml"
  RL_MANIFESTS=()
  for m in "$@"; do RL_MANIFESTS+=("$(rl_fill_manifest "$j" "$m")"); files+=(-f "${RL_MANIFESTS[-1]}"); done
  t0=$(date +%s.%N)
  # The workloads first (the objects labelled app=...), the Services once
  # the pods are checked (rl_publish_services): the trainer waits for their
  # Endpoints, and its 30 steps take about a second.
  e2e_kubectl apply -l app "${files[@]}"
  ok $? "kubectl apply -l app of the manifests: the rollout Deployment and the reward pod"
  local ns=default sel=slurm-k8s/example=online-rl
  # The Deployment's replicas are all available (kubectl reads the
  # Deployment's status and its ReplicaSet's, as on any cluster), then every
  # pod of the example is Ready.
  e2e_kubectl rollout status -n "$ns" deployment/rollout --timeout=90s | tail -n1
  ok "${PIPESTATUS[0]}" "kubectl rollout status: the rollout Deployment's 3 replicas are available"
  e2e_kubectl wait -n "$ns" --for=condition=Ready --timeout=60s pod -l "$sel" >/dev/null
  ok $? "every pod of the example Running and Ready ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s after kubectl apply)"
  # Every pod of the example, whatever its phase: one that is not Running
  # must fail the check below, not drop out of it. Those being deleted (a
  # Deployment's old ReplicaSet) are not the example's any more.
  mapfile -t RL_PODS < <(e2e_kubectl get pods -n "$ns" -l "$sel" \
    -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null \
    | awk 'NF == 1 { print $1 }' | sort)
  for p in "${RL_PODS[@]}"; do
    E2E_POD_UID[$p]="$(e2e_pod_field "$p" '{.metadata.uid}')"
  done
  e2e_kubectl get pods -n "$ns" -o wide
  local nodes bad=""
  nodes=" $(e2e_node_names "$j" | tr '\n' ' ') "
  for p in "${RL_PODS[@]}"; do
    RL_POD_NODE[$p]="$(e2e_pod_field "$p" '{.spec.nodeName}')"
    RL_POD_IP[$p]="$(e2e_pod_field "$p" '{.status.podIP}')"
    [[ $nodes == *" ${RL_POD_NODE[$p]} "* ]] || bad="$bad $p@${RL_POD_NODE[$p]:-none}"
    [ "$(e2e_pod_field "$p" '{.status.phase}')" = Running ] || bad="$bad $p:$(e2e_pod_field "$p" '{.status.phase}')"
    rl_follow_log "$p"
  done
  # 3 rollout replicas and the reward pod.
  [ "${#RL_PODS[@]}" = 4 ] || bad="$bad (${#RL_PODS[@]} pods, want 4)"
  [ -z "$bad" ]; ok $? "every pod (${#RL_PODS[@]}) Running on a virtual node of job $j${bad:+:$bad}"
  # The hostPort keeps the rollouts apart (the scheduler's NodePorts filter).
  local rnodes
  rnodes="$(for p in "${RL_PODS[@]}"; do [[ $p == */rollout-* ]] && echo "${RL_POD_NODE[$p]}"; done | sort)"
  [ "$(wc -l <<<"$rnodes")" = 3 ] && [ -z "$(uniq -d <<<"$rnodes")" ]
  ok $? "the 3 rollout replicas run on 3 different nodes: $(echo $rnodes)"
  [ -z "$bad" ]
}

# The Services now (kubectl apply of the whole manifests): the trainer finds
# each ready pod in their Endpoints at its pod IP (its node's InternalIP, a
# loopback address per node in the harness) and starts.
rl_publish_services() {
  local m files=()
  for m in "${RL_MANIFESTS[@]}"; do files+=(-f "$m"); done
  e2e_kubectl apply "${files[@]}" | grep service/
  ok "${PIPESTATUS[0]}" "kubectl apply of the manifests: the rollout and reward Services"
}

# What the trainer found (its rank 0's "rollout endpoints ..." line, after
# the job): the 3 replicas and the reward pod, each at its pod IP.
rl_check_found_endpoints() {
  local j="$1" out want got p
  out="$(sk_job_output "$j")"
  want="$(for p in "${RL_PODS[@]}"; do
    [[ $p == */rollout-* ]] && echo "${RL_POD_IP[$p]}:18080"
  done | sort | paste -sd' ')"
  got="$(sed -n 's/^\[trainer rank 0 [^]]*\] rollout endpoints \(.*\), reward \([^ ]*\) (from .*/\1/p' "$out" | head -n1 | tr -d ',' | tr ' ' '\n' | sort | paste -sd' ')"
  [ -n "$want" ] && [ "$got" = "$want" ] && [ "$(tr ' ' '\n' <<<"$got" | cut -d: -f1 | sort -u | wc -l)" = 3 ]
  ok $? "the trainer found the 3 replicas in the rollout Service's Endpoints, each at its own pod IP ($got; want $want)"
  got="$(sed -n 's/^\[trainer rank 0 [^]]*\] rollout endpoints .*, reward \([^ ]*\) (from .*/\1/p' "$out" | head -n1)"
  [ "$got" = "${RL_POD_IP[default/reward]}:18090" ]
  ok $? "the trainer found the reward pod in the reward Service's Endpoints ($got)"
}

rl_pods_left() {  # the pods of RL_PODS still in the API
  local p
  for p in "${RL_PODS[@]}"; do e2e_kubectl get pod -n "${p%%/*}" "${p#*/}" -o name 2>/dev/null; done
}

# The trainer's ServiceAccount, Role and binding on a real cluster.
rl_delete_trainer_access() {
  [ "$RL_TRAINER_ACCESS" = 1 ] || return 0
  e2e_kubectl delete --ignore-not-found -n default serviceaccount/rl-trainer \
    role.rbac.authorization.k8s.io/rl-trainer-endpoints \
    rolebinding.rbac.authorization.k8s.io/rl-trainer-endpoints >/dev/null && RL_TRAINER_ACCESS=0
}

rl_delete_workloads() {
  local m files=()
  for m in "${RL_MANIFESTS[@]}"; do files+=(-f "$m"); done
  [ ${#files[@]} -gt 0 ] || return 0
  e2e_kubectl delete --ignore-not-found --wait=false "${files[@]}" >/dev/null
  e2e_wait 30 "[ -z \"\$(e2e_kubectl get pods -n default -l slurm-k8s/example=online-rl -o name 2>/dev/null)\" ]"
  ok $? "kubectl delete of the manifests: the Deployment, the Services and every pod of the example are gone"
  RL_MANIFESTS=()
  rl_delete_trainer_access
}

rl_check_pod_gpus() {
  local j="$1" p cvd slurm_node lent bad="" seen="" log
  sleep 0.5   # the first log lines reach the followers
  for p in "${RL_PODS[@]}"; do
    rl_followed_log "$p" >"$E2E_D/podlogs/tmp"; log="$(cat "$E2E_D/podlogs/tmp")"
    cvd="$(sed -n 's/.*CUDA_VISIBLE_DEVICES=\([0-9,]*\).*/\1/p' <<<"$log" | head -n1)"
    cvd="${cvd%,}"
    # An image container (RL_IMAGES=1): CUDA numbers its GPUs from 0,
    # NVIDIA_VISIBLE_DEVICES has the node's indices, and it sees their
    # device nodes only.
    local nvd devs want_cvd="" want_devs="" i=0 g
    nvd="$(sed -n 's/.*NVIDIA_VISIBLE_DEVICES=\([0-9,]*\) .*/\1/p' <<<"$log" | head -n1)"
    slurm_node="$(e2e_kubectl get node "${RL_POD_NODE[$p]}" -o 'jsonpath={.metadata.labels.slurm-k8s/slurm-node}' 2>/dev/null)"
    lent="${RL_LENT[$slurm_node]:-}"
    if [ "${RL_IMAGES:-0}" = 1 ]; then
      devs="$(sed -n 's/.*devices=\[\([a-z0-9,]*\)\].*/\1/p' <<<"$log" | head -n1)"
      for g in ${nvd//,/ }; do
        want_cvd+="${want_cvd:+,}$i"; want_devs+="${want_devs:+,}nvidia$g"; i=$((i + 1))
      done
      echo "  $p: in its container CUDA_VISIBLE_DEVICES=$cvd, devices [$devs]; node GPUs $nvd"
      [ "$cvd" = "$want_cvd" ] || bad="$bad $p:cvd=$cvd-want-$want_cvd"
      [ "$devs" = "$want_devs" ] || bad="$bad $p:devices=[$devs]-want-[$want_devs]"
    else
      # A process container runs in the extern step, whose devices cgroup
      # opens the lent GPUs only (spank/device_cgroup.h): CUDA numbers them
      # from 0, so its CUDA_VISIBLE_DEVICES is each GPU's place among the
      # node's lent GPUs, NVIDIA_VISIBLE_DEVICES the node's indices; the
      # node's other GPUs' device nodes (the harness's fake ones,
      # runtime.conf gpu_device) are not in its view.
      local place
      for g in ${nvd//,/ }; do
        want_devs+="${want_devs:+,}nvidia$g"
        place="$(tr ',' '\n' <<<"$lent" | sort -n | grep -nx "$g" | cut -d: -f1)"
        want_cvd+="${want_cvd:+,}$((${place:-0} - 1))"
      done
      devs="$(e2e_kubectl exec -n "${p%%/*}" "${p#*/}" -- sh -c 'ls "$0"' "$SK_SLURM_DIR/dev" 2>&1 | grep '^nvidia' | paste -sd,)"
      echo "  $p: CUDA_VISIBLE_DEVICES=$cvd (want $want_cvd), node GPUs $nvd; in $SK_SLURM_DIR/dev it sees [$devs]"
      [ "$cvd" = "$want_cvd" ] || bad="$bad $p:cvd=$cvd-want-$want_cvd"
      [ "$devs" = "$want_devs" ] || bad="$bad $p:devices=[$devs]-want-[$want_devs]"
    fi
    cvd="$nvd"
    echo "  $p on ${RL_POD_NODE[$p]} ($slurm_node, lent [$lent]): node GPUs $cvd"
    if [ -z "$cvd" ] || [ -z "$lent" ]; then bad="$bad $p:cvd='$cvd'"; continue; fi
    for g in ${cvd//,/ }; do
      [[ ",$lent," == *",$g,"* ]] || bad="$bad $p:gpu$g-not-lent"
      [[ " $seen " == *" $slurm_node:$g "* ]] && bad="$bad $p:gpu$g-shared"
      seen="$seen $slurm_node:$g"
    done
  done
  [ -z "$bad" ]; ok $? "each pod's GPUs (NVIDIA_VISIBLE_DEVICES, from $E2E_LOG_SOURCE) are GPUs lent on its node, none shared, numbered in CUDA_VISIBLE_DEVICES as CUDA numbers the devices it can open, and it sees only their device nodes$bad"
  # The rollout's /healthz says the same GPUs (the process's real environment).
  local ep hz hbad=""
  for p in "${RL_PODS[@]}"; do
    [[ $p == */rollout-* ]] || continue
    ep="$(e2e_pod_field "$p" '{.status.hostIP}'):$(e2e_pod_field "$p" '{.spec.containers[0].ports[0].containerPort}')"
    hz="$(curl -s --max-time 5 "http://$ep/healthz")"
    grep -Eq '"status": *"ok"' <<<"$hz" || hbad="$hbad $p:$hz"
  done
  [ -z "$hbad" ]; ok $? "every rollout answers /healthz at hostIP:containerPort$hbad"
}

# Pods from images (RL_IMAGES=1): each pod's image was pulled or found on
# its node (a Pulled event naming it) and its container reports that image.
rl_check_pulled() {
  local p img ev bad="" n=0
  for p in "${RL_PODS[@]}"; do
    img="$(e2e_pod_field "$p" '{.spec.containers[0].image}')"
    ev="$(e2e_kubectl get events -n "${p%%/*}" --field-selector "involvedObject.name=${p#*/}" \
      -o 'jsonpath={range .items[?(@.reason=="Pulled")]}{.message}{"\n"}{end}' 2>/dev/null | head -n1)"
    echo "  $p: $ev"
    [[ $ev == "Successfully pulled image \"$img\" in"* || $ev == "Container image \"$img\" already present"* ]] \
      || bad="$bad $p:no-Pulled-event"
    [ "$(e2e_pod_field "$p" '{.status.containerStatuses[0].imageID}')" = "$img" ] || bad="$bad $p:imageID"
    n=$((n + 1))
  done
  [ -z "$bad" ]; ok $? "each of the $n pods ran from its image: a Pulled event, the container's imageID$bad"
}

rl_wait_job_and_check_trainer() {
  local j="$1" ranks="$2" out st
  sk_wait_state "$j" COMPLETED 180
  ok $? "job $j COMPLETED (trainer exit 0 on every rank)"
  st="$(sk_job_state "$j")"
  out="$(sk_job_output "$j")"
  echo "--- job output ($out)"; cat "$out" 2>/dev/null | sed 's/^/  /'
  local done_n
  done_n="$(grep -cE 'done: ([0-9]+)/\1 steps used real responses' "$out" 2>/dev/null)"
  [ "${done_n:-0}" = "$ranks" ]; ok $? "all $ranks trainer ranks: \"done: N/N steps used real responses\" (got ${done_n:-0}, job $st)"
  local bad="" line node cvd g
  while read -r line; do
    node="$(sed -n "s/.*on \(${SK_NODE_PREFIX}[0-9]*\)\].*/\1/p" <<<"$line")"
    cvd="$(sed -n 's/.*CUDA_VISIBLE_DEVICES=\([0-9,]*\) .*/\1/p' <<<"$line")"
    [ -n "$cvd" ] || { bad="$bad $node:empty"; continue; }
    for g in ${cvd//,/ }; do
      [[ ",${RL_LENT[$node]:-}," == *",$g,"* ]] && bad="$bad $node:gpu$g"
    done
  done < <(grep 'CUDA_VISIBLE_DEVICES=' "$out" 2>/dev/null | grep trainer)
  local seen_n
  seen_n="$(grep 'CUDA_VISIBLE_DEVICES=' "$out" 2>/dev/null | grep -c trainer)"
  [ -z "$bad" ] && [ "$seen_n" = "$ranks" ]; ok $? "trainer CUDA_VISIBLE_DEVICES on every rank holds no lent GPU ($seen_n ranks)$bad"
  RL_JOB_END="$(sed -n 's/^batch: trainer exited with [0-9]* at //p' "$out" | head -n1)"
}

# The trainer's summary (examples/online-rl/trainer.py, written by rank 0):
# the policy learned (the mean reward of the last 5 steps exceeds the first 5
# by the trainer's MARGIN, a gain that chance does not give: see the
# example's README), every sample asked for was used (none lost, duplicated
# or late), the weight version went up once per step and every rollout holds
# the last one, and the reward curve was drawn.
rl_check_learning() {
  local j="$1" f="$SK_JOBS_DIR/online-rl-$1.json" res
  res="$(python3 - "$f" "${2:-}" <<'PY'
import json, sys
faults = sys.argv[2] == "faults"
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"bad no summary: {e}"); print("bad -"); print("bad -"); print("bad -"); sys.exit()
c, s = d["reward_curve"], d["samples"]
print(("ok" if d["learned"] and d["gain"] >= d["margin"] and len(c) == d["steps"] else "bad")
      + f" mean reward {d['first_mean']} over the first 5 steps -> {d['last_mean']} over the last 5"
        f" (gain {d['gain']:+}, margin {d['margin']}; uniform policy {d['uniform_policy_reward']})")
# Without faults every sample is used; with them a restarted rollout's
# samples made with its initial weights may be late (dropped, counted), but
# none is lost or counted twice.
accounted = s["used"] + s["late"] == s["asked"] and s["lost"] == s["duplicates"] == 0
print(("ok" if accounted and (faults or s["late"] == 0) else "bad")
      + f" samples {s}, rollout boots seen {d['rollout_boots']}, weight pushes missed {d['weight_push_misses']}")
rv = d["rollout_versions"]
print(("ok" if d["final_version"] == d["steps"] and rv and all(v == d["final_version"] for v in rv.values())
       else "bad") + f" final weights v{d['final_version']} after {d['steps']} steps; rollouts hold {rv};"
      f" weight sync median {d['weight_sync_ms_median']} ms")
try:
    png = open(sys.argv[1][:-5] + ".png", "rb").read(8)
except OSError:
    png = b""
print(("ok" if png == b"\x89PNG\r\n\x1a\n" else "bad") + " " + sys.argv[1][:-5] + ".png")
PY
)"
  local l1 l2 l3 l4
  { read -r l1; read -r l2; read -r l3; read -r l4; } <<<"$res"
  [[ $l1 == ok* ]]; ok $? "the policy learned: ${l1#* }"
  if [ "${2:-}" = faults ]; then
    [[ $l2 == ok* ]]; ok $? "every sample asked for was used or counted late, none lost or duplicated: ${l2#* }"
  else
    [[ $l2 == ok* ]]; ok $? "every sample asked for was used, none lost, duplicated or late: ${l2#* }"
  fi
  [[ $l3 == ok* ]]; ok $? "weight versions: ${l3#* }"
  [[ $l4 == ok* ]]; ok $? "the reward curve was drawn: ${l4#* }"
}

rl_check_teardown() {
  local j="$1" t0 p log st grace_ok=""
  t0=$SECONDS
  e2e_wait 60 "[ -z \"\$(e2e_node_names $j)\" ]"
  ok $? "the job's Nodes are deleted after the job ends ($((SECONDS - t0)) s after COMPLETED)"
  if [ -z "$E2E_KUBECONFIG" ]; then
    ok "[ -z \"\$(e2e_kubectl get leases -n kube-node-lease -o name | grep -- '-$j\$')\" ]" "the job's Leases are deleted"
    echo "$ kubectl get nodes"; e2e_kubectl get nodes 2>&1 | sed 's/^/  /'
    ok "[ -z \"\$(e2e_kubectl get nodes -o name)\" ]" "kubectl get nodes is empty"
  else
    ok "[ -z \"\$(e2e_kubectl get leases -n kube-node-lease -o name | grep -- '-$j\$')\" ]" "the job's Leases are deleted"
  fi
  # The job's pods are deleted from the API by the agent; the Deployment
  # would make new ones (Pending: no node lends to it any more) until the
  # user deletes it, as after any job.
  local left
  e2e_wait 15 "[ -z \"\$(rl_pods_left)\" ]"
  left="$(rl_pods_left)"
  [ -z "$left" ]; ok $? "the job's pods are deleted from the API${left:+: $(echo $left)}"
  rl_delete_workloads
  rl_stop_log_followers
  local bad="" sbad=""
  for p in "${RL_PODS[@]}"; do
    rl_followed_log "$p" >"$E2E_D/podlogs/tmp"
    grep -q "received signal 15" "$E2E_D/podlogs/tmp" || bad="$bad $p"
    st="$(python3 "$E2E_TOP/tests/e2e/watch.py" final "$E2E_D/watch.jsonl" "$p")"
    local summary
    summary="$(ST="$st" python3 - "$j" "${RL_END_REASON:-JobCompleted}" <<'PY'
import json, os, sys
job, want = sys.argv[1], sys.argv[2]
s = json.loads(os.environ["ST"] or "{}")
words = [s.get("reason", ""), s.get("message", "")]
ends = []
for c in s.get("containerStatuses", []) or []:
    t = (c.get("state") or {}).get("terminated")
    if t:
        words += [t.get("reason", ""), t.get("message", "")]
        ends.append(t.get("exitCode"))
text = " ".join(w for w in words if w)
names_end = s.get("reason") == want and ("job " + job) in text
clean = bool(ends) and all(e == 0 for e in ends)
print(("ok" if names_end and clean else "bad") + f" phase={s.get('phase')} exit={ends} {text[:160]}")
PY
)"
    echo "  $p final status: ${summary#* }"
    [[ $summary == ok* ]] || { sbad="$sbad $p"; rl_show_stop "$p"; }
  done
  [ -z "$bad" ]; ok $? "every pod logged \"received signal 15\" (SIGTERM at job end; from $E2E_LOG_SOURCE)$bad"
  [ -z "$sbad" ]; ok $? "every pod's final status says ${RL_END_REASON:-JobCompleted} (the job's end) and its containers exited 0 within the grace$sbad"
  check_job_end_event "$j" "online-RL job" "${RL_END_REASON:-JobCompleted}"
}
