# shellcheck shell=bash
# tests/e2e/cases.sh -- the fault and bad-input cases. Each case_* function
# runs against the stack tests/e2e/run-all.sh brought up (real Slurm, one
# real agent per node, real shims and pod processes, the API test double),
# asserts with `ok`, and ends its jobs itself; every case ends with
# e2e_assert_clean (no Node, Lease, process, run file, agent state or cgroup
# of its jobs). Cases run in a subshell each, in this order.

# api_down first: the time-limit job (60 s, submitted after it) must not end
# while the API server is down.
# time_limit checked about 2 min after that: past the job's end, and well
# before slurmctld forgets the ended job (MinJobAge, 300 s in the harness;
# checked last it was gone once the cases before it grew past 5 min).
# online_rl last: it takes all 3 nodes.
E2E_CASES=(api_down bad_flags socket_auth privileged too_many_gpus namespace two_jobs impersonation two_clusters pod_devices kubectl_io
           runtime_template image_pods image_store pod_network cdi_gpus volumes vllm chart_features scancel step_signals time_limit_update drain_before time_limit suspend requeue salloc gpu_forms node_share preempt
           preempt_requeue preempt_suspend array_het node_fail slurmd_restart agent_kill shim_kill online_rl online_rl_images online_rl_faults)

# pod_devices' pods and probe, on cgroup v1 and v2.
# Each pod its own network (agent.conf pod_network = cni, e2e_agent_conf):
# four replicas of one Deployment on one virtual node, all on port 8000,
# each at an address of its own; the node's host and the job's own step
# reach each by its IP; localhost and the hostname are the pod's; another
# user's pod on the same node listens on the same port without taking or
# reaching theirs; nothing of the networks is left after scancel.
case_pod_network() {
  [ "$SK_NETNS" = 1 ] && [ "${E2E_POD_NETWORK:-cni}" = cni ] \
    || { echo "SKIP: pod_network: needs SK_NETNS=1 and E2E_POD_NETWORK=cni"; return; }
  e2e_job 1 -N1 -w $N1 -n1 -c 1 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "pod_network: job"; return; }
  local j="$E2E_JOB" node srv ips names ip n got want addr j2 veths
  node="$(e2e_node_names "$j")"; addr="$(sk_node_addr 1)"
  srv="$(e2e_script pod-network-server 'import http.server, sys
name = sys.argv[2].encode() + b"\n"
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(name)))
        self.end_headers()
        self.wfile.write(name)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H).serve_forever()')"
  pn_yaml() {  # pn_yaml NAME REPLICAS JOB
    cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: default}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      nodeSelector: {slurm-k8s/job-id: "$3"}
      tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$3", effect: NoSchedule}]
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        image: e2e/web:1
        command: [python3, "$srv", "8000", "\$(POD_NAME)", "e2e-pod-$3-$1"]
        env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
        ports: [{containerPort: 8000}]
        readinessProbe: {httpGet: {path: /, port: 8000}, periodSeconds: 1}
EOF
  }
  pn_ready() { e2e_kubectl get deploy "$1" -o 'jsonpath={.status.readyReplicas}' 2>/dev/null; }
  pn_yaml pn 4 "$j" | e2e_kubectl apply -f - >/dev/null
  e2e_wait 90 "[ \"\$(pn_ready pn)\" = 4 ]"
  ips="$(e2e_kubectl get pods -l app=pn -o 'jsonpath={range .items[*]}{.status.podIP}{"\n"}{end}' | sort)"
  names="$(e2e_kubectl get pods -l app=pn -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}' | sort)"
  [ "$(pn_ready pn)" = 4 ] && [ "$(sort -u <<<"$ips" | grep -c '^10\.244\.1\.')" = 4 ] \
    && [ "$(e2e_kubectl get pods -l app=pn -o 'jsonpath={.items[*].spec.nodeName}' | tr ' ' '\n' | sort -u)" = "$node" ]
  ok $? "pod_network: four replicas on $node, all on port 8000 and Ready, each its own IP in 10.244.1.0/24 ($(echo $ips))"
  got=""
  for ip in $ips; do got+="$(e2e_on_host "$addr" curl -s --max-time 5 "http://$ip:8000/")"$'\n'; done
  [ "$(sort <<<"$got" | sed '/^$/d')" = "$names" ]
  ok $? "pod_network: from the node's host each pod IP answers with its own pod's name ($(echo $got))"
  ip="$(head -n1 <<<"$ips")"
  want="$(e2e_kubectl get pods -l app=pn -o "jsonpath={.items[?(@.status.podIP==\"$ip\")].metadata.name}")"
  got="$(sk_as_user srun --jobid="$j" --overlap -n1 curl -s --max-time 5 "http://$ip:8000/" 2>&1 | tail -n1)"
  [ "$got" = "$want" ]; ok $? "pod_network: the job's own step reaches $want at $ip:8000 ('$got')"
  got="$(timeout 30 kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" exec "$want" -- sh -c \
        'hostname; curl -s --max-time 5 http://127.0.0.1:8000/; cat /proc/net/dev | grep -c eth0' 2>&1)"
  [ "$(echo $got)" = "$want $want 1" ]
  ok $? "pod_network: in $want, hostname and 127.0.0.1:8000 are its own, eth0 its interface ('$(echo $got)')"
  # Another host: routes to node 1's pod range from its Node's podCIDR and
  # InternalIP (agent/network/pod_routes.h); a pod there and the host itself
  # reach the pods by their IPs.
  local j3
  j3="$(sk_submit_as_user -o "$SK_JOBS_DIR/e2e-%j.out" -N1 -w $N2 -n1 -c 1 --gres=gpu:1 --k8s-gpus=1 \
         "$(e2e_script sleeper3 'sleep 600')")" \
    && sk_wait_state "$j3" RUNNING 30 && e2e_wait 20 "[ \"\$(e2e_ready_nodes $j3)\" = 1 ]"
  ok $? "pod_network: a second job on $N2 (job $j3)"
  [ "$(e2e_kubectl get node "$node" -o 'jsonpath={.spec.podCIDR}')" = 10.244.1.0/24 ]
  ok $? "pod_network: $node's spec.podCIDR is its host's range ($(e2e_kubectl get node "$node" -o 'jsonpath={.spec.podCIDR}'))"
  RESTART=Never e2e_pod "$j3" client; e2e_pod_running client 30
  got=""
  for ip in $ips; do
    got+="$(timeout 30 kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" exec client -- curl -s --max-time 5 "http://$ip:8000/" 2>&1)"$'\n'
  done
  [ "$(sort <<<"$got" | sed '/^$/d')" = "$names" ]
  ok $? "pod_network: a pod on $N2 reaches each pod on $N1 by its IP ($(echo $got))"
  got="$(e2e_on_host "$(sk_node_addr 2)" curl -s --max-time 5 "http://$ip:8000/")"
  want="$(e2e_kubectl get pods -l app=pn -o "jsonpath={.items[?(@.status.podIP==\"$ip\")].metadata.name}")"
  [ "$got" = "$want" ]; ok $? "pod_network: $N2's host reaches $want at $ip ('$got'; route: $(e2e_on_host "$(sk_node_addr 2)" ip route show 10.244.1.0/24))"
  e2e_kubectl delete pod client --wait=false >/dev/null 2>&1
  e2e_end_job "$j3"
  e2e_assert_clean "$j3" "pod_network"

  # Another user's job on the same node, its pod on the same port.
  j2="$(TEST_USER="$TEST_USER2" sk_submit_as_user -o "$SK_JOBS_DIR/e2e-%j.out" -N1 -w $N1 -n1 -c 1 \
         --gres=gpu:1 --k8s-gpus=1 "$(e2e_script sleeper2 'sleep 600')")" \
    && sk_wait_state "$j2" RUNNING 30 && e2e_wait 20 "[ \"\$(e2e_ready_nodes $j2)\" = 1 ]"
  ok $? "pod_network: a job of $TEST_USER2 on $N1 beside it (job $j2)"
  pn_yaml intruder 1 "$j2" | e2e_kubectl apply -f - >/dev/null
  e2e_wait 60 "[ \"\$(pn_ready intruder)\" = 1 ]"
  n="$(e2e_kubectl get pods -l app=intruder -o 'jsonpath={.items[0].metadata.name}')"
  got="$(timeout 30 kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" exec "$n" -- sh -c \
        'id -u; curl -s --max-time 5 http://127.0.0.1:8000/' 2>&1)"
  [ "$(pn_ready intruder)" = 1 ] && [ "$(echo $got)" = "$TEST_UID2 $n" ]
  ok $? "pod_network: $TEST_USER2's pod listens on 8000 too, and its localhost:8000 is its own ('$(echo $got)')"
  got=""
  for ip in $ips; do got+="$(e2e_on_host "$addr" curl -s --max-time 5 "http://$ip:8000/")"$'\n'; done
  [ "$(sort <<<"$got" | sed '/^$/d')" = "$names" ] && [ "$(pn_ready pn)" = 4 ]
  ok $? "pod_network: the first user's pods still answer at their own IPs, all Ready ($(echo $got))"

  e2e_kubectl delete deploy pn intruder --wait=false >/dev/null 2>&1
  e2e_end_job "$j2"
  e2e_end_job "$j"
  e2e_assert_clean "$j2" "pod_network"
  e2e_assert_clean "$j" "pod_network"
  veths="$(e2e_on_host "$addr" ip -o link show master sk-pods0 2>/dev/null | awk -F': ' '{print $2}' | paste -sd' ')"
  [ -z "$veths" ] && [ -z "$(ls "$E2E_AGENTS/$N1/net/pods")" ] \
    && ! grep -q "$E2E_AGENTS/$N1/net/pods/" /proc/self/mountinfo
  ok $? "pod_network: no veth on $N1's host, no namespace held, no lease left${veths:+ (veths: $veths)}"
  e2e_wait 10 "[ -z \"\$(e2e_on_host $(sk_node_addr 2) ip route show proto 241)\" ]"
  ok $? "pod_network: with the jobs gone, $N2's host has no route to $N1's pods left ($(e2e_on_host "$(sk_node_addr 2)" ip route show proto 241))"

  # A network that cannot be made (agent 3's range holds one pod: a /30 is
  # its gateway and one address): the second pod waits Pending with the
  # kubelet's FailedCreatePodSandBox Event, retried, and starts once the
  # first is gone; nothing half-made is left.
  # Its bridge made first with the usual range (10.244.3.1/24): the agent
  # restarted with another range makes it again (the plugin refuses a bridge
  # whose address differs).
  e2e_job 1 -N1 -w $N3 -n1 -c 1 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "pod_network: job on $N3"; return; }
  j="$E2E_JOB"
  GPUS=0 RESTART=Never e2e_pod "$j" zero; e2e_pod_running zero 30
  local zuid; zuid="$(e2e_pod_field default/zero '{.metadata.uid}')"
  e2e_kubectl delete pod zero >/dev/null 2>&1
  e2e_wait 20 "[ -z \"\$(ls '$E2E_AGENTS/$N3/net/pods')\" ]"
  # Let go by the pod's own end, not by the collection that backs it up.
  [ -n "$zuid" ] && [ -z "$(ls "$E2E_AGENTS/$N3/net/pods")" ] \
    && ! grep -q "pod network: $zuid belongs to no pod" "$E2E_AGENTS/$N3/agent.log"
  ok $? "pod_network: a deleted pod's network is let go at its end, not by the collection"
  e2e_agent_stop 3
  E2E_POD_CIDR=10.244.3.0/30 e2e_agent_conf 3
  e2e_agent_start 3; ok $? "pod_network: agent $N3 restarted with the range 10.244.3.0/30"
  # No GPU asked: the network, not the job's one GPU, is what two waits for.
  GPUS=0 RESTART=Never e2e_pod "$j" one; e2e_pod_running one 30
  ok $? "pod_network: pod one Running at $(e2e_pod_field default/one '{.status.podIP}')"
  GPUS=0 RESTART=Never e2e_pod "$j" two
  sandbox_event() {
    e2e_kubectl get events -n default --field-selector involvedObject.name=two \
      -o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}' 2>/dev/null | grep '^FailedCreatePodSandBox'
  }
  e2e_wait 30 "sandbox_event | grep -q 'no IP addresses available'"
  got="$(sandbox_event | head -n1)"
  [ -n "$got" ] && [ "$(e2e_pod_phase two)" = Pending ] && [ "$(ls "$E2E_AGENTS/$N3/net/pods" | wc -l)" = 1 ]
  ok $? "pod_network: with the range full, two waits Pending, one network held ('$got')"
  e2e_kubectl delete pod one --wait=false >/dev/null
  e2e_pod_running two 60 \
    && [ "$(e2e_on_host "$(sk_node_addr 3)" ip -4 -o addr show dev sk-pods0 | awk '{print $4}')" = 10.244.3.1/30 ]
  ok $? "pod_network: once one is gone, two starts at $(e2e_pod_field default/two '{.status.podIP}') (the bridge made again: $(e2e_on_host "$(sk_node_addr 3)" ip -4 -o addr show dev sk-pods0 | awk '{print $4}'))"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "pod_network"
  e2e_agent_stop 3
  e2e_agent_conf 3
  e2e_agent_start 3; ok $? "pod_network: agent $N3 restarted with its usual range"
}

# A pod allocating 256 MiB over its 64Mi memory limit, on JOB's node.
e2e_apply_hog() {  # e2e_apply_hog JOB
  local j="$1"
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hog, namespace: default}
spec:
  nodeSelector: {slurm-k8s/job-id: "$j"}
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  restartPolicy: Never
  containers:
  - name: main
    image: e2e/hog:1
    command: [python3, -c, "import sys, time; print('hog', flush=True); b = b'x' * (256 << 20); print('survived', flush=True); time.sleep(60)", "e2e-pod-$j-hog"]
    resources: {limits: {memory: 64Mi}}
EOF
}
# A pod whose two containers (100m CPU each) burn CPU and fork without bound.
e2e_apply_burn() {  # e2e_apply_burn JOB
  local j="$1"
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: burn, namespace: default}
spec:
  nodeSelector: {slurm-k8s/job-id: "$j"}
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  containers:
  - name: main
    image: e2e/burn:1
    command: [python3, -c, "print('burning', flush=True)\nwhile True: pass", "e2e-pod-$j-burn"]
    resources: {limits: {cpu: 100m}}
  - name: forker
    image: e2e/forker:1
    command: [python3, -c, "import subprocess, time\nn = 0\nfor i in range(400):\n    try: subprocess.Popen(['sleep', '300']); n += 1\n    except OSError as e: print('fork refused after', n, e, flush=True); break\nprint('started', n, flush=True)\ntime.sleep(300)", "e2e-pod-$j-forker"]
    resources: {limits: {cpu: 100m}}
EOF
}
# A pod whose container "big" allocates 64 MiB over its own 32Mi limit, well
# within the pod's (32Mi + 256Mi for "calm"): OOMKilled in its container's
# cgroup alone, "calm" runs on (common/cgroup/pod_cgroup.h: a cgroup per container).
e2e_check_container_oom() {  # e2e_check_container_oom CASE JOB
  local what="$1" j="$2" got
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: two, namespace: default}
spec:
  nodeSelector: {slurm-k8s/job-id: "$j"}
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  restartPolicy: Never
  containers:
  - name: big
    image: e2e/hog:1
    command: [python3, -c, "import time; print('big', flush=True); b = b'x' * (64 << 20); print('survived', flush=True); time.sleep(60)", "e2e-pod-$j-two-big"]
    resources: {limits: {memory: 32Mi}}
  - name: calm
    image: e2e/calm:1
    command: [python3, -c, "import time; print('calm', flush=True); time.sleep(300)", "e2e-pod-$j-two-calm"]
    resources: {limits: {memory: 256Mi}}
EOF
  e2e_wait 120 "[ \"\$(e2e_pod_field default/two '{.status.containerStatuses[?(@.name==\"big\")].state.terminated.reason}')\" = OOMKilled ]"
  got="$(e2e_pod_field default/two '{.status.containerStatuses[?(@.name=="big")].state.terminated.reason}/{.status.containerStatuses[?(@.name=="big")].state.terminated.exitCode} calm:{.status.containerStatuses[?(@.name=="calm")].state.running.startedAt}')"
  [[ $got == OOMKilled/137\ calm:?* ]] && ! e2e_kubectl logs -n default two -c big 2>/dev/null | grep -q survived
  ok $? "$what: a container over its own 32Mi limit (within the pod's 288Mi) is OOMKilled alone, its pod's other container runs on ($got)"
  e2e_kubectl delete pod two --wait=false >/dev/null 2>&1
}
# Python printing "0:R 1:R 2:R 3:R", R the result of opening each fake GPU
# (OK, ENXIO where the device is allowed, EPERM where it is denied).
e2e_gpu_opener() {
  cat <<EOF
import errno, os
out = []
for i in range(4):
    try: os.close(os.open('$SK_SLURM_DIR/dev/nvidia%d' % i, os.O_RDWR)); r = 'OK'
    except OSError as e: r = errno.errorcode.get(e.errno, str(e.errno))
    out.append('%d:%s' % (i, r))
print(' '.join(out))
EOF
}

# Where case_pod_devices finds a cgroup's files, on this host's hierarchy
# (E2E_PD_V2=1: one unified hierarchy, Slurm's cgroup/v2, as in the QEMU
# guest of tests/vm; otherwise v1). pd_dir CONTROLLER [UID]: the pod's
# directory for that controller, or without UID the job's level that holds
# what the job lends (v1: Slurm's extern step for devices and memory, the
# agent's own tree slurm_k8s_<node>/job_<id> for cpu, cpuacct and pids; v2:
# the extern step for all).
pd_dir() {
  local ctl="$1" uid="${2:-}" base
  if [ "$E2E_PD_V2" = 1 ]; then
    base="$E2E_PD_STEP"
  else
    case "$ctl" in
      devices|memory) base="$(echo /sys/fs/cgroup/"$ctl"/slurm_$N1/uid_*/job_"$E2E_PD_JOB"/step_extern)" ;;
      *) base="/sys/fs/cgroup/$ctl/$E2E_PD_TREE/job_$E2E_PD_JOB" ;;
    esac
  fi
  echo "$base${uid:+/k8s_pod_$uid}"
}
pd_mem_max() {  # the memory limit of a cgroup directory, bytes
  if [ "$E2E_PD_V2" = 1 ]; then cat "$1/memory.max"; else cat "$1/memory.limit_in_bytes"; fi
}
pd_cpu_max() {  # "quota period" of a cgroup directory
  if [ "$E2E_PD_V2" = 1 ]; then cat "$1/cpu.max"; else echo "$(cat "$1/cpu.cfs_quota_us") $(cat "$1/cpu.cfs_period_us")"; fi
}
pd_cpu_ns() {  # the CPU time a pod's cgroups counted, ns
  if [ "$E2E_PD_V2" = 1 ]; then
    echo $(( $(sed -n 's/^usage_usec //p' "$(pd_dir cpu "$1")/cpu.stat") * 1000 ))
  else
    cat "$(pd_dir cpuacct "$1")/cpuacct.usage"
  fi
}
pd_cgroup_of() {  # the directory of the devices cgroup a pid is in
  if [ "$E2E_PD_V2" = 1 ]; then
    echo "/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$1/cgroup")"
  else
    echo "/sys/fs/cgroup/devices$(sed -n 's/^[0-9]*:devices://p' "/proc/$1/cgroup")"
  fi
}

# Each pod in a cgroup of its own (agent.conf pod_cgroups,
# common/cgroup/pod_cgroup.h) below the extern step: its processes are there, and a
# process there may open the pod's own GPUs and no other, the trainer's and
# the other pods' included (a pod cannot even name those: their device nodes
# are not in its view; the cgroup is what denies them to a process that
# reaches one anyway, tried here from the pod's cgroup in the host's view). A
# fake GPU's open fails with ENXIO where the devices cgroup allows it, EPERM
# where it denies it. Memory, CPU and pids limits per pod and per container,
# the pods together held to what the job lends; the pod's directory goes with
# the pod, and all with the job. One case for both hierarchies: on this v1
# host, and on cgroup v2 (Slurm's cgroup/v2) in the QEMU guest of tests/vm
# (tests/vm/e2e-v2.sh), where the pod's directory is
# J/step_extern/k8s_pod_<uid> with its limits and a device program of its own,
# and the trainer's steps have the plugin's device program in place of
# Slurm's (spank/device_cgroup.h). The waits are long enough for the guest
# (TCG); they end at the event.
case_pod_devices() {
  local what=pod_devices
  E2E_PD_V2=0
  [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && E2E_PD_V2=1 && what="pod_devices (cgroup v2)"
  e2e_job 1 -N1 -w $N1 --gres=gpu:4 --k8s-gpus=3 --k8s-mem=512M || { ok 1 "$what: job"; return; }
  local j="$E2E_JOB" p want got bad="" dir uid step pid gpu J=""
  E2E_PD_JOB="$j"
  if [ "$E2E_PD_V2" = 1 ]; then
    J="/sys/fs/cgroup/system.slice/${N1}_slurmstepd.scope/job_$j"
    E2E_PD_STEP="$J/step_extern"
  fi
  e2e_pod "$j" g1; e2e_pod "$j" g2; GPUS=0 e2e_pod "$j" g0
  e2e_pod_running g1 60 && e2e_pod_running g2 60 && e2e_pod_running g0 60; ok $? "$what: 3 pods run (1, 1 and no GPU)"
  E2E_PD_TREE="slurm_k8s_$(e2e_kubectl get node "$(e2e_pod_field default/g1 '{.spec.nodeName}')" \
    -o jsonpath='{.metadata.labels.slurm-k8s/slurm-node}')"
  step="$(pd_dir devices)"
  local opener
  opener="$(e2e_gpu_opener)"
  for p in g1 g2 g0; do
    uid="$(e2e_pod_field "default/$p" '{.metadata.uid}')"
    pid="$(e2e_pod_pids "$j" "$p" | cut -d' ' -f1)"
    got="$(pd_cgroup_of "$pid" 2>/dev/null)"
    [ "$got" = "$(pd_dir devices "$uid")/ctr_main" ] || bad="$bad $p:in-$got"
    gpu="$(e2e_pod_log "default/$p" | sed -n 's/.*NVIDIA_VISIBLE_DEVICES=\([0-9]*\).*/\1/p' | head -n1)"
    want=""
    for i in 0 1 2 3; do
      if [ "$i" = "$gpu" ]; then want+="$i:ENXIO "; else want+="$i:EPERM "; fi
    done
    got="$(sh -c 'echo $$ > "$1/cgroup.procs" && exec runuser -u "$2" -- python3 -c "$3"' sh \
      "$step/k8s_pod_$uid/ctr_main" "$TEST_USER" "$opener" 2>&1)"
    echo "  $p (GPU ${gpu:-none}) in its cgroup: $got"
    [ "$got" = "${want% }" ] || bad="$bad $p:[$got]-want-[${want% }]"
  done
  [ -z "$bad" ]; ok $? "$what: each pod's main process is in its own cgroup, where only the pod's GPU opens: the trainer's GPU 0, the other pods' and the rest are denied at the device$bad"
  if [ "$E2E_PD_V2" = 1 ]; then
    # The trainer: an srun step of the job (all its GPUs for Slurm) is
    # denied the lent 1-3 by the plugin's program.
    got="$(sk_as_user srun --jobid="$j" --overlap -n1 python3 -c "$opener" 2>&1 | tail -n1)"
    [ "$got" = "0:ENXIO 1:EPERM 2:EPERM 3:EPERM" ]; ok $? "$what: a trainer step opens GPU 0 and is denied the lent 1-3 ($got)"
  fi
  # Only the shim's own children, named as supervisors, are moved: a job
  # user's process asking for a pod's cgroup (and its GPU) is refused.
  uid="$(e2e_pod_field default/g2 '{.metadata.uid}')"
  got="$(sk_as_user python3 -c 'import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall((json.dumps({"v": 1, "id": 1, "op": "cgroup_enter", "body": {"pod_uid": sys.argv[2], "gpus": [1, 2, 3], "container": "main"}}) + "\n").encode())
print(s.makefile().readline().strip())' "$E2E_AGENTS/$N1/agent.sock" "$uid" 2>&1)"
  [[ $got == *'"ok":false'* && $got == *"no child of an attached shim"* ]]; ok $? "$what: a job user's own process is refused a pod's cgroup ($got)"
  dir="$step/k8s_pod_$uid"
  [ -z "$(xargs -r -n1 sh -c 'grep -l "e2e-pod-'"$j"'-" /proc/$0/cmdline 2>/dev/null' < "$step/cgroup.procs")" ]
  ok $? "$what: no pod process is left in the extern step's own cgroup"
  local existed=0
  [ -d "$dir" ] && existed=1
  e2e_kubectl delete pod g2 --wait=false >/dev/null
  e2e_wait 60 "[ ! -d '$dir' ]" && [ "$existed" = 1 ]; ok $? "$what: g2's cgroup (there while it ran: $existed) is removed once it is gone"
  # Memory: a pod's cgroup has its limit (without one: what the job lends,
  # --k8s-mem); a pod over its limit is OOMKilled alone, the trainer and the
  # other pods run on.
  uid="$(e2e_pod_field default/g1 '{.metadata.uid}')"
  got="$(pd_mem_max "$(pd_dir memory "$uid")" 2>&1)"
  [ "$got" = $((512 << 20)) ]; ok $? "$what: a pod without a memory limit is held to the job's lent 512M ($got)"
  e2e_apply_hog "$j"
  e2e_wait 120 "[ \"\$(e2e_pod_phase hog)\" = Failed ]"
  got="$(e2e_pod_field default/hog '{.status.containerStatuses[0].state.terminated.reason}/{.status.containerStatuses[0].state.terminated.exitCode}')"
  uid="$(e2e_pod_field default/hog '{.metadata.uid}')"
  [ "$got" = OOMKilled/137 ]; ok $? "$what: a pod allocating 256 MiB over its 64Mi limit is OOMKilled ($got; its cgroup's limit $(pd_mem_max "$(pd_dir memory "$uid")" 2>/dev/null))"
  local hog_log
  [ "$(e2e_pod_phase g1)" = Running ] && [ "$(e2e_pod_phase g0)" = Running ] \
    && [ "$(squeue -h -j "$j" -o %T)" = RUNNING ] && hog_log="$(e2e_pod_log default/hog)" && ! grep -q survived <<<"$hog_log"
  ok $? "$what: the other pods and the trainer run on"
  e2e_check_container_oom "$what" "$j"
  # CPU and pids: a CPU burner held to its 100m limit by the CFS quota, a
  # pod forking without bound stopped at the agent's pod_pids_max (256 in
  # the e2e).
  e2e_apply_burn "$j"
  e2e_pod_running burn 60; ok $? "$what: a CPU burner and a forker run"
  uid="$(e2e_pod_field default/burn '{.metadata.uid}')"
  local cpu pids u0 u1
  cpu="$(pd_dir cpu "$uid")"
  pids="$(pd_dir pids "$uid")"
  pid="$(pgrep -f "e2e-pod-$j-burn\$" | head -n1)"
  got="$(pd_cpu_max "$cpu" 2>&1)"
  [ "$got" = "20000 100000" ] && [ "$(pd_cpu_max "$cpu/ctr_main")" = "10000 100000" ] \
    && { [ "$E2E_PD_V2" = 1 ] || grep -q "^[0-9]*:cpu[,a-z]*:${cpu#/sys/fs/cgroup/cpu}/ctr_main\$" "/proc/$pid/cgroup"; }
  ok $? "$what: the pod's cpu cgroup has the quota of its two 100m limits, its container's of its own ($got)"
  # All pods together hold what the job lends: the memory limit is
  # --k8s-mem (+64 MiB for the shim), the CPU quota the Node's CPUs.
  local ncpu
  ncpu="$(e2e_kubectl get node "$(e2e_node_names "$j" | head -n1)" -o jsonpath='{.status.capacity.cpu}')"
  got="$(pd_mem_max "$(pd_dir memory)")/$(pd_cpu_max "$(pd_dir cpu)")"
  [ "$got" = "$(( (512 + 64) << 20 ))/$(( ncpu * 100000 )) 100000" ]
  ok $? "$what: the pods together are held to the job's lent memory and its $ncpu CPUs ($got)"
  e2e_wait 30 "[ \"\$(sed -n 's/^nr_throttled //p' '$cpu/ctr_main/cpu.stat')\" -gt 0 ] 2>/dev/null"
  u0="$(pd_cpu_ns "$uid")"; sleep 2; u1="$(pd_cpu_ns "$uid")"
  got=$(( (${u1:-0} - ${u0:-0}) / 1000000 ))
  [ "$(sed -n 's/^nr_throttled //p' "$cpu/ctr_main/cpu.stat")" -gt 0 ] && [ "$got" -le 600 ]
  ok $? "$what: the burner is throttled in its container's cgroup: the pod used $got ms of CPU in 2 s (its limits allow 400 ms)"
  # What kubectl top and /stats/summary say of the pod is its cgroup's count:
  # between two reads of it around the summary's.
  local node sum top
  node="$(e2e_node_names "$j" | head -n1)"
  u0="$(pd_cpu_ns "$uid")"
  sum="$(e2e_kubectl get --raw "/api/v1/nodes/$node/proxy/stats/summary" \
    | python3 -c 'import json, sys
for p in json.load(sys.stdin)["pods"]:
    if p["podRef"]["name"] == "burn": print(p["cpu"]["usageCoreNanoSeconds"])')"
  u1="$(pd_cpu_ns "$uid")"
  [ -n "$sum" ] && [ "$sum" -ge "$u0" ] && [ "$sum" -le "$u1" ]
  ok $? "$what: /stats/summary counts the pod's CPU from its cgroup ($u0 <= $sum <= $u1 ns)"
  e2e_wait 60 "e2e_kubectl top pod burn --no-headers 2>/dev/null | grep -q burn"
  top="$(e2e_kubectl top pod burn --no-headers 2>&1 | awk '{print $2}')"
  [[ $top =~ ^[0-9]+m$ ]] && [ "${top%m}" -ge 50 ] && [ "${top%m}" -le 260 ]
  ok $? "$what: kubectl top shows the pod within its containers' two 100m limits ($top)"
  # (its 100m under TCG: 250 fork-execs take minutes)
  e2e_wait 300 "e2e_kubectl logs -n default burn -c forker | grep -q '^started'"
  got="$(e2e_kubectl logs -n default burn -c forker | tr '\n' ' ')"
  [[ $got == *"fork refused after"* ]] && [ "$(cat "$pids/pids.max")" = 256 ] \
    && [ "$(cat "$pids/pids.current")" -le 256 ]
  ok $? "$what: a pod forking without bound is stopped at pids.max 256 ($got; pids.current $(cat "$pids/pids.current" 2>&1))"
  [ "$(e2e_pod_phase g1)" = Running ] && [ "$(squeue -h -j "$j" -o %T)" = RUNNING ] \
    && sk_as_user sh -c 'for i in 1 2 3 4 5; do sleep 0 || exit 1; done'
  ok $? "$what: the trainer and the other pods run on, the job user still forks"
  e2e_end_job "$j"
  # (under TCG the extern step's end, stopping 250 processes, outlasts
  # e2e_end_job's wait: Slurm removes J last)
  [ -n "$J" ] && e2e_wait 180 "[ ! -e '$J' ]"
  e2e_assert_clean "$j" "$what"
  if [ "$E2E_PD_V2" = 1 ]; then
    local tree=""
    [ -e "$J" ] && tree="$(find "$J" -name cgroup.procs -exec sh -c 'echo "${1%/cgroup.procs}: $(tr "\n" " " < "$1")"' sh {} \; 2>&1 | sed "s|$J||" | paste -sd';')"
    [ ! -e "$J" ]; ok $? "$what: the job's cgroup directory is gone ($J${tree:+ left: $tree})"
  else
    got="$(ls -d /sys/fs/cgroup/*/slurm_k8s*/job_"$j" 2>/dev/null)"
    [ -z "$got" ]; ok $? "$what: the agent's own cgroup tree of the job is gone (${got:-none left})"
  fi
}

# sbatch refuses malformed --k8s-* flags before submission, naming the flag.
case_bad_flags() {
  local s out rc before nodes_before
  s="$(e2e_script ok 'true')"
  before="$(squeue -h | wc -l)"
  nodes_before="$(e2e_kubectl get nodes -o name)"
  bad() {  # bad EXPECTED_TEXT SBATCH_ARGS...
    local want="$1"; shift
    out="$(sk_as_user sbatch "$@" "$s" 2>&1)"; rc=$?
    [ "$rc" -ne 0 ] && grep -qF -- "$want" <<<"$out"
    ok $? "sbatch $* refused with '$want' (rc=$rc: $(head -n1 <<<"$out"))"
  }
  bad "--k8s-gpus=abc" --k8s-gpus=abc --gres=gpu:4
  bad "requests only 4 GPUs" --k8s-gpus=6 --gres=gpu:4
  bad "reserved prefix" --k8s-gpus=1 --gres=gpu:1 --k8s-labels=slurm-k8s/x=1
  bad "--k8s-taints=x" --k8s-gpus=1 --gres=gpu:1 --k8s-taints=x
  bad "--k8s-namespace" --k8s-gpus=1 --gres=gpu:1 --k8s-namespace=Bad_NS
  bad "--k8s-drain-before=soon" --k8s-gpus=1 --gres=gpu:1 --k8s-drain-before=soon
  # Slurm's environment form of a SPANK option goes through the same checks.
  out="$(sk_as_user env SLURM_SPANK__SLURM_SPANK_OPTION_spank_k8s_k8s_gpus=abc \
         sbatch --gres=gpu:4 "$s" 2>&1)"; rc=$?
  [ "$rc" -ne 0 ] && grep -qF -- "--k8s-gpus=abc" <<<"$out"
  ok $? "--k8s-gpus=abc given through the environment refused (rc=$rc: $(head -n1 <<<"$out"))"
  [ "$(squeue -h | wc -l)" = "$before" ] && [ "$(e2e_kubectl get nodes -o name)" = "$nodes_before" ]
  ok $? "no job was queued and no Node was created by the refused submissions"
}

# A non-root user talking to the agent socket directly.
case_socket_auth() {
  e2e_job 1 -N1 -w $N1 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "socket_auth: job with a virtual node"; return; }
  local j="$E2E_JOB" sock="$E2E_AGENTS/$N1/agent.sock" r
  call() {  # call USER OP BODY -> the reply line
    runuser -u "$1" -- python3 -c '
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])
s.sendall((json.dumps({"v": 1, "id": 7, "op": sys.argv[2], "body": json.loads(sys.argv[3])}) + "\n").encode())
buf = b""
while not buf.endswith(b"\n"):
    d = s.recv(65536)
    if not d: break
    buf += d
print(buf.decode().strip())' "$sock" "$2" "$3" 2>&1
  }
  r="$(call "$TEST_USER" register "{\"job_id\":9999,\"slurm_node\":\"$N1\",\"user\":\"$TEST_USER\",\"uid\":$TEST_UID,\"gpus\":[0]}")"
  grep -q '"ok":false' <<<"$r"; ok $? "register by $TEST_USER (not root/SlurmUser) refused: $r"
  r="$(call "$TEST_USER" deregister "{\"job_id\":$j,\"slurm_node\":\"$N1\",\"grace_s\":0,\"reason\":\"x\"}")"
  grep -q '"ok":false' <<<"$r"; ok $? "deregister of job $j by $TEST_USER refused: $r"
  r="$(call nobody attach "{\"job_id\":$j,\"slurm_node\":\"$N1\"}")"
  grep -q '"ok":false' <<<"$r"; ok $? "attach to $TEST_USER's job $j by user nobody refused: $r"
  r="$(call "$TEST_USER" attach "{\"job_id\":$j,\"slurm_node\":\"$N1\"}")"
  grep -q '"ok":false' <<<"$r"; ok $? "attach by the job's own user from outside the job's cgroup refused: $r"
  r="$(runuser -u "$TEST_USER" -- python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(5)
try:
    s.connect(sys.argv[1]); print("connected")
except PermissionError as e:
    print("denied:", e)' "$E2E_AGENTS/$N1/admin/agent.sock" 2>&1)"
  grep -q '^denied:' <<<"$r"; ok $? "$TEST_USER cannot connect to the agent's admin socket: $r"
  r="$(runuser -u "$TEST_USER" -- python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
s.sendall(b"{not json\n"); print(s.recv(4096).decode().strip())' "$sock" 2>&1)"
  sk_pid_alive "$(cat "$E2E_AGENTS/$N1/agent.pid")" && [ -z "$(e2e_node_names 9999)" ] && [ "$(e2e_ready_nodes "$j")" = 1 ]
  ok $? "after the refused requests and a malformed line ($r): agent alive, no Node for job 9999, job $j's node still Ready"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "socket_auth"
}

# A privileged pod is refused with a Failed status that says why.
case_privileged() {
  e2e_job 1 -N1 -w $N1 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "privileged: job with a virtual node"; return; }
  local j="$E2E_JOB"
  EXTRA_SPEC='    securityContext: {privileged: true}' e2e_pod "$j" priv
  e2e_wait 20 "[ \"\$(e2e_pod_phase priv)\" = Failed ]"
  ok $? "privileged pod: phase Failed"
  local r m
  r="$(e2e_pod_field default/priv '{.status.reason}')"; m="$(e2e_pod_field default/priv '{.status.message}')"
  grep -qi privileged <<<"$m"; ok $? "privileged pod: reason $r, message names privileged mode: $m"
  [ -z "$(e2e_pod_pids "$j" priv)" ]; ok $? "privileged pod: no process was started"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "privileged"
}

# More GPUs than lent: the scheduler keeps it Pending; bound directly past
# the scheduler, the node refuses it (Failed with the reason).
case_too_many_gpus() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:4 --k8s-gpus=2 || { ok 1 "too_many_gpus: job with a virtual node"; return; }
  local j="$E2E_JOB" node
  node="$(e2e_node_names "$j")"
  GPUS=3 e2e_pod "$j" greedy-sched
  e2e_wait 15 "e2e_pod_field default/greedy-sched '{.status.conditions[?(@.type==\"PodScheduled\")].message}' | grep -q 'Insufficient nvidia.com/gpu'"
  ok $? "3 GPUs on a node lending 2: Pending, $(e2e_pod_field default/greedy-sched '{.status.conditions[0].message}')"
  GPUS=3 NODE="$node" e2e_pod "$j" greedy
  e2e_wait 20 "[ \"\$(e2e_pod_phase greedy)\" = Failed ]"
  ok $? "3 GPUs bound directly to $node: phase Failed"
  local r m
  r="$(e2e_pod_field default/greedy '{.status.reason}')"; m="$(e2e_pod_field default/greedy '{.status.message}')"
  grep -q 'nvidia.com/gpu' <<<"$r $m"; ok $? "too many GPUs: reason $r, message: $m"
  [ -z "$(e2e_pod_pids "$j" greedy)" ]; ok $? "too many GPUs: no process was started"
  e2e_kubectl delete pod greedy-sched --wait=false >/dev/null 2>&1
  e2e_end_job "$j"
  e2e_assert_clean "$j" "too_many_gpus"
}

# A pod in a namespace the job did not allow fails with the reason; the
# Node's slurm-k8s/namespaces annotation and the job's SLURM_K8S_NAMESPACES
# say who may run there (the job's list, else the site's: "default" in this
# harness's agent.conf). A pod a DaemonSet owns is refused (allow_daemonsets
# is off).
case_namespace() {
  e2e_kubectl create namespace rl >/dev/null 2>&1
  e2e_job 1 -N1 -w $N3 --gres=gpu:2 --k8s-gpus=1 --k8s-namespace=rl || { ok 1 "namespace: job with a virtual node"; return; }
  local j="$E2E_JOB"
  NS=default e2e_pod "$j" wrong-ns
  e2e_wait 20 "[ \"\$(NS=default e2e_pod_phase wrong-ns)\" = Failed ]"
  ok $? "pod in namespace default on a job that allows only rl: Failed"
  local r m
  r="$(e2e_pod_field default/wrong-ns '{.status.reason}')"; m="$(e2e_pod_field default/wrong-ns '{.status.message}')"
  [ "$r" = NamespaceNotAllowed ] && grep -q "namespace default" <<<"$m"; ok $? "reason $r: $m"
  [ -z "$(e2e_pod_pids "$j" wrong-ns)" ]; ok $? "no process for the refused pod"
  NS=rl e2e_pod "$j" right-ns
  NS=rl e2e_pod_running right-ns 30; ok $? "a pod in the allowed namespace rl runs on the same node"
  local node ann out
  node="$(e2e_node_names "$j")"
  ann() { e2e_kubectl get node "$1" -o 'jsonpath={.metadata.annotations.slurm-k8s/namespaces}'; }
  [ "$(ann "$node")" = rl ]; ok $? "namespace: the Node's annotation slurm-k8s/namespaces says rl ($(ann "$node"))"
  out="$SK_JOBS_DIR/e2e-$j.out"
  e2e_wait 10 "grep -q '^namespaces=' '$out'"
  grep -qx "namespaces=rl" "$out"; ok $? "namespace: the job sees SLURM_K8S_NAMESPACES=rl ($(grep '^namespaces=' "$out"))"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "namespace"

  e2e_job 1 -N1 -w $N3 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "namespace: job naming no namespace"; return; }
  j="$E2E_JOB"; node="$(e2e_node_names "$j")"; out="$SK_JOBS_DIR/e2e-$j.out"
  [ "$(ann "$node")" = default ]; ok $? "namespace: a job naming none gets the site's list on its Node ($(ann "$node"))"
  e2e_wait 10 "grep -q '^namespaces=' '$out'"
  grep -qx "namespaces=default" "$out"; ok $? "namespace: ... and in SLURM_K8S_NAMESPACES ($(grep '^namespaces=' "$out"))"
  NS=rl NODE="$node" e2e_pod "$j" not-site
  e2e_wait 20 "[ \"\$(NS=rl e2e_pod_phase not-site)\" = Failed ]"
  m="$(e2e_pod_field rl/not-site '{.status.reason}: {.status.message}')"
  [ "$m" = "NamespaceNotAllowed: namespace rl may not use the nodes of Slurm job $j (allowed: default)" ]
  ok $? "namespace: a pod of rl on it is refused: $m"
  EXTRA_META="  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: e2e-agent, uid: 6c1f2c0e-0000-4000-8000-000000000001, controller: true}]" \
    NODE="$node" e2e_pod "$j" ds-pod
  e2e_wait 20 "[ \"\$(e2e_pod_phase ds-pod)\" = Failed ]"
  m="$(e2e_pod_field default/ds-pod '{.status.reason}: {.status.message}')"
  [[ "$m" == "DaemonSetNotAllowed: pods of DaemonSet default/e2e-agent do not run on the nodes Slurm jobs lend"* ]]
  ok $? "namespace: a DaemonSet's pod is refused: $m"
  [ -z "$(e2e_pod_pids "$j" ds-pod)" ]; ok $? "namespace: no process for the DaemonSet's pod"
  e2e_kubectl delete pod -n rl not-site --wait=false >/dev/null 2>&1
  e2e_end_job "$j"
  e2e_assert_clean "$j" "namespace"
}

# Two jobs on the same Slurm node: one virtual node each, disjoint GPUs.
case_two_jobs() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "two_jobs: first job"; return; }
  local j1="$E2E_JOB"
  e2e_job 1 -N1 -w $N2 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "two_jobs: second job"; e2e_end_job "$j1"; return; }
  local j2="$E2E_JOB" n1 n2
  n1="$(e2e_node_names "$j1")"; n2="$(e2e_node_names "$j2")"
  [ "$n1" = "slurm-$N2-$j1" ] && [ "$n2" = "slurm-$N2-$j2" ]; ok $? "jobs $j1 and $j2 on $N2: nodes $n1 and $n2"
  e2e_pod "$j1" a; e2e_pod "$j2" b
  e2e_pod_running a 30 && e2e_pod_running b 30; ok $? "a pod runs on each job's node"
  # Each job's extern step opens its own lent GPU only, which CUDA numbers 0
  # there; the node's indices (NVIDIA_VISIBLE_DEVICES) differ.
  local ga gb ca cb
  ga="$(e2e_pod_log default/a | sed -n 's/.*NVIDIA_VISIBLE_DEVICES=//p' | head -n1)"
  gb="$(e2e_pod_log default/b | sed -n 's/.*NVIDIA_VISIBLE_DEVICES=//p' | head -n1)"
  ca="$(e2e_pod_log default/a | sed -n 's/.*CUDA_VISIBLE_DEVICES=\([0-9,]*\) .*/\1/p' | head -n1)"
  cb="$(e2e_pod_log default/b | sed -n 's/.*CUDA_VISIBLE_DEVICES=\([0-9,]*\) .*/\1/p' | head -n1)"
  [ "$(e2e_pod_field default/a '{.spec.nodeName}')" = "$n1" ] && [ "$(e2e_pod_field default/b '{.spec.nodeName}')" = "$n2" ] \
    && [ -n "$ga" ] && [ -n "$gb" ] && [ "$ga" != "$gb" ] && [ "$ca" = 0 ] && [ "$cb" = 0 ]
  ok $? "each pod on its own job's node, different GPUs (a: node GPU $ga, CUDA $ca; b: node GPU $gb, CUDA $cb)"
  two_jobs_identities "$n1" "$n2"
  e2e_end_job "$j1"
  [ ! -e "$E2E_AGENTS/$N2/state/pki/$n1.pem" ] && [ -s "$E2E_AGENTS/$N2/state/pki/$n2.pem" ]
  ok $? "the ended job's node key and certificate removed, the running one's kept"
  [ -n "$(e2e_pod_pids "$j2" b)" ] && [ "$(e2e_pod_phase b)" = Running ] && [ "$(e2e_ready_nodes "$j2")" = 1 ]
  ok $? "ending job $j1 leaves job $j2's node and pod running"
  e2e_end_job "$j2"
  e2e_assert_clean "$j1" "two_jobs (first)"
  e2e_assert_clean "$j2" "two_jobs (second)"
}

# node_identity = impersonate on one host's agent (docs/admin-guide.md, "Node
# identities by impersonation"), the agent's identity bound to exactly the
# rules of etc/rbac-node-identity.yaml and what etc/slurm-k8s-impersonation-rbac
# prints for that host's two slots: a job's Node is its slot's, created and
# leased as system:node:<slot name> with no CSR, its pod runs, kubectl logs
# and exec reach it; the job's end leaves nothing. The agent is given back its
# usual config after. On N2: the time-limit job runs on N3 meanwhile, and an
# agent switched to another identity mode re-adopts its running jobs' nodes
# in that mode (a node named per job cannot be impersonated).
case_impersonation() {
  if [ -n "$E2E_KUBECONFIG" ]; then sk_skip "impersonation: binds the agent's rules through the double"; return; fi
  if [ "${E2E_NODE_IDENTITY:-bootstrap}" != bootstrap ]; then
    sk_skip "impersonation: its rules add to etc/rbac-node-identity.yaml's (E2E_NODE_IDENTITY=$E2E_NODE_IDENTITY)"; return
  fi
  local a="$E2E_AGENTS/$N2" j node out counters
  out="$(squeue -h -w "$N2" -o %i 2>&1)"
  [ -z "$out" ]; ok $? "impersonation: no other job on $N2, whose agent the case restarts (${out:-none})"
  [ -z "$out" ] || return
  e2e_agent_rbac "$("$E2E_TOP/etc/slurm-k8s-impersonation-rbac" --slots 2 "$N2")"
  ok $? "impersonation: the agent's identity bound to its rules and the generator's for $N2"
  e2e_agent_stop 2
  cp "$a/agent.conf" "$a/agent.conf.usual"
  sed -i 's/^node_identity = .*/node_identity = impersonate/' "$a/agent.conf"
  printf 'node_name_template = slurm-{node}-{slot}\nmax_jobs = 2\n' >>"$a/agent.conf"
  e2e_agent_start 2; ok $? "impersonation: agent $N2 restarted with node_identity = impersonate"
  if e2e_job 1 -N1 -w $N2 --gres=gpu:2 --k8s-gpus=1; then
    j="$E2E_JOB"; node="$(e2e_node_names "$j")"
    [ "$node" = "slurm-$N2-0" ]; ok $? "impersonation: job $j's Node is slot 0's ($node)"
    e2e_pod "$j" imp
    e2e_pod_running imp 30; ok $? "impersonation: a pod runs on it"
    out="$(e2e_pod_log default/imp)" && grep -q "NVIDIA_VISIBLE_DEVICES=" <<<"$out"; ok $? "impersonation: kubectl logs reaches it ($E2E_LOG_SOURCE)"
    out="$(timeout 30 kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" exec imp -- sh -c 'echo from-$((6*7))' 2>&1)"
    [ "$out" = from-42 ]; ok $? "impersonation: kubectl exec reaches it ($out)"
    counters="$(e2e_api GET '/_test/counters')"
    printf '%s' "$counters" | python3 -c '
import json, sys
mine = json.load(sys.stdin).get("byUser", {}).get("system:node:" + sys.argv[1], {})
assert any(k.startswith("POST /api/v1/nodes ") and k.endswith(" 201") for k in mine), mine
assert any(k.split()[0] in ("POST", "PUT") and "/leases" in k and k.endswith((" 200", " 201")) for k in mine), mine
' "$node"
    ok $? "impersonation: Node and Lease written as system:node:$node"
    out="$(e2e_kubectl get csr -o name | grep -c "slurm-k8s-$node-")"
    [ "$out" = 0 ]; ok $? "impersonation: no CSR for $node ($out)"
    e2e_end_job "$j"
    e2e_assert_clean "$j" "impersonation"
    e2e_wait 10 "[ -z \"\$(e2e_kubectl get node,lease -A -o name 2>&1 | grep -- '/$node\$')\" ]"
    ok $? "impersonation: the slot's Node and Lease are gone"
  else
    ok 1 "impersonation: job"
  fi
  e2e_agent_stop 2
  mv "$a/agent.conf.usual" "$a/agent.conf"
  e2e_agent_start 2; ok $? "impersonation: agent $N2 back to its usual config"
  e2e_agent_rbac; ok $? "impersonation: the agent's usual rules back"
}

# A second test cluster on this host (another SK_SLURM_DIR and ports, as a
# developer's scenario or benchmark beside the e2e) started, given a job and
# cleaned while a job of ours runs with a pod: its node names, cgroup
# directories and job ids are its own (tests/slurm/lib.sh), and its `clean`
# leaves our job, its cgroups and its pod alone.
case_two_clusters() {
  e2e_job 1 -N1 -w $N1 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "two_clusters: job"; return; }
  local j="$E2E_JOB" other="$E2E_D/other-cluster" oj onode cg
  e2e_pod "$j" ours
  e2e_pod_running ours 30; ok $? "two_clusters: a pod runs on job $j's node"
  cg="$(echo /sys/fs/cgroup/freezer/slurm_$N1/uid_*/job_"$j")"
  [ -d "$cg" ]; ok $? "two_clusters: job $j's cgroup directory $cg"
  # What the e2e exported for its own cluster (partitions naming its nodes) is not the other's;
  # the other on this script's network (with SK_NETNS=1 the site's, where its clients run).
  local -a o_env=(env -u SK_NODE_PREFIX -u SK_FIRST_JOB_ID -u SLURM_CONF_EXTRA -u GPU_PARTITION_OPTS
                  -u CONSTRAIN_RAM_SPACE SK_SLURM_DIR="$other"
                  CTLD_PORT=$((CTLD_PORT + 71)) SLURMD_BASE_PORT=$((SLURMD_BASE_PORT + 71)) SK_NETNS=0
                  NUM_NODES=1 PLUGSTACK_LINES="" SLURM_CONF="$other/etc/slurm.conf")
  "${o_env[@]}" "$E2E_CLUSTER" start >"$E2E_D/other-cluster.log" 2>&1
  ok $? "two_clusters: a second cluster in $other starts ($(tail -n1 "$E2E_D/other-cluster.log"))"
  onode="$("${o_env[@]}" sinfo -h -N -o %N 2>/dev/null | head -n1)"
  [ -n "$onode" ] && [ "$onode" != "$N1" ] && [[ $onode != "$SK_NODE_PREFIX"[0-9]* ]]
  ok $? "two_clusters: its node is named apart from ours ($onode; ours $N1..)"
  oj="$("${o_env[@]}" runuser -u "$TEST_USER" -- sbatch --parsable -o /dev/null -D / --wrap 'sleep 300' 2>&1)"
  "${o_env[@]}" bash -c 'for _ in $(seq 100); do squeue -h -j "$1" -o %T | grep -q RUNNING && exit 0; sleep 0.2; done; exit 1' _ "$oj"
  ok $? "two_clusters: a job runs there ($oj)"
  # RUNNING in slurmctld comes before slurmd has made the job's cgroups: waited for.
  [[ $oj =~ ^[0-9]+$ ]] && [ "$oj" != "$j" ] \
    && e2e_wait 20 "[ -d \"\$(echo /sys/fs/cgroup/freezer/slurm_$onode/uid_*/job_$oj)\" ]"
  ok $? "two_clusters: its job id $oj is not ours ($j), its cgroups are under slurm_$onode"
  "${o_env[@]}" "$E2E_CLUSTER" clean >>"$E2E_D/other-cluster.log" 2>&1
  ok $? "two_clusters: the second cluster stopped and cleaned"
  [ ! -e "$other" ] && [ -z "$(ls -d /sys/fs/cgroup/*/slurm_"$onode" 2>/dev/null)" ]
  ok $? "two_clusters: nothing of it left (its directory, its slurm_$onode cgroups)"
  [ -d "$cg" ] && [ "$(sk_job_state "$j")" = RUNNING ] && [ "$(e2e_pod_phase ours)" = Running ] \
    && [ -n "$(e2e_pod_pids "$j" ours)" ] && [ "$(e2e_ready_nodes "$j")" = 1 ]
  ok $? "two_clusters: our job $j, its cgroups, its Ready node and its pod are untouched"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "two_clusters"
}

# Each virtual node has its own identity (node_identity = bootstrap): one
# approved kubelet-client CSR per node, its Node and Lease created as
# system:node:<node> (the double's counters per user), none as the agent.
two_jobs_identities() {  # two_jobs_identities NODE1 NODE2
  local n csrs
  csrs="$(e2e_kubectl get csr -o 'jsonpath={range .items[*]}{.metadata.name} {.spec.signerName} {.status.conditions[0].type} {.status.conditions[0].reason}{"\n"}{end}')"
  for n in "$1" "$2"; do
    echo "$csrs" | grep -q "^slurm-k8s-$n-[a-z0-9]* kubernetes.io/kube-apiserver-client-kubelet Approved AutoApproved\$"
    ok $? "node $n: its kubelet-client CSR approved ($(echo "$csrs" | grep -c "^slurm-k8s-$n-") for it)"
  done
  if [ -n "$E2E_KUBECONFIG" ]; then sk_skip "two_jobs: the request log is the double's"; return; fi
  local counters
  counters="$(e2e_api GET '/_test/counters')"
  for n in "$1" "$2"; do
    printf '%s' "$counters" | python3 -c '
import json, sys
by = json.load(sys.stdin).get("byUser", {})
mine = by.get("system:node:" + sys.argv[1], {})
assert any(k.startswith("POST /api/v1/nodes ") and k.endswith(" 201") for k in mine), mine
assert any(k.split()[0] in ("POST", "PUT") and "/leases" in k and k.endswith((" 200", " 201")) for k in mine), mine
' "$n"
    ok $? "node $n: Node and Lease created as system:node:$n"
  done
  # In this whole run no virtual node was created, nor its Lease written, as the agent.
  printf '%s' "$counters" | python3 -c '
import json, sys
agent = json.load(sys.stdin).get("byUser", {}).get("slurm-k8s-agent", {})
bad = {k: v for k, v in agent.items() if k.startswith(("POST /api/v1/nodes ", "PUT /apis/coordination", "POST /apis/coordination"))}
assert not bad, bad
'
  ok $? "no Node created, no Lease written under the agent's own identity"
}

# The real kubectl's streams through the double to the agent's kubelet
# endpoint and the shim, on a real job: exec (the job's user, exit code,
# stdin), cp both ways, port-forward, attach, top; with kubectl 1.28 (SPDY)
# and 1.32 (WebSocket) where both are installed. scancel ends an exec session
# in flight: nothing of the job's user is left.
case_kubectl_io() {
  e2e_job 1 -N1 -w $N1 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "kubectl_io: job with a virtual node"; return; }
  local j="$E2E_JOB" node port d srv kdir v k out rc vers=()
  node="$(e2e_node_names "$j")"
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  d="$E2E_D/kubectl-io-$j"; mkdir -p "$d"
  # An echo server on the declared port; a tick on stdout every 0.5 s (attach).
  srv="$(e2e_script kubectl-io-server 'import socket, sys, threading, time
def echo(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.shutdown(socket.SHUT_WR)
    c.close()
def serve(s):
    while True:
        threading.Thread(target=echo, args=(s.accept()[0],), daemon=True).start()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))  # probes dial the pod IP, the node InternalIP
s.listen(16)
threading.Thread(target=serve, args=(s,), daemon=True).start()
i = 0
while True:
    i += 1
    print("tick", i, flush=True)
    time.sleep(0.5)')"
  # Its volumes at mountPaths the node lacks (under / and /etc): every exec,
  # cp and probe below runs in the container's own mount namespace.
  local conf_at="/etc/e2e-kx-$j" data_at="/e2e-kx-data-$j"
  e2e_kubectl create configmap "kx-conf-$j" --from-literal=greeting=hello >/dev/null
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: kx, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: e2e/echo:1
    command: ["python3", "$srv", "$port", "e2e-pod-$j-kx"]
    ports: [{containerPort: $port}]
    readinessProbe: {tcpSocket: {port: $port}, periodSeconds: 1}
    resources:
      limits: {nvidia.com/gpu: 1}
    volumeMounts:
    - {name: conf, mountPath: $conf_at}
    - {name: data, mountPath: $data_at}
  volumes:
  - {name: conf, configMap: {name: kx-conf-$j}}
  - {name: data, emptyDir: {}}
EOF
  e2e_pod_running kx 30; ok $? "kubectl_io: pod kx on $node Ready (its echo server listens on $port)"
  out="$(timeout 30 kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" exec kx -- sh -c \
         "echo \$(cat $conf_at/greeting); echo w > $data_at/f && cat $data_at/f; touch $conf_at/x 2>/dev/null || echo ro" 2>&1)"
  [ "$(echo $out)" = "hello w ro" ] && [ ! -e "$conf_at" ] && [ ! -e "$data_at" ]
  ok $? "kubectl_io: kubectl exec sees the configMap at $conf_at (read-only) and the emptyDir at $data_at, which the node does not have ('$(echo $out)')"
  # Priorities (docs/architecture.md): the plugin starts the shim at
  # plugstack's shim_nice (-5), ahead of its pods, whose processes run at the
  # extern step's own nice value.
  local spid shim_ni step_ni pod_ni
  spid="$(pgrep -u "$TEST_UID" -f "slurm-k8s-shim --job-id $j " | head -1)"
  shim_ni="$(ps -o ni= -p "$spid" | tr -d ' ')"
  step_ni="$(ps -o ni= -p "$(ps -o ppid= -p "$spid" | tr -d ' ')" | tr -d ' ')"
  pod_ni="$(pgrep -u "$TEST_UID" -f "e2e-pod-$j-kx" | xargs -r ps -o ni= -p | tr -d ' ' | sort -u | paste -sd' ')"
  [ "$shim_ni" = -5 ] && [ -n "$step_ni" ] && [ "$pod_ni" = "$step_ni" ]
  ok $? "kubectl_io: the shim at nice -5 (${shim_ni:-?}), the pod's processes at the step's (${step_ni:-?}): ${pod_ni:-none}"

  kdir="$(dirname "$(readlink -f "$(command -v kubectl)")")"
  # kubectl 1.28 (SPDY) and 1.32 (WebSocket); a missing one is said, not
  # replaced by another version.
  for v in 1.28 1.32; do
    if [ -x "$kdir/kubectl.$v" ]; then vers+=("$v"); else echo "SKIP: kubectl_io: kubectl $v not found at $kdir/kubectl.$v: its checks are skipped"; fi
  done
  head -c 65536 /dev/urandom >"$d/blob"
  install -d -o "$TEST_USER" -m 700 "$d/in-pod"
  # kubectl 1.32's WebSocket client reads frames before it has made its
  # streams and drops one that comes first ("Unknown stream id", client-go's
  # remotecommand readDemuxLoop): the client's race, which a loaded machine
  # can hit with a command that writes at once. ws_again OUT COMMAND... runs
  # COMMAND >OUT 2>$d/err, again (at most twice) when its stderr says so.
  ws_again() {
    local o=$1 i rc; shift
    for i in 1 2 3; do
      "$@" >"$o" 2>"$d/err"; rc=$?
      grep -q "Unknown stream id" "$d/err" || break
      e2e_log "kubectl_io: the client dropped an early frame (Unknown stream id), again: $*"
    done
    return "$rc"
  }
  for v in "${vers[@]}"; do
    k="$kdir/kubectl.$v"; [ "$v" = default ] && k=kubectl
    kx() { timeout 30 "$k" --kubeconfig "$E2E_ADMIN_KUBECONFIG" "$@"; }
    ws_again "$d/id-$v" kx exec kx -- sh -c 'id -u; exit 3'; rc=$?; out="$(cat "$d/id-$v")"
    [ "$out" = "$TEST_UID" ] && [ "$rc" = 3 ]
    ok $? "kubectl $v exec: runs as the job's user and gives its exit code (uid '$out', rc $rc; want $TEST_UID, 3)"
    kx exec -i kx -- cat <"$d/blob" >"$d/cat-$v" 2>"$d/err"; rc=$?
    [ "$rc" = 0 ] && cmp -s "$d/blob" "$d/cat-$v"
    ok $? "kubectl $v exec -i: 64 KiB through cat come back identical (rc $rc, $(stat -c %s "$d/cat-$v") bytes)"
    kx cp "$d/blob" "kx:$d/in-pod/blob-$v" >/dev/null 2>"$d/err"; rc=$?
    [ "$rc" = 0 ] && cmp -s "$d/blob" "$d/in-pod/blob-$v" && [ "$(stat -c %u "$d/in-pod/blob-$v")" = "$TEST_UID" ]
    ok $? "kubectl $v cp into the pod: identical, owned by the job's user (rc $rc, owner $(stat -c %u "$d/in-pod/blob-$v" 2>&1): $(tail -n1 "$d/err"))"
    ws_again /dev/null kx cp "kx:$d/in-pod/blob-$v" "$d/back-$v"; rc=$?
    [ "$rc" = 0 ] && cmp -s "$d/blob" "$d/back-$v"
    ok $? "kubectl $v cp out of the pod: identical (rc $rc: $(tail -n1 "$d/err"))"
    kubectl_io_forward "$k" "$d" "$port" "$v"
  done

  # attach: the container's output from now on (3 ticks in a row), then let go.
  out="$(timeout 20 kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" attach kx 2>"$d/err" | grep -m3 '^tick ' | cut -d' ' -f2 | paste -sd' ')"
  [[ "$out" =~ ^([0-9]+)\ ([0-9]+)\ ([0-9]+)$ ]] && [ $((BASH_REMATCH[1] + 1)) = "${BASH_REMATCH[2]}" ] \
    && [ $((BASH_REMATCH[2] + 1)) = "${BASH_REMATCH[3]}" ]
  ok $? "kubectl attach: the container's ticks in order ('$out': $(tail -n1 "$d/err"))"

  # top: the double computes figures from two scrapes of the agent's /metrics/resource.
  e2e_wait 20 "e2e_kubectl top pod kx 2>/dev/null | grep -q '^kx '"
  out="$(e2e_kubectl top pod kx 2>&1)"
  grep -Eq '^kx +[0-9]+m +[0-9]+Mi *$' <<<"$out"; ok $? "kubectl top pod kx: figures ($(tail -n1 <<<"$out"))"
  e2e_wait 20 "e2e_kubectl top node $node 2>/dev/null | grep -q '^$node '"
  out="$(e2e_kubectl top node "$node" 2>&1)"
  grep -Eq "^$node +[0-9]+m +[0-9]+% +[0-9]+Mi +[0-9]+% *\$" <<<"$out"; ok $? "kubectl top node $node: figures ($(tail -n1 <<<"$out"))"

  # scancel with an exec session in flight: the session, its command and the
  # shim end; no process of the job's user stays in the job.
  local marker="e2e-exec-$j" epid t0
  kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" exec kx -- sh -c "sleep 1000; : $marker" >/dev/null 2>&1 &
  epid=$!
  e2e_wait 20 "[ \"\$(pgrep -u $TEST_UID -f '$marker' | wc -l)\" -ge 1 ]"
  ok $? "kubectl_io: an exec session runs as uid $TEST_UID ($(pgrep -u "$TEST_UID" -f "$marker" | paste -sd' '))"
  t0=$SECONDS
  e2e_end_job "$j"; ok $? "kubectl_io: scancel: job $j, its Node gone ($((SECONDS - t0)) s)"
  e2e_wait 20 "! sk_pid_alive $epid"; rc=$?
  sk_pid_alive "$epid" && kill "$epid" 2>/dev/null
  wait "$epid" 2>/dev/null
  out="$(kubectl_io_job_procs "$j"; pgrep -af "$marker|e2e-pod-$j-" | sed 's/^/left: /')"
  [ "$rc" = 0 ] && [ -z "$out" ]
  ok $? "kubectl_io: after scancel the kubectl exec client ended ($([ "$rc" = 0 ] && echo yes || echo no)), no process of the job is left${out:+: $(tr "\n" " " <<<"$out")}"
  e2e_assert_clean "$j" "kubectl_io"
  e2e_kubectl delete configmap "kx-conf-$j" >/dev/null 2>&1
}

# plugstack's runtime_config reaches the job's shim (--runtime-config): a
# container whose image matches a template runs through it (here the
# stand-in for apptainer that lib.sh installs), with its volumeMounts passed
# as the template's {mounts:--bind} says; the runtime, not the shim, mounts
# them then (the stand-in does not, so the path is absent in the command's
# view). An image no template matches runs as a process, its mounts made by
# the shim.
case_runtime_template() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "runtime_template: job"; return; }
  local j="$E2E_JOB" node spid out vol
  node="$(e2e_node_names "$j")"
  spid="$(pgrep -u "$TEST_UID" -f "slurm-k8s-shim --job-id $j " | head -1)"
  tr '\0' ' ' <"/proc/$spid/cmdline" | grep -q -- "--runtime-config $E2E_LIB/runtime.conf "
  ok $? "runtime_template: the job's shim got plugstack's runtime_config ($(tr '\0' ' ' <"/proc/$spid/cmdline" 2>&1 | grep -o -- '--runtime-config [^ ]*'))"
  for p in "rt e2e-rt/app:1" "plain e2e/plain:1"; do
    read -r name image <<<"$p"
    e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  restartPolicy: Never
  containers:
  - name: main
    image: $image
    command: ["sh", "-c", "echo ran; test -d /rt-$j && echo mounted || echo not-mounted"]
    volumeMounts: [{name: data, mountPath: /rt-$j}]
  volumes: [{name: data, emptyDir: {}}]
EOF
  done
  e2e_wait 30 "[ \"\$(e2e_pod_phase rt)\" = Succeeded ] && [ \"\$(e2e_pod_phase plain)\" = Succeeded ]"
  ok $? "runtime_template: pods rt and plain Succeeded ($(e2e_pod_phase rt), $(e2e_pod_phase plain))"
  out="$(e2e_kubectl logs rt 2>&1)"
  vol="$(sed -n 's/^bind \(.*\):\/rt-'"$j"'$/\1/p' <<<"$out")"
  grep -qx "runtime: exec --bind $vol:/rt-$j docker://e2e-rt/app:1 sh -c .*" <<<"$out" \
    && grep -qx "image e2e-rt/app:1" <<<"$out" && [ "${vol##*/}" = data ] \
    && [ "$(tail -n2 <<<"$out" | paste -sd' ')" = "ran not-mounted" ]
  ok $? "runtime_template: e2e-rt/app:1 ran through the template, its volume passed as --bind (kubectl logs: $(paste -sd'|' <<<"$out"))"
  out="$(e2e_kubectl logs plain 2>&1 | paste -sd' ')"
  [ "$out" = "ran mounted" ]; ok $? "runtime_template: e2e/plain:1 ran as a process, its volume mounted by the shim ('$out')"
  e2e_kubectl delete pod rt plain --wait=false >/dev/null 2>&1
  e2e_end_job "$j"
  e2e_assert_clean "$j" "runtime_template"
}

# Pods from images through the podman runtime (k8s-shim/podman.h), pulled
# from the harness's registry on loopback: the four command/args
# combinations against the image's ENTRYPOINT/CMD, its Env and WorkingDir
# under the pod's, a configMap, an emptyDir and a ServiceAccount token at
# their mountPaths, one GPU's device node only, an exec readiness probe and
# kubectl exec inside the container, the stop through podman with the
# container's own exit code, a missing image's ErrImagePull, and nothing of
# podman left at the job's end.
case_image_pods() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:2 --k8s-gpus=2 || { ok 1 "image_pods: job"; return; }
  local j="$E2E_JOB" node img="$E2E_REGISTRY/e2e/busybox:1" out st want pid
  node="$(e2e_node_names "$j")"
  e2e_kubectl create configmap "img-$j" --from-literal=app.conf="hello-$j" >/dev/null
  e2e_kubectl create serviceaccount "img-$j" >/dev/null
  e2e_kubectl create secret docker-registry "img-pull-$j" --docker-server="$E2E_REGISTRY_AUTH" \
    --docker-username=e2e --docker-password=s3cret >/dev/null
  e2e_kubectl create secret docker-registry "img-wrong-$j" --docker-server="$E2E_REGISTRY_AUTH" \
    --docker-username=e2e --docker-password=wrong >/dev/null
  e2e_kubectl create secret generic "img-key-$j" --from-literal=key="key-$j" >/dev/null
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: imgsem, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  restartPolicy: Never
  containers:
  - {name: none, image: $img}
  - {name: args, image: $img, args: [echo, from-args]}
  - {name: cmd, image: $img, command: [echo, from-command]}
  - name: both
    image: $img
    command: [sh, -c]
    args: ['echo "both \$IMGVAR \$PODVAR \$(pwd) \$(id -u) \$HOSTNAME"; echo "last words" >/dev/termination-log; exit 4']
    env: [{name: PODVAR, value: frompod}]
    workingDir: /tmp
  - {name: nocmd, image: $img, command: [no-such-program]}
  - {name: user, image: $E2E_REGISTRY/e2e/busybox-user:1, command: [sh, -c, 'echo "\$(id -u):\$(id -g)"']}
---
apiVersion: v1
kind: Pod
metadata: {name: imgsvc, namespace: default}
spec:
  nodeName: $node
  serviceAccountName: img-$j
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  terminationGracePeriodSeconds: 20
  containers:
  - name: main
    image: $img
    command: [sh, -c]
    args:
    - |
      trap 'cat /data/prestop >/dev/termination-log; exit 3' TERM
      echo "cuda=\$CUDA_VISIBLE_DEVICES nvidia=\$NVIDIA_VISIBLE_DEVICES"
      echo "devs=\$(ls /dev | grep nvidia | tr '\n' ' ')"
      cat /config/app.conf; echo
      touch /data/ready
      while :; do sleep 1 & wait \$!; done
    resources: {limits: {nvidia.com/gpu: "1"}}
    readinessProbe: {exec: {command: [cat, /data/ready]}, periodSeconds: 1}
    lifecycle: {preStop: {exec: {command: [sh, -c, "echo prestop-ran >/data/prestop"]}}}
    volumeMounts:
    - {name: cfg, mountPath: /config}
    - {name: data, mountPath: /data}
    - {name: sa, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}
  volumes:
  - {name: cfg, configMap: {name: img-$j}}
  - {name: data, emptyDir: {}}
  - name: sa
    projected:
      sources:
      - serviceAccountToken: {path: token, expirationSeconds: 3600}
      - downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: imgvol, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  terminationGracePeriodSeconds: 2
  containers:
  - name: files
    image: $img
    command: [sh, -c]
    args:
    - |
      cat /etc/app/key; echo
      (echo x >/etc/app/key) 2>/dev/null || echo key-read-only
      last=""
      while :; do
        c="\$(cat /config/app.conf)"
        [ "\$c" = "\$last" ] || { echo "conf=\$c"; last="\$c"; }
        sleep 0.2
      done
    volumeMounts:
    - {name: key, mountPath: /etc/app/key, subPath: key, readOnly: true}
    - {name: cfg, mountPath: /config}
  - name: stubborn
    image: $img
    command: [sh, -c, 'trap "" TERM; echo ignoring-term; while :; do sleep 1; done']
  volumes:
  - {name: key, secret: {secretName: img-key-$j}}
  - {name: cfg, configMap: {name: img-$j}}
---
apiVersion: v1
kind: Pod
metadata: {name: imgnot, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  containers:
  - {name: main, image: $E2E_REGISTRY/e2e/notimage:1}
---
apiVersion: v1
kind: Pod
metadata: {name: imgmissing, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  containers:
  - {name: main, image: $E2E_REGISTRY/e2e/nope:1}
---
apiVersion: v1
kind: Pod
metadata: {name: imgauth, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  restartPolicy: Never
  imagePullSecrets: [{name: img-pull-$j}]
  containers:
  - {name: main, image: $E2E_REGISTRY_AUTH/e2e/private:1, command: [echo, pulled with the secret]}
---
apiVersion: v1
kind: Pod
metadata: {name: imgnoauth, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  restartPolicy: Never
  imagePullSecrets: [{name: img-wrong-$j}, {name: img-absent-$j}]
  containers:
  - {name: main, image: $E2E_REGISTRY_AUTH/e2e/private:1, imagePullPolicy: Always, command: [echo, never]}
EOF
  e2e_wait 90 "[ \"\$(e2e_pod_phase imgsem)\" = Failed ]"
  ok $? "image_pods: imgsem ran its four containers from $img and ended Failed (one exits 4): $(e2e_pod_phase imgsem)"
  # Where pods have their own network, one with podman containers stays on
  # the node's, and an Event says why (docs/kubernetes-guide.md "Network").
  if [ "$SK_NETNS" = 1 ] && [ "${E2E_POD_NETWORK:-cni}" = cni ]; then
    out="$(e2e_kubectl get events -n default --field-selector involvedObject.name=imgsem \
           -o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}' | grep '^NodeNetwork' | head -n1)"
    [ "$(e2e_pod_field default/imgsem '{.status.podIP}')" = "$(e2e_node_address 2)" ] \
      && grep -q "runs through podman" <<<"$out"
    ok $? "image_pods: imgsem (podman) is on the node's network, podIP $(e2e_pod_field default/imgsem '{.status.podIP}'): '$out'"
  fi
  for want in "none|entry: echo default-cmd default-cmd" "args|entry: echo from-args from-args" \
              "cmd|from-command" "both|both fromimage frompod /tmp $TEST_UID $node" \
              "user|$TEST_UID:$(id -g "$TEST_USER")"; do
    out="$(e2e_kubectl logs imgsem -c "${want%%|*}" 2>&1 | paste -sd' ')"
    [ "$out" = "${want#*|}" ]
    ok $? "image_pods: container ${want%%|*}: '$out' (command replaces ENTRYPOINT, args replace CMD; image Env and WorkingDir under the pod's)"
  done
  st="$(e2e_pod_field default/imgsem '{range .status.containerStatuses[*]}{.name}={.state.terminated.exitCode}/{.state.terminated.reason} {end}')"
  [[ "$st" == *"both=4/Error"* && "$st" == *"cmd=0/Completed"* && "$st" == *"nocmd=127/StartError"* ]]
  ok $? "image_pods: the containers' own exit codes, a command missing from the image is a StartError ($st)"
  out="$(e2e_pod_field default/imgsem '{range .status.containerStatuses[*]}{.name}={.state.terminated.message}|{end}')"
  [[ "$out" == *"both=last words"* && "$out" == *"nocmd="*"no-such-program"* ]]
  ok $? "image_pods: the termination messages: what the container wrote to /dev/termination-log, podman's reason for the StartError ($out)"
  out="$(e2e_kubectl get events -n default --field-selector involvedObject.name=imgsem -o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}' 2>&1)"
  grep -q "^Pulling: Pulling image \"$img\"" <<<"$out" && grep -Eq "^Pulled: (Successfully pulled image \"$img\" in|Container image \"$img\" already present)" <<<"$out"
  ok $? "image_pods: Pulling and Pulled events ($(grep -E '^Pull' <<<"$out" | head -3 | paste -sd'|'))"

  e2e_wait 90 "[ \"\$(e2e_pod_field default/imgsvc '{.status.containerStatuses[0].ready}')\" = true ]"
  ok $? "image_pods: imgsvc Ready through its exec probe inside the container ($(e2e_pod_field default/imgsvc '{.status.phase} {.status.containerStatuses[0].state}'))"
  out="$(e2e_kubectl logs imgsvc 2>&1 | paste -sd'|')"
  [[ "$out" =~ cuda=0\ nvidia=([0-9])\|devs=nvidia([0-9])\ \|hello-$j ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
  ok $? "image_pods: the container sees its one GPU's device node only, CUDA numbers it 0, and the configMap at /config ($out)"
  out="$(e2e_kubectl exec imgsvc -- sh -c 'cat /config/app.conf; echo; id -u; test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token; cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; test -e /data/ready && echo data; test -e '"$SK_SLURM_DIR"' || echo no-node-paths' 2>&1 | paste -sd' ')"
  [ "$out" = "hello-$j $TEST_UID token default data no-node-paths" ]
  ok $? "image_pods: kubectl exec runs inside the container as the job's uid, with the token and the volumes at their mountPaths ($out)"
  # The job suspended: the container's processes (below conmon, not in the
  # supervisor's process group) stop, and run again at the resume.
  pid="$(pgrep -u "$TEST_UID" -f '^sh -c trap ' | head -1)"
  scontrol suspend "$j"
  e2e_wait 40 "[ -n '$pid' ] && [ \"\$(proc_state_of $pid)\" = T ]"
  ok $? "image_pods: scontrol suspend stops the container's main process $pid ($(proc_state_of "$pid"))"
  scontrol resume "$j"
  e2e_wait 40 "[ \"\$(proc_state_of $pid)\" != T ] && [ \"\$(pod_ready_of default/imgsvc)\" = 'True ' ]"
  ok $? "image_pods: scontrol resume continues it, the pod Ready again ($(proc_state_of "$pid"), $(pod_ready_of default/imgsvc))"
  e2e_wait 60 "e2e_pod_field default/imgmissing '{.status.containerStatuses[0].state.waiting.reason}' | grep -Eq '^(ErrImagePull|ImagePullBackOff)$'"
  ok $? "image_pods: a missing image waits in ErrImagePull/ImagePullBackOff ($(e2e_pod_field default/imgmissing '{.status.phase} {.status.containerStatuses[0].state.waiting}'))"
  out="$(e2e_kubectl get events -n default --field-selector involvedObject.name=imgmissing -o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}' 2>&1)"
  grep -q "^Failed: Failed to pull image \"$E2E_REGISTRY/e2e/nope:1\": " <<<"$out"
  ok $? "image_pods: the pull's failure is an Event with podman's message ($(grep '^Failed: Failed' <<<"$out" | head -1))"

  # An image that is not an image: podman's reason, the pod waits.
  e2e_wait 60 "e2e_pod_field default/imgnot '{.status.containerStatuses[0].state.waiting.reason}' | grep -Eq '^(ErrImagePull|ImagePullBackOff)$'"
  out="$(e2e_kubectl get events -n default --field-selector involvedObject.name=imgnot -o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}' 2>&1)"
  grep -q "^Failed: Failed to pull image \"$E2E_REGISTRY/e2e/notimage:1\": .*processing tar file" <<<"$out"
  ok $? "image_pods: an image whose layer is not a tar archive waits in ErrImagePull/ImagePullBackOff with podman's reason ($(grep '^Failed: Failed' <<<"$out" | head -1))"
  # A secret file by subPath, read-only; a configMap directory updated in place.
  e2e_wait 60 "[ \"\$(pod_ready_of default/imgvol)\" = 'True ' ]"
  out="$(e2e_kubectl logs imgvol -c files 2>&1 | paste -sd' ')"
  [ "$out" = "key-$j key-read-only conf=hello-$j" ]
  ok $? "image_pods: a secret's key at its subPath, read-only, and the configMap at its mountPath inside the container ($out)"
  e2e_kubectl create configmap "img-$j" --from-literal=app.conf="changed-$j" --dry-run=client -o yaml | e2e_kubectl replace -f - >/dev/null
  e2e_wait 60 "e2e_kubectl logs imgvol -c files 2>&1 | grep -qx 'conf=changed-$j'"
  ok $? "image_pods: the configMap's update is seen in place inside the running container ($(e2e_kubectl logs imgvol -c files 2>&1 | tail -n1))"
  local t_del=$SECONDS
  e2e_kubectl delete pod imgvol --wait=false >/dev/null 2>&1
  # The final status as the watch recorded it (the recorder may write it a
  # moment after the pod left the API): waited for there, not on the API.
  e2e_wait 30 "python3 '$E2E_TOP/tests/e2e/watch.py' final '$E2E_D/watch.jsonl' default/imgvol | grep -q '\"exitCode\": 137'"
  st="$(python3 "$E2E_TOP/tests/e2e/watch.py" final "$E2E_D/watch.jsonl" default/imgvol | python3 -c 'import json, sys
s = json.loads(sys.stdin.read() or "{}")
t = lambda c: ((c.get("state") or {}).get("terminated") or {}).get("exitCode")
print(" ".join("%s=%s" % (c["name"], t(c)) for c in s.get("containerStatuses", [])))')"
  [[ "$st" == *"stubborn=137"* ]]
  ok $? "image_pods: a container that ignores SIGTERM is killed at its grace's end (2 s): exit code 137 ($st; deleted in $((SECONDS - t_del)) s)"

  e2e_wait 60 "[ \"\$(e2e_pod_phase imgauth)\" = Succeeded ]"
  ok $? "image_pods: imgauth pulled from the registry that asks for a login, with its imagePullSecret ($(e2e_pod_phase imgauth): $(e2e_kubectl logs imgauth 2>&1))"
  e2e_wait 60 "e2e_pod_field default/imgnoauth '{.status.containerStatuses[0].state.waiting.reason}' | grep -Eq '^(ErrImagePull|ImagePullBackOff)$'"
  ok $? "image_pods: imgnoauth waits in ErrImagePull/ImagePullBackOff ($(e2e_pod_field default/imgnoauth '{.status.phase} {.status.containerStatuses}'))"
  out="$(e2e_kubectl get events -n default --field-selector involvedObject.name=imgnoauth -o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}' 2>&1)"
  grep -q "^Failed: Failed to pull image \"$E2E_REGISTRY_AUTH/e2e/private:1\": .*unauthorized" <<<"$out" \
    && grep -q "^FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (img-absent-$j)" <<<"$out"
  ok $? "image_pods: a wrong pull secret fails the pull with the registry's answer, an absent one is a warning ($(grep -E '^(Failed: Failed|FailedToRetrieve)' <<<"$out" | head -2 | paste -sd'|'))"
  # A pull that hangs (a registry that accepts and never answers) ends with
  # the pod's deletion: nothing of it is left.
  python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16); held = []
while True: held.append(s.accept()[0])' "${E2E_REGISTRY_STUCK%:*}" "${E2E_REGISTRY_STUCK#*:}" &
  local stuck=$!
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: imgstuck, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  containers:
  - {name: main, image: $E2E_REGISTRY_STUCK/e2e/busybox:1, command: [echo, never]}
EOF
  # The node's image store pulls it (as its own user, agent/images/image_store.h).
  e2e_wait 30 "pgrep -u slurm-k8s-images -f 'pull .*$E2E_REGISTRY_STUCK/' >/dev/null"
  ok $? "image_pods: imgstuck's pull hangs on a registry that never answers ($(pgrep -u slurm-k8s-images -f "pull .*$E2E_REGISTRY_STUCK/" | head -1))"
  e2e_kubectl delete pod imgstuck --wait=false >/dev/null 2>&1
  e2e_wait 20 "! e2e_kubectl get pod imgstuck >/dev/null 2>&1 && [ -z \"\$(pgrep -f 'pull .*$E2E_REGISTRY_STUCK/')\" ]"
  ok $? "image_pods: deleting imgstuck cancels its pull, nobody else waiting for it: the pod is gone, no pull process left ($(pgrep -a -f "pull .*$E2E_REGISTRY_STUCK/" | head -1))"
  kill "$stuck" 2>/dev/null; wait "$stuck" 2>/dev/null
  e2e_kubectl delete pod imgsvc --wait=false >/dev/null 2>&1
  e2e_wait 40 "python3 '$E2E_TOP/tests/e2e/watch.py' final '$E2E_D/watch.jsonl' default/imgsvc | grep -q '\"exitCode\": 3'"
  st="$(python3 "$E2E_TOP/tests/e2e/watch.py" final "$E2E_D/watch.jsonl" default/imgsvc)"
  ST="$st" python3 -c 'import json, os, sys
s = json.loads(os.environ["ST"] or "{}")
t = [(c.get("state") or {}).get("terminated") or {} for c in s.get("containerStatuses", [])]
print([(x.get("exitCode"), x.get("reason"), x.get("message")) for x in t])
sys.exit(0 if t and t[0].get("exitCode") == 3 and t[0].get("message", "").strip() == "prestop-ran" else 1)' >"$E2E_D/image-pods.tmp" 2>&1
  ok $? "image_pods: deleting imgsvc ran its preStop hook inside the container, then stopped it through podman: its TERM trap's exit code 3 and message are the pod's ($(cat "$E2E_D/image-pods.tmp"))"
  e2e_kubectl delete pod imgsem imgmissing imgnot imgauth imgnoauth --wait=false >/dev/null 2>&1
  e2e_kubectl delete secret "img-pull-$j" "img-wrong-$j" "img-key-$j" >/dev/null 2>&1
  e2e_kubectl delete configmap "img-$j" >/dev/null 2>&1
  e2e_kubectl delete serviceaccount "img-$j" >/dev/null 2>&1
  # What rootless podman leaves when its shim cannot reset it (a container's
  # keep-id layers: the user's subordinate ids, read-only directories), made
  # in the job's shim dir as the job's user: the agent removes it at the
  # job's end with the rest (rm in a user namespace mapping those ids).
  local sdir="$E2E_AGENTS/$N2/shim/job_${j}_$N2"
  sk_as_user unshare --map-root-user --map-auto sh -c \
    "mkdir -p '$sdir/subids/ro' && touch '$sdir/subids/ro/f' && chown -R 1:1 '$sdir/subids' && chmod 555 '$sdir/subids/ro'" \
    && [ "$(stat -c %u "$sdir/subids/ro/f")" != "$TEST_UID" ]
  ok $? "image_pods: files of the job's user's subordinate ids in its shim dir ($(stat -c '%u %A' "$sdir/subids/ro" 2>&1))"
  e2e_end_job "$j"
  e2e_wait 20 "[ -z \"\$(pgrep -u $TEST_UID -f 'podman|conmon|catatonit')\" ]"
  ok $? "image_pods: no podman, conmon or pause process of the job's user left ($(pgrep -a -u "$TEST_UID" -f 'podman|conmon|catatonit' | paste -sd'|'))"
  e2e_assert_clean "$j" "image_pods"
}

# kubectl_io_forward KUBECTL DIR PORT VERSION: port-forward to the pod kx's
# declared port, a 64 KiB round trip through the echo server.
kubectl_io_forward() {
  local k="$1" d="$2" port="$3" v="$4" lport pf got
  lport="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "$k" --kubeconfig "$E2E_ADMIN_KUBECONFIG" port-forward pod/kx "$lport:$port" >"$d/pf-$v.out" 2>&1 &
  pf=$!
  e2e_wait 15 "grep -q 'Forwarding from' '$d/pf-$v.out' || ! sk_pid_alive $pf"
  got="$(python3 - "$lport" "$d/blob" 2>&1 <<'EOF'
import socket, sys, threading
data = open(sys.argv[2], "rb").read()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
back = []
def read():
    b = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        b += c
    back.append(b)
t = threading.Thread(target=read)
t.start()
s.sendall(data)
s.shutdown(socket.SHUT_WR)
t.join(30)
print("identical" if back and back[0] == data else "got %d of %d bytes" % (len(back[0]) if back else -1, len(data)))
EOF
)"
  kill "$pf" 2>/dev/null; wait "$pf" 2>/dev/null
  [ "$got" = identical ]
  ok $? "kubectl $v port-forward pod/kx $lport:$port: 64 KiB echoed back $got ($(head -n1 "$d/pf-$v.out"))"
}

# Live processes of the job's user still in JOB's cgroup.
kubectl_io_job_procs() {
  local p
  for p in $(pgrep -u "$TEST_UID"); do
    grep -Eqs "/job_$1(/|$)" "/proc/$p/cgroup" && ps -o pid=,args= -p "$p"
  done
  return 0
}

# Shared by scancel / time limit: the pod got SIGTERM and a final status.
# The pod's final status (before its deletion) names how the job ended
# (REASON: JobCancelled, TimeLimit, JobCompleted, ...), its process got
# SIGTERM and exited 0; the Node got an Event with that reason.
check_job_end_pod() {  # check_job_end_pod JOB POD WHAT REASON
  local j="$1" p="$2" what="$3" want="$4" log
  rl_followed_log "default/$p" >"$E2E_D/podlogs/tmp"
  grep -q "received signal 15" "$E2E_D/podlogs/tmp"; ok $? "$what: pod $p logged 'received signal 15' (from $E2E_LOG_SOURCE)"
  local st
  st="$(python3 "$E2E_TOP/tests/e2e/watch.py" final "$E2E_D/watch.jsonl" "default/$p")"
  ST="$st" WANT="$want" J="$j" python3 -c 'import json, os, sys
s = json.loads(os.environ["ST"] or "{}")
t = [(c.get("state") or {}).get("terminated") or {} for c in s.get("containerStatuses", [])]
ok = s.get("reason") == os.environ["WANT"] and "Slurm job " + os.environ["J"] in s.get("message", "") \
    and t and all(x.get("exitCode") == 0 for x in t)
print(s.get("phase"), s.get("reason"), s.get("message"), [x.get("exitCode") for x in t])
sys.exit(0 if ok else 1)' >"$E2E_D/podlogs/tmp" 2>&1
  ok $? "$what: pod $p final status says $want (the job's end), exit 0: $(cat "$E2E_D/podlogs/tmp")"
  check_job_end_event "$j" "$what" "$want"
}

# Node paths and memory as pod volumes (docs/kubernetes-guide.md "Volumes"):
# a claim bound to a hostPath PersistentVolume under the agents' volume_roots
# ($E2E_D/shared) read at its mountPath, a hostPath written as the job's user,
# /dev/shm a tmpfs of its sizeLimit, for a process pod and an image pod (rootless
# podman binds what the shim hands it); a claim bound to a volume outside the
# roots refused; no tmpfs of the job left after it.
case_volumes() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "volumes: job"; return; }
  local j="$E2E_JOB" node img="$E2E_REGISTRY/e2e/busybox:1" sh="$E2E_D/shared" out p last
  node="$(e2e_node_names "$j")"
  mkdir -p "$sh/models-$j/m1" "$E2E_D/outside-$j"
  echo "w=$j" >"$sh/models-$j/m1/weights"
  chmod -R a+rX "$sh" "$E2E_D/outside-$j"
  install -d -o "$TEST_USER" "$sh/users-$j"  # where the job's user may make directories
  local script='cat /models/m1/weights; df -k /dev/shm | tail -n +2 | tr "\n" " "; echo; echo "$0" >/runs/$0; (echo x >/models/x) 2>/dev/null || echo models-read-only; [ -z "$ROROOT" ] || { (echo x >/rootfile) 2>/dev/null || echo root-read-only; }; while :; do sleep 1 & wait $!; done'
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: models-$j}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadOnlyMany]
  storageClassName: models-$j
  hostPath: {path: $sh/models-$j, type: Directory}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: outside-$j}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: outside-$j
  hostPath: {path: $E2E_D/outside-$j}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: models, namespace: default}
spec:
  accessModes: [ReadOnlyMany]
  storageClassName: models-$j
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: outside, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: outside-$j
  resources: {requests: {storage: 1Gi}}
EOF
  for p in volproc volimg; do
    e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $p, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: $( [ $p = volimg ] && echo "$img" || echo e2e/sleeper:1 )
    command: [/bin/sh, -c, '$script', $p-$j]
$( [ $p = volimg ] && printf '    env: [{name: ROROOT, value: "1"}]\n    securityContext: {readOnlyRootFilesystem: true}' )
    volumeMounts:
    - {name: models, mountPath: /models, readOnly: true}
    - {name: runs, mountPath: /runs}
    - {name: shm, mountPath: /dev/shm}
  volumes:
  - {name: models, persistentVolumeClaim: {claimName: models, readOnly: true}}
  - {name: runs, hostPath: {path: $sh/users-$j/runs, type: DirectoryOrCreate}}
  - {name: shm, emptyDir: {medium: Memory, sizeLimit: 16Mi}}
EOF
  done
  NODE="$node" EXTRA_SPEC='    volumeMounts: [{name: v, mountPath: /v}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: outside}}]' e2e_pod "$j" volout
  for p in volproc volimg; do
    last=models-read-only; [ $p = volproc ] || last=root-read-only
    e2e_wait 90 "e2e_kubectl logs $p 2>/dev/null | grep -q $last"
    out="$(e2e_kubectl logs $p 2>&1 | paste -sd'|')"
    [[ "$out" == "w=$j|slurm-k8s:job_${j}_$N2:"*" 16384 "*"|models-read-only"$( [ $p = volimg ] && echo "|root-read-only" ) ]]
    ok $? "volumes: $p reads the model from its claim, /dev/shm is the agent's 16Mi tmpfs, the claim read-only$( [ $p = volimg ] && echo ", its image's root read-only (readOnlyRootFilesystem)" ) ($out)"
    [ "$(stat -c %U "$sh/users-$j/runs/$p-$j" 2>&1)" = "$TEST_USER" ]
    ok $? "volumes: $p wrote in its hostPath (made by DirectoryOrCreate) as the job's user ($(ls -l "$sh/users-$j/runs" 2>&1 | tail -n +2 | paste -sd'|'))"
  done
  e2e_wait 30 "[ \"\$(e2e_pod_phase volout)\" = Failed ]"
  out="$(e2e_pod_field default/volout '{.status.message}')"
  [[ "$out" == *"is the node path $E2E_D/outside-$j, outside the paths this node lets pods mount"* ]]
  ok $? "volumes: a claim bound to a volume outside volume_roots is refused, saying why ($out)"
  out="$(grep -c " slurm-k8s:job_${j}_" /proc/self/mountinfo)"
  [ "$out" = 2 ]; ok $? "volumes: one tmpfs per pod on the node ($out)"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "volumes"
  e2e_kubectl delete pod volproc volimg volout --wait=false >/dev/null 2>&1
  e2e_kubectl delete pvc models outside >/dev/null 2>&1
  e2e_kubectl delete pv "models-$j" "outside-$j" >/dev/null 2>&1
  rm -rf "$sh/models-$j" "$sh/users-$j" "$E2E_D/outside-$j"
}

# vLLM's own GPU manifest (examples/vllm/vllm-gpu.yaml: its claim, token
# Secret, Deployment with a GPU, /dev/shm as a memory emptyDir, /health probes
# after 60 s, ClusterIP Service), only the image (the stand-in, which checks
# its model, GPU and /dev/shm before serving) and the node selection changed,
# on a job's virtual node: the claim bound to the site's PersistentVolume
# (examples/vllm/site-pv.yaml) under volume_roots; Ready, its log says what
# it found, /v1/models answers at the pod's IP, the Service's Endpoints list
# it; nothing of the job left after it.
case_vllm() {
  # 4 CPUs: the Deployment asks for 2 (and 6G, which a job without --mem has: its node's)
  e2e_job 1 -N1 -w $N2 -c 4 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "vllm: job"; return; }
  local j="$E2E_JOB" ex="$E2E_TOP/examples/vllm" models="$E2E_D/shared/hf-cache" out ip pod
  mkdir -p "$models/hub/models--mistralai--Mistral-7B-Instruct-v0.3/snapshots/e2e"
  echo '{"model_type": "mistral"}' >"$models/hub/models--mistralai--Mistral-7B-Instruct-v0.3/snapshots/e2e/config.json"
  chmod -R a+rX "$E2E_D/shared"
  sed "s|@MODELS@|$models|" "$ex/site-pv.yaml" | e2e_kubectl apply -f - >/dev/null
  sed -e "s|@IMAGE@|$E2E_REGISTRY/slurm-k8s/vllm-standin:1|" -e "s|@JOB@|$j|" "$ex/vllm-gpu.yaml" \
    | e2e_kubectl apply -f - >"$E2E_D/vllm-apply.out" 2>&1
  ok $? "vllm: vLLM's manifest applies as published ($(paste -sd'|' "$E2E_D/vllm-apply.out"))"
  # The probes start 60 s after the container (initialDelaySeconds), as written.
  e2e_kubectl rollout status deployment/mistral-7b --timeout=180s >/dev/null 2>&1
  ok $? "vllm: the Deployment is available ($(e2e_kubectl get pods -l app=mistral-7b -o wide --no-headers 2>&1 | paste -sd'|'))"
  pod="$(e2e_kubectl get pods -l app=mistral-7b -o jsonpath='{.items[0].metadata.name}')"
  out="$(e2e_kubectl logs "$pod" 2>&1 | paste -sd'|')"
  [[ "$out" == *"model mistralai/Mistral-7B-Instruct-v0.3 from /root/.cache/huggingface/hub/models--mistralai--Mistral-7B-Instruct-v0.3/snapshots/e2e/config.json"* &&
     "$out" =~ "GPUs opened: nvidia"[0-9]+("(no driver)")?" (CUDA_VISIBLE_DEVICES=0)" && "$out" == *"/dev/shm is a tmpfs of 2097152K"* &&
     "$out" == *"a Hugging Face token is set"* ]]
  ok $? "vllm: the server found its model in the claim, its one GPU, /dev/shm a tmpfs of 2Gi and the token ($out)"
  ip="$(e2e_pod_field "default/$pod" '{.status.podIP}')"
  # From its node's host (where a pod's address is routed, as on any node).
  out="$(e2e_on_host "$(e2e_pod_field "default/$pod" '{.status.hostIP}')" \
         curl -sS --max-time 10 "http://$ip:8000/v1/models" 2>&1)"
  [[ "$out" == *'"id":"mistralai/Mistral-7B-Instruct-v0.3"'* ]]
  ok $? "vllm: /v1/models at the pod's IP $ip:8000 ($out)"
  out="$(e2e_kubectl get endpoints mistral-7b -o jsonpath='{.subsets[*].addresses[*].ip}:{.subsets[*].ports[*].port}' 2>&1)"
  [ "$out" = "$ip:8000" ]; ok $? "vllm: the Service's Endpoints list the pod ($out)"
  e2e_kubectl delete deployment mistral-7b --wait=false >/dev/null 2>&1
  e2e_end_job "$j"
  e2e_assert_clean "$j" "vllm"
  e2e_kubectl delete service mistral-7b >/dev/null 2>&1
  e2e_kubectl delete secret hf-token-secret >/dev/null 2>&1
  e2e_kubectl delete pvc mistral-7b >/dev/null 2>&1
  e2e_kubectl delete pv hf-cache >/dev/null 2>&1
  rm -rf "$models"
}

# The node's image store (agent/images/image_store.h): a job's pod pulls a
# public image into its node's store (as the store's own user), a later job
# on the node starts it with no pull (the registry's access log shows none),
# the store is read-only to the jobs' user, a private image pulled with a
# pod's secret stays in the job's own storage (never in the shared store) and
# another pod of the job without the secret cannot use it; with a small
# bound, the least recently used image no pod runs is collected.
store_pod() {  # store_pod JOB NODE POD IMAGE [SECRET]: prints its image and exits (HOLD: sleeps first)
  local secrets=""
  [ -z "${5:-}" ] || secrets="imagePullSecrets: [{name: $5}]"
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $3, namespace: default}
spec:
  nodeName: $2
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$1", effect: NoSchedule}]
  restartPolicy: Never
  $secrets
  containers:
  - {name: main, image: $4, command: [sh, -c, 'echo ran from $4; sleep ${HOLD:-0}']}
EOF
}

case_image_store() {
  local a="$E2E_AGENTS/$N1" store="$E2E_AGENTS/$N1/images" reglog="$E2E_REGISTRY_DIR/registry.log"
  local img="$E2E_REGISTRY/e2e/store:1" img2="$E2E_REGISTRY/e2e/store:2" j node out n1 n2 view
  view="$store/view/overlay-images/images.json"
  e2e_job 1 -N1 -w $N1 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "image_store: job"; return; }
  j="$E2E_JOB" node="$(e2e_node_names "$E2E_JOB")"
  store_pod "$j" "$node" store-a "$img"
  e2e_wait 60 "[ \"\$(e2e_pod_phase store-a)\" = Succeeded ]"
  n1="$(grep -c 'GET /v2/e2e/store/' "$reglog")"
  out="$(e2e_kubectl get events -n default --field-selector involvedObject.name=store-a -o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}' 2>&1)"
  grep -q "image store: $img pulled" "$a/agent.log" && grep -q "^Pulled: Successfully pulled image" <<<"$out" \
    && grep -q "e2e/store:1" "$view" && [ "$n1" -gt 0 ]
  ok $? "image_store: the first job's pod pulled $img into the node's store ($(e2e_pod_phase store-a); registry requests $n1; $(grep -m1 "image store: $img pulled" "$a/agent.log"))"
  out="$(stat -c '%U %a' "$store" "$store/storage" "$store/view" | paste -sd' ')"
  [ "$out" = "root 755 slurm-k8s-images 711 slurm-k8s-images 755" ] \
    && ! su -s /bin/sh "$TEST_USER" -c "touch '$store/view/x'" 2>/dev/null \
    && ! su -s /bin/sh "$TEST_USER" -c "touch '$store/storage/x'" 2>/dev/null
  ok $? "image_store: the store is its own user's, read-only to the job's user ($out)"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "image_store (first job)"

  e2e_job 1 -N1 -w $N1 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "image_store: second job"; return; }
  j="$E2E_JOB" node="$(e2e_node_names "$E2E_JOB")"
  store_pod "$j" "$node" store-b "$img"
  e2e_wait 60 "[ \"\$(e2e_pod_phase store-b)\" = Succeeded ]"
  n2="$(grep -c 'GET /v2/e2e/store/' "$reglog")"
  out="$(e2e_kubectl get events -n default --field-selector involvedObject.name=store-b -o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}' 2>&1)"
  [ "$n2" = "$n1" ] && grep -q "already present on machine" <<<"$out" && [ "$(e2e_kubectl logs store-b 2>&1)" = "ran from $img" ]
  ok $? "image_store: a second job on the node started $img with no pull (registry requests $n1 -> $n2; $(grep -m1 '^Pulled' <<<"$out"))"
  # Private: pulled with the pod's secret into the job's own storage only.
  e2e_kubectl create secret docker-registry "store-pull-$j" --docker-server="$E2E_REGISTRY_AUTH" \
    --docker-username=e2e --docker-password=s3cret >/dev/null
  store_pod "$j" "$node" store-private "$E2E_REGISTRY_AUTH/e2e/private:1" "store-pull-$j"
  e2e_wait 60 "[ \"\$(e2e_pod_phase store-private)\" = Succeeded ]"
  # The view must be there and list images: its absence is no "not in the store".
  [ "$(e2e_pod_phase store-private)" = Succeeded ] && grep -q "e2e/store:1" "$view" && ! grep -q "e2e/private" "$view"
  ok $? "image_store: a private image pulled with the pod's secret ran, and is not in the node's store ($(e2e_pod_phase store-private))"
  store_pod "$j" "$node" store-nosecret "$E2E_REGISTRY_AUTH/e2e/private:1"
  e2e_wait 60 "e2e_pod_field default/store-nosecret '{.status.containerStatuses[0].state.waiting.reason}' | grep -Eq '^(ErrImagePull|ImagePullBackOff)$'"
  ok $? "image_store: a pod of the same job without the secret may not use it, present as it is ($(e2e_pod_field default/store-nosecret '{.status.containerStatuses[0].state.waiting}'))"
  e2e_kubectl delete pod store-a store-b store-private store-nosecret --wait=false >/dev/null 2>&1
  e2e_kubectl delete secret "store-pull-$j" >/dev/null 2>&1
  e2e_end_job "$j"
  e2e_assert_clean "$j" "image_store (second job)"

  # A bound the store is over: the image no pod runs goes, the running one stays.
  e2e_agent_stop 1
  E2E_IMAGE_STORE_SIZE=1M e2e_agent_conf 1
  e2e_agent_start 1
  e2e_job 1 -N1 -w $N1 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "image_store: third job"; return; }
  j="$E2E_JOB" node="$(e2e_node_names "$E2E_JOB")"
  HOLD=600 store_pod "$j" "$node" store-c "$img2"
  e2e_wait 60 "[ \"\$(e2e_pod_phase store-c)\" = Running ]"
  e2e_wait 30 "! grep -q 'e2e/store:1' '$view'"
  grep -q "e2e/store:2" "$view" && ! grep -q "e2e/store:1" "$view"
  ok $? "image_store: over its bound, the store removed the least recently used image no pod runs and kept the running pod's ($(grep -m1 'removing image' "$a/agent.log"))"
  e2e_kubectl delete pod store-c --wait=false >/dev/null 2>&1
  e2e_end_job "$j"
  e2e_assert_clean "$j" "image_store (third job)"
  e2e_agent_stop 1
  e2e_agent_conf 1
  e2e_agent_start 1
}

# What ordinary charts use, on a job's node (process containers, real Slurm,
# the agent in between): a native sidecar (restartPolicy Always init
# container: a gRPC health server, its startupProbe grpc) started before the
# app container, which has a postStart hook, an HTTPS readiness probe on its
# own server and a grpc liveness probe on the sidecar's; the pod Ready, the
# sidecar running in initContainerStatuses; deleted, the app container stops
# before the sidecar.
case_chart_features() {
  e2e_job 1 -N1 -w $N3 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "chart_features: job"; return; }
  local j="$E2E_JOB" node d gport tport out uid vol
  d="$E2E_D/chart-$j" gport=$((21000 + j % 1000)) tport=$((22000 + j % 1000))
  node="$(e2e_node_names "$j")"
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=chart -days 1 -keyout "$d/tls.key" -out "$d/tls.crt" >/dev/null 2>&1
  chmod -R a+rX "$d"
  install -d -o "$TEST_USER" "$d/out"  # the SIGTERM times, kept after the pod's directory goes
  cat >"$d/health_server.py" <<'EOF'
import concurrent.futures, signal, sys, threading, time, grpc
def check(req, ctx): return bytes([0x08, 1])
h = grpc.method_handlers_generic_handler('grpc.health.v1.Health', {'Check': grpc.unary_unary_rpc_method_handler(check)})
s = grpc.server(concurrent.futures.ThreadPoolExecutor(4), handlers=[h])
s.add_insecure_port('0.0.0.0:%s' % sys.argv[1]); s.start()
def term(*a):
    open(sys.argv[2] + '/proxy-term', 'w').write('%f\n' % time.time()); sys.exit(0)
signal.signal(signal.SIGTERM, term)
threading.Event().wait()
EOF
  cat >"$d/https_server.py" <<'EOF'
import http.server, os, signal, ssl, sys, time
port, d, logs = int(sys.argv[1]), sys.argv[2], sys.argv[3]
assert os.path.exists(logs + '/poststart'), 'started before its postStart hook ran'
def term(*a):
    open(d + '/out/main-term', 'w').write('%f\n' % time.time()); sys.exit(0)
signal.signal(signal.SIGTERM, term)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(s): s.send_response(200); s.end_headers()
    def log_message(s, *a): pass
srv = http.server.HTTPServer(('0.0.0.0', port), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(d + '/tls.crt', d + '/tls.key')
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
EOF
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: chart, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  terminationGracePeriodSeconds: 20
  volumes: [{name: logs, emptyDir: {}}]
  initContainers:
  - name: proxy
    image: e2e/sleeper:1
    restartPolicy: Always
    command: [/usr/bin/python3, $d/health_server.py, "$gport", $d/out]
    volumeMounts: [{name: logs, mountPath: /logs}]
    startupProbe: {grpc: {port: $gport}, periodSeconds: 1, failureThreshold: 60}
  containers:
  - name: main
    image: e2e/sleeper:1
    command: [/bin/sh, -c, 'while [ ! -e /logs/poststart ]; do sleep 0.1; done; exec /usr/bin/python3 $d/https_server.py $tport $d /logs']
    volumeMounts: [{name: logs, mountPath: /logs}]
    lifecycle: {postStart: {exec: {command: [/bin/sh, -c, "touch /logs/poststart"]}}}
    readinessProbe: {httpGet: {port: $tport, path: /ready, scheme: HTTPS}, periodSeconds: 1, timeoutSeconds: 5}
    livenessProbe: {grpc: {port: $gport}, periodSeconds: 2, timeoutSeconds: 5}
EOF
  e2e_wait 60 "[ \"\$(e2e_pod_field default/chart '{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
  ok $? "chart_features: Ready: its HTTPS readiness probe passed ($(e2e_pod_field default/chart '{.status.conditions[?(@.type=="Ready")].message}'))"
  out="$(e2e_pod_field default/chart '{.status.initContainerStatuses[0].name} {.status.initContainerStatuses[0].started} {.status.initContainerStatuses[0].state.running.startedAt} {.status.containerStatuses[0].restartCount}')"
  [[ "$out" == "proxy true 20"*" 0" ]]
  ok $? "chart_features: the sidecar runs beside it (started, its grpc startup probe passed), the app's grpc liveness probe holds ($out)"
  uid="$(e2e_pod_field default/chart '{.metadata.uid}')"
  vol="$E2E_AGENTS/$N3/shim/job_${j}_$N3/pods/$uid/volumes/logs"
  [ -e "$vol/poststart" ]; ok $? "chart_features: the postStart hook ran ($(ls "$vol" 2>&1 | paste -sd' '))"
  e2e_kubectl delete pod chart --wait=false >/dev/null 2>&1
  e2e_wait 30 "[ -e '$d/out/proxy-term' ]"
  out="$(cat "$d/out/main-term" "$d/out/proxy-term" 2>&1 | paste -sd' ')"
  awk '{ exit !($1 <= $2) }' <<<"$out"
  ok $? "chart_features: deleted: the app container got SIGTERM before its sidecar (main, proxy: $out)"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "chart_features"
  rm -rf "$d"
}

# GPUs through CDI (k8s-shim/cdi.h): a CDI specification for the harness's
# fake GPUs in /var/run/cdi, as nvidia-ctk writes one for real GPUs: each GPU
# its device node and an env var, and for all a stand-in driver library
# directory (a mount), an env var and a device node. An image container with
# one lent GPU gets it as its CDI device: its own GPU's device node and the
# injected one, none of the other GPUs', the library directory and the env;
# the pod's events say so. Rootless podman's runtime binds a CDI device node
# from the spec's `path` (real specs name /dev/nvidiaN there, on host and in
# the container alike): the fake GPUs' nodes are at the harness's paths in
# the container too. The specification goes after the case.
case_cdi_gpus() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "cdi_gpus: job"; return; }
  local j="$E2E_JOB" node img="$E2E_REGISTRY/e2e/busybox:1" spec drv out want i dev="$SK_SLURM_DIR/dev"
  spec="/var/run/cdi/slurm-k8s-e2e-$j.yaml" drv="$E2E_D/cdi-driver-$j"
  node="$(e2e_node_names "$j")"
  mkdir -p "$drv" /var/run/cdi
  echo "stand-in libcuda" >"$drv/libcuda.so.1"
  # A stand-in nvidia-smi (at /bin: the image's PATH): the GPUs whose device node the devices cgroup
  # lets it open (no driver is behind the fake nodes: ENXIO counts as open,
  # EPERM, the cgroup's refusal, does not), as scripts/check-gpu-pods.sh reads it.
  cat >"$drv/nvidia-smi" <<'EOF'
#!/bin/sh
i=0
for d in "${E2E_GPU_DEV_DIR:-/dev}"/nvidia[0-9]*; do
  [ -e "$d" ] || continue
  case "$( (: <"$d") 2>&1)" in *"not permitted"*) continue ;; esac
  echo "GPU $i: Stand-in GPU (UUID: GPU-e2e-${d##*/nvidia})"; i=$((i + 1))
done
EOF
  chmod -R a+rX "$drv"; chmod 755 "$drv/nvidia-smi"
  rm -f "$dev/nvidia-uvm-e2e"
  mknod -m 666 "$dev/nvidia-uvm-e2e" c 1 3  # the stand-in of a driver's extra device (/dev/null's)
  {
    printf 'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n'
    for ((i = 0; i < 4; i++)); do
      printf -- '- name: "%d"\n  containerEdits:\n    env: [E2E_CDI_GPU=%d]\n' "$i" "$i"
      printf '    deviceNodes: [{path: %s/nvidia%d}]\n' "$dev" "$i"
    done
    printf 'containerEdits:\n  env: [E2E_CDI=1, E2E_GPU_DEV_DIR=%s]\n  deviceNodes: [{path: %s/nvidia-uvm-e2e}]\n' "$dev" "$dev"
    printf '  mounts: [{hostPath: %s, containerPath: /usr/lib/nvidia-e2e, options: [ro, nosuid, nodev, bind]},\n' "$drv"
    printf '           {hostPath: %s/nvidia-smi, containerPath: /bin/nvidia-smi, options: [ro, nosuid, nodev, bind]}]\n' "$drv"
  } >"$spec"
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: cdi, namespace: default}
spec:
  nodeName: $node
  tolerations: [{key: slurm-k8s/job, operator: Equal, value: "$j", effect: NoSchedule}]
  restartPolicy: Never
  containers:
  - name: main
    image: $img
    command: [sh, -c, 'echo "devs=\$(ls $dev | tr "\n" " ")"; echo "cdi=\$E2E_CDI gpu=\$E2E_CDI_GPU cuda=\$CUDA_VISIBLE_DEVICES"; cat /usr/lib/nvidia-e2e/libcuda.so.1']
    resources: {limits: {nvidia.com/gpu: 1}}
EOF
  e2e_wait 90 "[ \"\$(e2e_pod_phase cdi)\" = Succeeded ] || [ \"\$(e2e_pod_phase cdi)\" = Failed ]"
  out="$(e2e_kubectl get events --field-selector involvedObject.name=cdi -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' 2>&1 | grep -E '^(CDIDevices|GPUDeviceNodesOnly)')"
  i="$(sed -n 's/^CDIDevices: GPUs as CDI devices nvidia.com\/gpu=\([0-9]*\) .*/\1/p' <<<"$out")"
  [ -n "$i" ]; ok $? "cdi_gpus: the image container got its GPU as a CDI device, the pod's event says which ($out)"
  out="$(e2e_kubectl logs cdi 2>&1 | paste -sd'|')"
  want="devs=nvidia-uvm-e2e nvidia$i |cdi=1 gpu=$i cuda=0|stand-in libcuda"
  [ "$out" = "$want" ]
  ok $? "cdi_gpus: inside: its own GPU's device node and the injected one only, the spec's env and library directory ($out; want $want)"
  # The shipped check an admin runs on a real GPU node, on the fake GPUs:
  # a job of its own beside this one, a pod with `nvidia-smi -L` (the spec's).
  out="$(KUBECTL="kubectl --kubeconfig $E2E_ADMIN_KUBECONFIG" NVIDIA_SMI="$drv/nvidia-smi" \
    SBATCH="runuser -u $TEST_USER -- env -i PATH=/usr/local/bin:/usr/bin:/bin SLURM_CONF=$SK_CONF E2E_GPU_DEV_DIR=$dev sbatch" \
    "$E2E_TOP/scripts/check-gpu-pods.sh" --image "$img" --gres gpu:2 --lend 1 --timeout 90 -- -w "$N2" 2>&1)"
  [ $? = 0 ] && grep -q "^ok: the pod sees 1 GPU(s), as lent" <<<"$out" && grep -q "^ok: none of them is one of the job's own" <<<"$out"
  ok $? "cdi_gpus: scripts/check-gpu-pods.sh: the pod sees exactly its lent GPU, none of the job's own ($(paste -sd'|' <<<"$out"))"
  rm -f "$spec" "$dev/nvidia-uvm-e2e"
  e2e_kubectl delete pod cdi --wait=false >/dev/null 2>&1
  e2e_end_job "$j"
  e2e_assert_clean "$j" "cdi_gpus"
  rm -rf "$drv"
}

case_scancel() {
  e2e_job 2 -N2 --gres=gpu:4 --k8s-gpus=2 || { ok 1 "scancel: 2-node job"; return; }
  local j="$E2E_JOB" t0
  e2e_pod "$j" s1; e2e_pod "$j" s2
  e2e_pod_running s1 30 && e2e_pod_running s2 30; ok $? "scancel: 2 pods Running"
  rl_follow_log default/s1; rl_follow_log default/s2
  sleep 0.5
  t0=$SECONDS
  scancel "$j"
  e2e_wait 40 "[ -z \"\$(e2e_node_names $j)\" ]"
  ok $? "scancel: Nodes gone $((SECONDS - t0)) s after scancel"
  rl_stop_log_followers
  check_job_end_pod "$j" s1 scancel JobCancelled; check_job_end_pod "$j" s2 scancel JobCancelled
  sk_wait_state "$j" CANCELLED 30; ok $? "scancel: job state $(sk_job_state "$j")"
  e2e_assert_clean "$j" "scancel"
}

# Signals Slurm sends to a running job's steps (scancel --signal, with and
# without --full / --batch) reach the extern step, where the shim runs: the
# shim and the pods ignore them (docs/user-guide.md, "Signals"), the batch
# step gets them as without --k8s, and the job ends normally afterwards.
case_step_signals() {
  local s j spid ppid done_f out sig
  done_f="$SK_JOBS_DIR/step-signals.done"
  rm -f "$done_f"
  s="$(e2e_script step-signals "for x in USR1 USR2 HUP INT QUIT; do trap \"echo trapped \$x\" \$x; done
echo started
while [ ! -e '$done_f' ]; do sleep 0.2 & wait \$! 2>/dev/null; done
echo finished")"
  j="$(sk_submit_as_user -o "$SK_JOBS_DIR/e2e-%j.out" -N1 -w $N1 --gres=gpu:2 --k8s-gpus=1 "$s")" \
    || { ok 1 "step_signals: job submitted"; return; }
  sk_wait_state "$j" RUNNING 30 && e2e_wait 20 "[ \"\$(e2e_ready_nodes $j)\" = 1 ]"
  ok $? "step_signals: job $j RUNNING with a Ready node"
  e2e_pod "$j" sig1; e2e_pod_running sig1 30; ok $? "step_signals: pod Running"
  spid="$(pgrep -u "$TEST_UID" -f "slurm-k8s-shim --job-id $j ")"; ppid="$(e2e_pod_pids "$j" sig1)"
  e2e_wait 10 "grep -q started '$SK_JOBS_DIR/e2e-$j.out'"
  out="$SK_JOBS_DIR/e2e-$j.out"
  # Without --full/--batch Slurm signals every step but the batch one
  # (the extern step included); with them, the batch step too.
  for sig in USR1 USR2 HUP INT QUIT CONT; do scancel --signal="$sig" "$j"; done
  for sig in USR1 HUP INT; do scancel --full --signal="$sig" "$j"; done
  scancel --batch --signal=USR2 "$j"
  scancel --batch --signal=QUIT "$j"
  e2e_wait 20 "[ \"\$(grep -o 'trapped [A-Z0-9]*' '$out' | sort -u | wc -l)\" -ge 5 ]"
  local seen; seen="$(grep -o 'trapped [A-Z0-9]*' "$out" | sort -u | paste -sd, -)"
  [[ "$seen" == *USR1* && "$seen" == *USR2* && "$seen" == *HUP* && "$seen" == *INT* && "$seen" == *QUIT* ]]
  ok $? "step_signals: the batch script's traps saw --full/--batch signals ($seen)"
  sleep 2  # a shim or pod killed by a signal needs a moment to be noticed
  [ "$(sk_job_state "$j")" = RUNNING ] && sk_pid_alive "$spid" && [ "$(e2e_pod_pids "$j" sig1)" = "$ppid" ] \
    && [ "$(e2e_pod_phase sig1)" = Running ] && [ "$(e2e_ready_nodes "$j")" = 1 ] \
    && [ "$(e2e_pod_field default/sig1 '{.status.containerStatuses[0].restartCount}')" = 0 ]
  ok $? "step_signals: after 12 signals job $(sk_job_state "$j"), shim $spid $(sk_pid_alive "$spid" && echo alive || echo dead), pod process $ppid -> $(e2e_pod_pids "$j" sig1), phase $(e2e_pod_phase sig1), restarts $(e2e_pod_field default/sig1 '{.status.containerStatuses[0].restartCount}')"
  mkdir -p "$E2E_D/podlogs"
  e2e_pod_log default/sig1 >"$E2E_D/podlogs/sig1" && ! grep -q "received signal" "$E2E_D/podlogs/sig1"
  ok $? "step_signals: the pod's container got none of the signals (from $E2E_LOG_SOURCE)"
  touch "$done_f"
  sk_wait_state "$j" COMPLETED 30; ok $? "step_signals: the job ended normally ($(sk_job_state "$j"))"
  grep -q finished "$out"; ok $? "step_signals: the batch script ran to its end"
  e2e_wait 30 "[ -z \"\$(e2e_node_names $j)\" ]"; ok $? "step_signals: Node gone at the job's end"
  rm -f "$done_f"
  e2e_assert_clean "$j" "step_signals"
}

# scontrol update TimeLimit= moves the job's end: the agent re-reads it
# (end_time_check_interval, 2 s here) and cordons when the new end is within
# cordon_before_end (60 s), uncordons when it moves away again.
case_time_limit_update() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:2 --k8s-gpus=1 --time=10 || { ok 1 "time_limit_update: job"; return; }
  local j="$E2E_JOB" node
  node="$(e2e_node_names "$j")"
  cordoned() {  # the Node is unschedulable and carries the job-ending taint
    [ "$(e2e_kubectl get node "$node" -o 'jsonpath={.spec.unschedulable}')" = true ] \
      && e2e_kubectl get node "$node" -o 'jsonpath={.spec.taints}' | grep -q '"slurm-k8s/job-ending"'
  }
  state() { echo "unschedulable=$(e2e_kubectl get node "$node" -o 'jsonpath={.spec.unschedulable}') taints=$(e2e_kubectl get node "$node" -o 'jsonpath={.spec.taints}')"; }
  e2e_wait 20 "grep -q '\[node $node\] Slurm says job $j ends at' '$E2E_AGENTS/$N2/agent.log'"
  ok $? "time_limit_update: the agent read the end of job $j (10 min away)"
  ! cordoned; ok $? "time_limit_update: not cordoned 10 min before the end ($(state))"
  scontrol update jobid="$j" TimeLimit=1; ok $? "scontrol update jobid=$j TimeLimit=1"
  e2e_wait 20 cordoned; ok $? "time_limit_update: cordoned after the shortening ($(state))"
  scontrol update jobid="$j" TimeLimit=10; ok $? "scontrol update jobid=$j TimeLimit=10"
  e2e_wait 20 "! cordoned && [ \"\$(e2e_kubectl get node $node -o 'jsonpath={.spec.unschedulable}')\" != true ]"
  ok $? "time_limit_update: uncordoned after the extension ($(state))"
  e2e_pod "$j" tlu; e2e_pod_running tlu 30
  ok $? "time_limit_update: the scheduler places a new pod on the uncordoned node ($(e2e_pod_field default/tlu '{.spec.nodeName}'))"
  [ "$(sk_job_state "$j")" = RUNNING ]; ok $? "time_limit_update: job $j still RUNNING"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "time_limit_update"
}

# Readers for the suspension cases: a Node's Ready status and reason, its
# cordon (unschedulable and the taint keys), a pod's Ready status and
# reason, a process's state letter (T: stopped).
node_ready_of() { e2e_kubectl get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}'; }
node_cordon_of() { echo "$(e2e_kubectl get node "$1" -o 'jsonpath={.spec.unschedulable} {.spec.taints[*].key}')"; }
pod_ready_of() { e2e_pod_field "$1" '{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}'; }
proc_state_of() { sed -E 's/^.*\) (.).*$/\1/' "/proc/$1/stat" 2>/dev/null; }

# scontrol suspend: within the agent's job state check (job_state_check_interval,
# 2 s here) the job's Node is Ready=False with the reason JobSuspended,
# cordoned (slurm-k8s/job-suspended), an Event says so, the pod is Ready=False
# (JobSuspended) and its processes are stopped like the job's own; scontrol
# resume undoes it all (processes run, Node Ready and schedulable, pod Ready).
# A job cancelled while suspended still stops its pod gracefully (SIGTERM
# seen, final status JobCancelled) and leaves nothing.
case_suspend() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "suspend: job"; return; }
  local j="$E2E_JOB" node pid
  node="$(e2e_node_names "$j")"
  NODE="$node" e2e_pod "$j" sp1; e2e_pod_running sp1 30; ok $? "suspend: pod sp1 Running and Ready"
  rl_follow_log default/sp1
  pid="$(e2e_pod_pids "$j" sp1)"
  [ -n "$pid" ] && [ "$(proc_state_of "$pid")" != T ]; ok $? "suspend: the pod's process $pid runs ($(proc_state_of "$pid"))"

  scontrol suspend "$j"; ok $? "scontrol suspend $j"
  e2e_wait 30 "[ \"\$(node_ready_of $node)\" = 'False JobSuspended' ]"
  ok $? "suspend: the Node is Ready=False, reason JobSuspended ($(node_ready_of "$node"))"
  e2e_wait 20 "[[ \"\$(node_cordon_of $node)\" == 'true '*slurm-k8s/job-suspended* ]]"
  ok $? "suspend: the Node is cordoned with the slurm-k8s/job-suspended taint ($(node_cordon_of "$node"))"
  e2e_wait 20 "[ \"\$(pod_ready_of default/sp1)\" = 'False JobSuspended' ]"
  ok $? "suspend: the pod is Ready=False, reason JobSuspended ($(pod_ready_of default/sp1))"
  e2e_wait 10 "[ \"\$(proc_state_of $pid)\" = T ]"; ok $? "suspend: the pod's process is stopped ($(proc_state_of "$pid"))"
  e2e_kubectl get events -n default --field-selector involvedObject.kind=Node,involvedObject.name="$node" \
    -o jsonpath='{range .items[*]}{.reason} {.type}: {.message}{"\n"}{end}' >"$E2E_D/podlogs/tmp" 2>&1
  grep -q "^JobSuspended Warning: Slurm job $j is suspended" "$E2E_D/podlogs/tmp"
  ok $? "suspend: the Node's Event says JobSuspended: $(grep JobSuspended "$E2E_D/podlogs/tmp" | head -n1)"
  [ "$(sk_job_state "$j")" = SUSPENDED ]; ok $? "suspend: Slurm says $(sk_job_state "$j")"

  scontrol resume "$j"; ok $? "scontrol resume $j"
  e2e_wait 30 "[ \"\$(node_ready_of $node)\" = 'True KubeletReady' ]"
  ok $? "resume: the Node is Ready again ($(node_ready_of "$node"))"
  e2e_wait 20 "[[ \"\$(node_cordon_of $node)\" != *job-suspended* && \"\$(node_cordon_of $node)\" != true* ]]"
  ok $? "resume: the Node is uncordoned ($(node_cordon_of "$node"))"
  e2e_wait 10 "[ \"\$(proc_state_of $pid)\" != T ]"; ok $? "resume: the pod's process runs again ($(proc_state_of "$pid"))"
  e2e_wait 20 "[ \"\$(pod_ready_of default/sp1)\" = 'True ' ]"; ok $? "resume: the pod is Ready again, no reason left ($(pod_ready_of default/sp1))"
  [ "$(e2e_pod_field default/sp1 '{.status.containerStatuses[0].restartCount}')" = 0 ]
  ok $? "resume: the pod was not restarted (restartCount $(e2e_pod_field default/sp1 '{.status.containerStatuses[0].restartCount}'))"

  scontrol suspend "$j"
  e2e_wait 30 "[ \"\$(proc_state_of $pid)\" = T ]"; ok $? "suspend again: the pod's process is stopped"
  scancel "$j"; sk_wait_gone "$j" 60
  e2e_wait 30 "[ -z \"\$(e2e_node_names $j)\" ]"; ok $? "suspend: scancel of the suspended job removes its Node"
  check_job_end_pod "$j" sp1 "suspend" JobCancelled
  e2e_assert_clean "$j" "suspend"
}

# --k8s-drain-before: once the job's end comes within it (here through
# scontrol update TimeLimit=, which the agent re-reads every 2 s), the
# running pod gets SIGTERM with its grace period and ends Failed/Terminated
# with a DisruptionTarget condition while the job still runs, the node is
# cordoned, and a pod bound by name afterwards is refused (NodeShutdown);
# the end moving away lets pods run there again; scancel then ends the job
# (the running pod's final status JobCancelled, the drained one's stays
# Terminated) and nothing is left.
case_drain_before() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:2 --k8s-gpus=1 --time=30 --k8s-drain-before=600 \
    || { ok 1 "drain_before: job"; return; }
  local j="$E2E_JOB" node st
  node="$(e2e_node_names "$j")"
  e2e_wait 20 "grep -q '\[node $node\] Slurm says job $j ends at' '$E2E_AGENTS/$N2/agent.log'"
  ok $? "drain_before: the agent read the end of job $j (30 min away; drain 10 min before)"
  NODE="$node" e2e_pod "$j" dr1; e2e_pod_running dr1 30; ok $? "drain_before: pod dr1 Running"
  rl_follow_log default/dr1
  scontrol update jobid="$j" TimeLimit=10; ok $? "scontrol update jobid=$j TimeLimit=10"
  e2e_wait 30 "[ \"\$(e2e_pod_field default/dr1 '{.status.reason}')\" = Terminated ]"
  st="$(e2e_kubectl get pod dr1 -o json 2>&1)"
  ST="$st" J="$j" python3 -c 'import json, os, sys
p = json.loads(os.environ["ST"]); s = p["status"]
dt = [c for c in s.get("conditions", []) if c["type"] == "DisruptionTarget"]
t = [(c.get("state") or {}).get("terminated") or {} for c in s.get("containerStatuses", [])]
print(s.get("phase"), s.get("reason"), s.get("message"), dt, [x.get("exitCode") for x in t])
sys.exit(0 if s.get("phase") == "Failed" and "Slurm job " + os.environ["J"] in s.get("message", "")
         and dt and dt[0]["status"] == "True" and dt[0]["reason"] == "TerminationByKubelet"
         and t and all(x.get("exitCode") == 0 for x in t) else 1)' >"$E2E_D/podlogs/tmp" 2>&1
  ok $? "drain_before: dr1 stopped ahead of the end: Failed/Terminated, DisruptionTarget, exit 0: $(cat "$E2E_D/podlogs/tmp")"
  [ "$(sk_job_state "$j")" = RUNNING ]; ok $? "drain_before: job $j still RUNNING ($(sk_job_state "$j"))"
  e2e_wait 10 "grep -q 'received signal 15' <(rl_followed_log default/dr1)"
  ok $? "drain_before: dr1 got SIGTERM (its log)"
  [ "$(e2e_kubectl get node "$node" -o 'jsonpath={.spec.unschedulable}')" = true ]
  ok $? "drain_before: the node is cordoned"
  GPUS=0 NODE="$node" e2e_pod "$j" dr2
  e2e_wait 20 "[ \"\$(e2e_pod_phase dr2)\" = Failed ]"
  [ "$(e2e_pod_field default/dr2 '{.status.reason}')" = NodeShutdown ] && [ -z "$(e2e_pod_pids "$j" dr2)" ]
  ok $? "drain_before: a pod bound afterwards is refused: $(e2e_pod_field default/dr2 '{.status.phase} {.status.reason}: {.status.message}')"
  scontrol update jobid="$j" TimeLimit=30; ok $? "scontrol update jobid=$j TimeLimit=30"
  e2e_wait 20 "grep -q '\[node $node\] the job.s end moved away: pods start here again' '$E2E_AGENTS/$N2/agent.log'"
  ok $? "drain_before: the agent saw the end move away"
  GPUS=0 NODE="$node" e2e_pod "$j" dr3; e2e_pod_running dr3 30
  ok $? "drain_before: a new pod runs again ($(e2e_pod_field default/dr3 '{.status.phase}'))"
  rl_follow_log default/dr3
  e2e_end_job "$j"
  rl_stop_log_followers
  check_job_end_pod "$j" dr3 drain_before JobCancelled
  st="$(python3 "$E2E_TOP/tests/e2e/watch.py" final "$E2E_D/watch.jsonl" default/dr1)"
  [ "$(ST="$st" python3 -c 'import json, os; print(json.loads(os.environ["ST"] or "{}").get("reason"))')" = Terminated ]
  ok $? "drain_before: dr1's last status before its deletion is still Terminated"
  e2e_assert_clean "$j" "drain_before"
}

# scontrol requeue: the job ends on its nodes (its pods' final status says
# Requeued, as does the Node's Event) and runs again under the same id; its
# virtual node comes back as a new Node (new uid) under the same name, and
# pods run there again.
case_requeue() {
  e2e_job 1 -N1 -w $N1 --gres=gpu:2 --k8s-gpus=1 --requeue || { ok 1 "requeue: job"; return; }
  local j="$E2E_JOB" node uid1 uid2
  node="$(e2e_node_names "$j")"
  uid1="$(e2e_kubectl get node "$node" -o 'jsonpath={.metadata.uid}')"
  e2e_pod "$j" rq1; e2e_pod_running rq1 30; ok $? "requeue: pod rq1 Running on $node"
  rl_follow_log default/rq1
  scontrol requeue "$j"; ok $? "scontrol requeue $j"
  e2e_wait 40 "[ -z \"\$(e2e_kubectl get pods -o name 2>/dev/null | grep -x pod/rq1)\" ]"
  ok $? "requeue: the pod is stopped and deleted"
  rl_stop_log_followers
  check_job_end_pod "$j" rq1 requeue Requeued
  # Slurm holds a requeued batch job back for cred_expire + 1 s (its begin
  # time; AuthInfo's cred_expire is 30 s in tests/slurm/cluster.sh, 120 s by
  # default): until then slurmd still holds the job's credential and would
  # not run the prolog for the same job id again (with StartTime=now the
  # re-run skipped the prolog: no registration). So the test waits it out.
  sk_wait_state "$j" PENDING 30; ok $? "requeue: job $j PENDING again"
  sk_wait_state "$j" RUNNING 240; ok $? "requeue: job $j runs again ($(sk_job_state "$j"))"
  e2e_wait 30 "[ \"\$(e2e_ready_nodes $j)\" = 1 ]"
  uid2="$(e2e_kubectl get node "$node" -o 'jsonpath={.metadata.uid}' 2>/dev/null)"
  [ -n "$uid2" ] && [ "$uid2" != "$uid1" ]
  ok $? "requeue: its virtual node $node is back and Ready, a new Node (uid $uid1 -> $uid2)"
  e2e_pod "$j" rq2; e2e_pod_running rq2 30; ok $? "requeue: a new pod runs on it"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "requeue"
}

# salloc --k8s-*: an interactive allocation lends like sbatch (its node is
# registered while salloc's command runs; its srun steps see SLURM_K8S_*);
# srun inside it refuses a --k8s-* flag of its own rather than ignoring it
# (the job's own flags, seen through the environment, pass); the job ends
# with salloc's command, and the pods say JobCompleted.
case_salloc() {
  local out="$SK_JOBS_DIR/salloc.out" done_f="$SK_JOBS_DIR/salloc.done" pid j node
  rm -f "$out" "$done_f"
  sk_as_user timeout 180 salloc -N1 -w $N2 --gres=gpu:2 --k8s-gpus=1 bash -c "
    echo job=\$SLURM_JOB_ID
    srun -N1 printenv SLURM_K8S_NODE SLURM_K8S_GPUS | sed 's/^/step: /'
    srun -N1 --k8s-gpus=1 true; echo same_flag_rc=\$?
    srun -N1 --k8s-gpus=2 true 2>&1 | sed 's/^/refused: /'; echo other_flag_rc=\${PIPESTATUS[0]}
    echo ready
    while [ ! -e '$done_f' ]; do sleep 0.2; done" >"$out" 2>&1 &
  pid=$!
  e2e_wait 60 "grep -q '^ready' '$out'"; ok $? "salloc: the allocation's command ran ($(tr '\n' ' ' <"$out" | cut -c1-300))"
  j="$(sed -n 's/^job=//p' "$out")"
  [ "$(e2e_ready_nodes "$j")" = 1 ]; ok $? "salloc: job $j has its virtual node Ready while salloc runs"
  node="$(e2e_node_names "$j")"
  grep -q "^step: $node\$" "$out"; ok $? "salloc: its srun step sees SLURM_K8S_NODE=$node"
  grep -q '^same_flag_rc=0' "$out"; ok $? "salloc: srun with the job's own --k8s-gpus=1 runs"
  grep -q '^other_flag_rc=[1-9]' "$out" && grep -q "refused: .*--k8s-gpus=2: --k8s-\* flags lend resources of the whole job" "$out"
  ok $? "salloc: srun --k8s-gpus=2 inside the allocation is refused, naming the flag ($(grep '^refused' "$out" | head -n1 | cut -c1-200))"
  e2e_pod "$j" sa1; e2e_pod_running sa1 30; ok $? "salloc: a pod runs on the allocation's node"
  rl_follow_log default/sa1
  touch "$done_f"
  wait "$pid"; ok $? "salloc: salloc exited 0 with its command"
  sk_wait_gone "$j" 60; e2e_wait 30 "[ -z \"\$(e2e_node_names $j)\" ]"; ok $? "salloc: the Node is gone at the allocation's end"
  rl_stop_log_followers
  check_job_end_pod "$j" sa1 salloc JobCompleted
  rm -f "$done_f"
  e2e_assert_clean "$j" "salloc"
}

# Every form of a GPU request (--gres with and without the type,
# --gpus-per-node, --gpus, --gpus-per-task) lends the last N of the job's
# GPUs on the node; the Node says how many (nvidia.com/gpu.count, and
# allocatable) and which model, from the GPUs' Slurm type
# (nvidia.com/gpu.product, here gres.conf Type=a100), and the batch step
# gets the lent index.
case_gpu_forms() {
  local form j node got out
  for form in "--gres=gpu:a100:3" "--gres=gpu:3" "--gpus-per-node=3" "--gpus=3" "--gpus-per-task=3 -n1"; do
    # shellcheck disable=SC2086  # $form is two words for --gpus-per-task
    e2e_job 1 -N1 -w $N1 $form --k8s-gpus=1 || { ok 1 "gpu_forms: $form: job"; continue; }
    j="$E2E_JOB"
    node="$(e2e_node_names "$j")"
    got="$(e2e_kubectl get node "$node" -o 'jsonpath={.metadata.labels.nvidia\.com/gpu\.count} {.metadata.labels.nvidia\.com/gpu\.product} {.status.allocatable.nvidia\.com/gpu}')"
    [ "$got" = "1 ${GPU_TYPE} 1" ]
    ok $? "gpu_forms: $form --k8s-gpus=1: Node gpu.count, gpu.product, allocatable = '$got'"
    out="$SK_JOBS_DIR/e2e-$j.out"
    e2e_wait 10 "grep -q '^node=' '$out'"
    grep -Eq "^node=$node gpus=[0-9]+ error=\$" "$out"
    ok $? "gpu_forms: $form: the batch step gets one lent GPU ($(head -n1 "$out"))"
    e2e_end_job "$j"
    e2e_assert_clean "$j" "gpu_forms $form"
  done
}

# The Node offers the job's share of its Slurm node: the CPUs and memory
# the job holds there (here -c 3 --mem=1500 of a 4-CPU node; the test
# machines have fewer cores, so the host's count cannot pass for it), or the
# --k8s-cpus/--k8s-mem part of it; ephemeral-storage is the pods' file
# system. Lending more than the job holds is refused in the prolog with the
# reason in the job's SLURM_K8S_ERROR, and no Node appears.
case_node_share() {
  local j node got out
  e2e_job 1 -N1 -w $N3 -n1 -c 3 --mem=1500 --gres=gpu:1 --k8s-gpus=1 || { ok 1 "node_share: job"; return; }
  j="$E2E_JOB"; node="$(e2e_node_names "$j")"
  got="$(e2e_kubectl get node "$node" -o 'jsonpath={.status.capacity.cpu} {.status.capacity.memory} {.status.allocatable.cpu} {.status.allocatable.memory}')"
  [ "$got" = "3 1536000Ki 3 1536000Ki" ]; ok $? "node_share: -c 3 --mem=1500: the Node offers cpu and memory '$got'"
  got="$(e2e_kubectl get node "$node" -o 'jsonpath={.status.capacity.ephemeral-storage}')"
  local want_kib
  want_kib="$(( $(stat -f -c '%b * %S' "$E2E_AGENTS/$N3/shim") / 1024 ))"
  [ "$got" = "${want_kib}Ki" ]; ok $? "node_share: ephemeral-storage is the pods' file system's size ($got, df: ${want_kib}Ki)"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "node_share"

  e2e_job 1 -N1 -w $N3 -n1 -c 3 --mem=1500 --gres=gpu:1 --k8s-gpus=1 --k8s-cpus=1 --k8s-mem=500M \
    || { ok 1 "node_share: job with --k8s-cpus"; return; }
  j="$E2E_JOB"; node="$(e2e_node_names "$j")"
  got="$(e2e_kubectl get node "$node" -o 'jsonpath={.status.capacity.cpu} {.status.capacity.memory}')"
  [ "$got" = "1 512000Ki" ]; ok $? "node_share: --k8s-cpus=1 --k8s-mem=500M: the Node offers '$got'"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "node_share"

  e2e_job 0 -N1 -w $N3 -n1 -c 3 --gres=gpu:1 --k8s-gpus=1 --k8s-cpus=4 || { ok 1 "node_share: job over its CPUs"; return; }
  j="$E2E_JOB"; out="$SK_JOBS_DIR/e2e-$j.out"
  e2e_wait 10 "grep -q '^node=' '$out'"
  grep -q "^node= gpus= error=.*--k8s-cpus=4 is more than the 3 CPUs job $j holds on $N3" "$out"
  ok $? "node_share: --k8s-cpus=4 on 3 CPUs is refused with the reason: $(head -n1 "$out")"
  [ -z "$(e2e_node_names "$j")" ]; ok $? "node_share: no Node for the refused job"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "node_share"
}

# Preemption (PreemptType=preempt/partition_prio, PreemptMode=CANCEL): a
# job of the higher-tier partition "urgent" takes the GPUs of a lending job;
# that job ends PREEMPTED, its pod's final status and the Node's Event say
# Preempted, the urgent job runs, and nothing of the first is left.
case_preempt() {
  e2e_job 1 -N1 -w $N1 --gres=gpu:4 --k8s-gpus=2 || { ok 1 "preempt: job"; return; }
  local j="$E2E_JOB" j2 s
  e2e_pod "$j" pe1; e2e_pod_running pe1 30; ok $? "preempt: pod pe1 Running"
  rl_follow_log default/pe1
  s="$(e2e_script urgent 'sleep 600')"
  j2="$(sk_submit_as_user -o /dev/null -p urgent -N1 -w $N1 --gres=gpu:4 "$s")"
  ok $? "preempt: urgent job $j2 submitted to $N1"
  sk_wait_state "$j" PREEMPTED 60; ok $? "preempt: job $j ended $(sk_job_state "$j")"
  e2e_wait 30 "[ -z \"\$(e2e_node_names $j)\" ]"; ok $? "preempt: its Node is gone"
  rl_stop_log_followers
  check_job_end_pod "$j" pe1 preempt Preempted
  sk_wait_state "$j2" RUNNING 60; ok $? "preempt: the urgent job $j2 runs ($(sk_job_state "$j2"))"
  scancel "$j2"; sk_wait_gone "$j2" 60
  e2e_assert_clean "$j" "preempt"
}

# Preemption that requeues (the partition "requeue" has PreemptMode=REQUEUE):
# the preempted job's pods end with the final status Requeued, as do a
# scontrol requeue's, its Node goes, the urgent job runs; the requeued job is
# PENDING under its id and, cancelled there, leaves nothing.
case_preempt_requeue() {
  e2e_job 1 -p requeue --requeue -N1 -w $N1 --gres=gpu:4 --k8s-gpus=2 || { ok 1 "preempt_requeue: job"; return; }
  local j="$E2E_JOB" j2 s
  e2e_pod "$j" pq1; e2e_pod_running pq1 30; ok $? "preempt_requeue: pod pq1 Running"
  rl_follow_log default/pq1
  s="$(e2e_script urgent 'sleep 600')"
  j2="$(sk_submit_as_user -o /dev/null -p urgent -N1 -w $N1 --gres=gpu:4 "$s")"
  ok $? "preempt_requeue: urgent job $j2 submitted to $N1"
  sk_wait_state "$j2" RUNNING 60; ok $? "preempt_requeue: the urgent job $j2 runs ($(sk_job_state "$j2"))"
  e2e_wait 30 "[ -z \"\$(e2e_node_names $j)\" ]"; ok $? "preempt_requeue: the preempted job's Node is gone"
  rl_stop_log_followers
  check_job_end_pod "$j" pq1 preempt_requeue Requeued
  sk_wait_state "$j" PENDING 30; ok $? "preempt_requeue: job $j is requeued ($(sk_job_state "$j"))"
  scancel "$j2" "$j"; sk_wait_gone "$j2" 60; sk_wait_gone "$j" 60
  e2e_assert_clean "$j" "preempt_requeue"
}

# Preemption that suspends (partition "suspend", PreemptMode=SUSPEND with
# GANG): the urgent job takes the CPUs the lending job held (a suspended
# job keeps its GRES, so the urgent one asks for CPUs only), Slurm suspends
# the lending job and the agent follows as for scontrol suspend: Node
# Ready=False JobSuspended and cordoned, the pod stopped and unready. When
# the urgent job ends GANG resumes the lending job and all is undone; the
# pod was not restarted. scancel then ends it as usual.
case_preempt_suspend() {
  e2e_job 1 -p suspend -N1 -w $N1 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "preempt_suspend: job"; return; }
  local j="$E2E_JOB" j2 s node pid
  node="$(e2e_node_names "$j")"
  NODE="$node" e2e_pod "$j" ps1; e2e_pod_running ps1 30; ok $? "preempt_suspend: pod ps1 Running and Ready"
  rl_follow_log default/ps1
  pid="$(e2e_pod_pids "$j" ps1)"
  [ -n "$pid" ] && [ "$(proc_state_of "$pid")" != T ]; ok $? "preempt_suspend: the pod's process $pid runs ($(proc_state_of "$pid"))"

  s="$(e2e_script urgent 'sleep 600')"
  j2="$(sk_submit_as_user -o /dev/null -p urgent -N1 -w $N1 -n "${CPUS_PER_NODE:-4}" "$s")"
  ok $? "preempt_suspend: urgent job $j2 submitted to $N1 for all its CPUs"
  sk_wait_state "$j2" RUNNING 60; ok $? "preempt_suspend: the urgent job $j2 runs ($(sk_job_state "$j2"))"
  [ "$(sk_job_state "$j")" = SUSPENDED ]; ok $? "preempt_suspend: Slurm suspended job $j ($(sk_job_state "$j"))"
  e2e_wait 30 "[ \"\$(node_ready_of $node)\" = 'False JobSuspended' ]"
  ok $? "preempt_suspend: the Node is Ready=False, reason JobSuspended ($(node_ready_of "$node"))"
  e2e_wait 20 "[[ \"\$(node_cordon_of $node)\" == 'true '*slurm-k8s/job-suspended* ]]"
  ok $? "preempt_suspend: the Node is cordoned ($(node_cordon_of "$node"))"
  e2e_wait 20 "[ \"\$(pod_ready_of default/ps1)\" = 'False JobSuspended' ]"
  ok $? "preempt_suspend: the pod is Ready=False, reason JobSuspended ($(pod_ready_of default/ps1))"
  e2e_wait 10 "[ \"\$(proc_state_of $pid)\" = T ]"; ok $? "preempt_suspend: the pod's process is stopped ($(proc_state_of "$pid"))"

  scancel "$j2"; sk_wait_gone "$j2" 60
  sk_wait_state "$j" RUNNING 60; ok $? "preempt_suspend: GANG resumed job $j once $j2 ended ($(sk_job_state "$j"))"
  e2e_wait 30 "[ \"\$(node_ready_of $node)\" = 'True KubeletReady' ]"
  ok $? "preempt_suspend: the Node is Ready again ($(node_ready_of "$node"))"
  e2e_wait 20 "[[ \"\$(node_cordon_of $node)\" != *job-suspended* && \"\$(node_cordon_of $node)\" != true* ]]"
  ok $? "preempt_suspend: the Node is uncordoned ($(node_cordon_of "$node"))"
  e2e_wait 10 "[ \"\$(proc_state_of $pid)\" != T ]"; ok $? "preempt_suspend: the pod's process runs again ($(proc_state_of "$pid"))"
  e2e_wait 20 "[ \"\$(pod_ready_of default/ps1)\" = 'True ' ]"; ok $? "preempt_suspend: the pod is Ready again ($(pod_ready_of default/ps1))"
  [ "$(e2e_pod_field default/ps1 '{.status.containerStatuses[0].restartCount}')" = 0 ]
  ok $? "preempt_suspend: the pod was not restarted"

  scancel "$j"; sk_wait_gone "$j" 60
  e2e_wait 30 "[ -z \"\$(e2e_node_names $j)\" ]"; ok $? "preempt_suspend: scancel removes the Node"
  rl_stop_log_followers
  check_job_end_pod "$j" ps1 preempt_suspend JobCancelled
  e2e_assert_clean "$j" "preempt_suspend"
}

# Job arrays and heterogeneous jobs: each array task and each het component
# lends under its own job id (slurm-k8s/job-id, the Node's name, its taint);
# its Node also names the whole array (slurm-k8s/array-job-id,
# array-task-id) or het job (slurm-k8s/het-job-id, het-component), which a
# pod selects on (with a toleration of the slurm-k8s/job key) to run on any
# of them.
array_het_pod() {  # array_het_pod NAME LABEL VALUE
  e2e_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  nodeSelector: {slurm-k8s/$2: "$3"}
  tolerations: [{key: slurm-k8s/job, operator: Exists, effect: NoSchedule}]
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: e2e/sleeper:1
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait \$!; done", "e2e-pod-$3-$1"]
EOF
}

case_array_het() {
  local s a h got ids j
  s="$(e2e_script sleeper 'sleep 600')"
  a="$(sk_submit_as_user -o /dev/null --array=0-1 -N1 -w $N2 --gres=gpu:1 --k8s-gpus=1 "$s")"
  ok $? "array_het: array job $a submitted (tasks 0-1)"
  e2e_wait 30 "[ \"\$(e2e_ready_nodes_by array-job-id $a)\" = 2 ]"
  got="$(e2e_kubectl get nodes -l "slurm-k8s/array-job-id=$a" -o 'jsonpath={range .items[*]}{.metadata.labels.slurm-k8s/array-task-id}:{.metadata.labels.slurm-k8s/job-id}:{.metadata.name} {end}')"
  ids="$(tr ' ' '\n' <<<"$got" | grep . | cut -d: -f1 | sort | paste -sd,)"
  [ "$ids" = "0,1" ] && [ "$(tr ' ' '\n' <<<"$got" | grep . | cut -d: -f2 | sort -u | grep -c .)" = 2 ] \
    && grep -q ":$a:slurm-$N2-$a " <<<"$got"
  # (Slurm gives the array's own id to one of the tasks, not always task 0.)
  ok $? "array_het: 2 Ready Nodes labelled array-job-id=$a, task ids 0 and 1, each its own job-id and name ($got)"
  array_het_pod ah1 array-job-id "$a"; e2e_pod_running ah1 30
  ok $? "array_het: a pod selecting slurm-k8s/array-job-id=$a runs ($(e2e_pod_field default/ah1 '{.spec.nodeName}'))"
  scancel "$a"
  e2e_wait 60 "[ -z \"\$(e2e_kubectl get nodes -l slurm-k8s/array-job-id=$a -o name)\" ]"
  ok $? "array_het: scancel $a removes the Nodes of both tasks"
  for j in $(tr ' ' '\n' <<<"$got" | grep . | cut -d: -f2); do e2e_assert_clean "$j" "array_het: task job $j"; done

  h="$(sk_submit_as_user -o /dev/null -N1 -w $N1 --gres=gpu:1 --k8s-gpus=1 : -N1 -w $N3 --gres=gpu:1 --k8s-gpus=1 "$s")"
  ok $? "array_het: het job $h submitted (2 components)"
  e2e_wait 30 "[ \"\$(e2e_ready_nodes_by het-job-id $h)\" = 2 ]"
  # Read until both labels answer: one read of a loaded API server may fail.
  het_labels() {
    e2e_kubectl get nodes -l "slurm-k8s/het-job-id=$h" -o 'jsonpath={range .items[*]}{.metadata.labels.slurm-k8s/het-component}:{.metadata.labels.slurm-k8s/job-id}:{.metadata.labels.slurm-k8s/slurm-node} {end}' 2>&1
  }
  e2e_wait 20 "het_labels | grep -q '0:$h:$N1' && het_labels | grep -q '1:$((h + 1)):$N3'"
  got="$(het_labels)"
  grep -q "0:$h:$N1" <<<"$got" && grep -q "1:$((h + 1)):$N3" <<<"$got"
  ok $? "array_het: 2 Ready Nodes labelled het-job-id=$h: component 0 (job $h) on $N1, component 1 (job $((h + 1))) on $N3 ($got)"
  array_het_pod ah2 het-job-id "$h"; e2e_pod_running ah2 30
  ok $? "array_het: a pod selecting slurm-k8s/het-job-id=$h runs ($(e2e_pod_field default/ah2 '{.spec.nodeName}'))"
  scancel "$h"
  e2e_wait 60 "[ -z \"\$(e2e_kubectl get nodes -l slurm-k8s/het-job-id=$h -o name)\" ]"
  ok $? "array_het: scancel $h removes the Nodes of both components"
  e2e_assert_clean "$h" "array_het: het job $h"; e2e_assert_clean "$((h + 1))" "array_het: component job $((h + 1))"
}

# An agent that dies with its node (here: killed -9, then Slurm declares the
# node failed: scontrol sets it DOWN) cannot end its virtual nodes, and
# their Leases stop being renewed; another agent of the cluster (n1:
# gc_failed_nodes = true) deletes each dead node's Node, its Lease and its
# pods once the Lease is stale (lease_duration + 2 renewals: 30 s) and Slurm
# says the job no longer holds the node; the pods' last status and an Event
# on the Node say why. Two jobs on the failed node pay that wait once: one
# with --no-requeue ends NODE_FAIL; one with --requeue goes back to PENDING
# under its id (no allocation: its Node is a leftover too, said Requeued),
# and is then cancelled while it waits. The node is resumed for the cases
# after it.
case_node_fail() {
  e2e_job 1 -N1 -w $N3 --no-requeue --gres=gpu:2 --k8s-gpus=1 || { ok 1 "node_fail: job"; return; }
  local j="$E2E_JOB" node t0
  node="$(e2e_node_names "$j")"
  e2e_job 1 -N1 -w $N3 --requeue --gres=gpu:2 --k8s-gpus=1 || { ok 1 "node_fail: --requeue job"; return; }
  local jr="$E2E_JOB" node_r
  node_r="$(e2e_node_names "$jr")"
  e2e_pod "$j" nf1; e2e_pod "$jr" nf2
  e2e_pod_running nf1 30 && e2e_pod_running nf2 30; ok $? "node_fail: pods nf1 on $node and nf2 on $node_r Running"
  e2e_agent_stop 3 KILL; ok $? "node_fail: agent $N3 killed -9"
  t0=$SECONDS
  # Slurm declares the node failed: the --no-requeue job ends NODE_FAIL,
  # the --requeue one waits to run again. The node is drained first so that
  # it stays out of service as a dead node would: n3's slurmd still answers,
  # and with the cluster's ReturnToService=2 a node that is only DOWN is
  # back at its slurmd's next answer (40 ms), where the requeued job runs
  # again once its wait (the cluster's cred_expire, 30 s) is over. DOWN keeps
  # the drain flag.
  scontrol update NodeName=$N3 State=DRAIN Reason=e2e-node-fail \
    && scontrol update NodeName=$N3 State=DOWN Reason=e2e-node-fail
  ok $? "node_fail: Slurm node $N3 set DOWN ($(sinfo -h -n $N3 -o %T))"
  sk_wait_state "$j" NODE_FAIL 90
  ok $? "node_fail: job $j ended without its agent ($(sk_job_state "$j"))"
  sk_wait_state "$jr" PENDING 90
  ok $? "node_fail: --requeue job $jr requeued: $(sk_job_state "$jr") under its id"
  local gone="[ -z \"\$(e2e_kubectl get pods -o name 2>/dev/null | grep -xE 'pod/nf[12]')\" ]"
  for x in "$j" "$jr"; do
    gone+=" && [ -z \"\$(e2e_node_names $x)\" ] && [ -z \"\$(e2e_kubectl get leases -n kube-node-lease -o name 2>/dev/null | grep -- '-$x\$')\" ]"
  done
  e2e_wait 150 "$gone"
  ok $? "node_fail: $node and $node_r, their Leases and pods nf1, nf2 deleted $((SECONDS - t0)) s after the node failed"
  for x in "$node" "$node_r"; do
    grep -q "\[node $x\] gc: Slurm node $N3 renewed nothing for" "$E2E_AGENTS/$N1/agent.log"
    ok $? "node_fail: $x by agent $N1's collection of failed nodes ($(grep -o "\[node $x\] gc: Slurm node $N3.*" "$E2E_AGENTS/$N1/agent.log" | head -n1))"
  done
  # What Slurm says of the job's end (NODE_FAIL; waiting again: Requeued) is
  # the pod's last status before its delete, and the Node's Event.
  local st p pn pj pw want
  for p in "nf1 $j NodeFail" "nf2 $jr Requeued"; do
    read -r pn pj pw <<<"$p"
    st="$(python3 "$E2E_TOP/tests/e2e/watch.py" final "$E2E_D/watch.jsonl" "default/$pn" | python3 -c '
import json, sys
s = json.loads(sys.stdin.read() or "{}")
t = ((s.get("containerStatuses") or [{}])[0].get("state") or {}).get("terminated") or {}
print(s.get("phase"), s.get("reason"), t.get("reason"), t.get("exitCode"))')"
    want="Failed $pw ContainerStatusUnknown 137"
    [ "$st" = "$want" ]
    ok $? "node_fail: pod $pn's last status before its deletion: $st (want $want)"
    check_job_end_event "$pj" "node_fail" "$pw"
  done
  scancel "$jr"; sk_wait_state "$jr" CANCELLED 30; ok $? "node_fail: the requeued job $jr cancelled while it waits"
  scontrol update NodeName=$N3 State=RESUME
  # Back and answering: "idle*" (not responding) until slurmctld's next ping
  # of the node, which the next cases' jobs would wait for.
  e2e_wait 60 "sinfo -h -n $N3 -o %T | grep -qxE 'idle|mixed|allocated'"; ok $? "node_fail: Slurm node $N3 back ($(sinfo -h -n $N3 -o %T))"
  e2e_agent_start 3; ok $? "node_fail: agent $N3 back"
  e2e_assert_clean "$j" "node_fail"
  e2e_assert_clean "$jr" "node_fail: requeued job"
}

case_slurmd_restart() {
  e2e_job 1 -N1 -w $N3 --gres=gpu:2 --k8s-gpus=1 || { ok 1 "slurmd_restart: job"; return; }
  local j="$E2E_JOB" pid
  e2e_pod "$j" r1; e2e_pod_running r1 30; ok $? "slurmd_restart: pod Running"
  pid="$(e2e_pod_pids "$j" r1)"
  "$E2E_CLUSTER" restart-slurmd $N3 >/dev/null 2>&1; ok $? "slurmd $N3 restarted"
  sleep 2
  [ "$(sk_job_state "$j")" = RUNNING ] && [ "$(e2e_pod_pids "$j" r1)" = "$pid" ] && [ "$(e2e_pod_phase r1)" = Running ] \
    && [ "$(e2e_ready_nodes "$j")" = 1 ]
  ok $? "after the slurmd restart: job RUNNING, node Ready, same pod process ($pid) Running"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "slurmd_restart"
}

case_agent_kill() {
  e2e_job 1 -N1 -w $N1 --gres=gpu:4 --k8s-gpus=2 || { ok 1 "agent_kill: job"; return; }
  local j="$E2E_JOB" pid node ip nets
  node="$(e2e_node_names "$j")"
  # k1 holds a memory volume: the agent's tmpfs outlives the agent, is
  # neither mounted again nor lost, and goes with the job.
  EXTRA_SPEC='    volumeMounts: [{name: shm, mountPath: /dev/shm}]
  volumes: [{name: shm, emptyDir: {medium: Memory, sizeLimit: 8Mi}}]' e2e_pod "$j" k1
  e2e_pod_running k1 30; ok $? "agent_kill: pod Running"
  pid="$(e2e_pod_pids "$j" k1)"
  ip="$(e2e_pod_field default/k1 '{.status.podIP}')"
  e2e_agent_stop 1 KILL
  sleep 2
  [ "$(e2e_pod_pids "$j" k1)" = "$pid" ]; ok $? "agent killed -9: the pod process ($pid) keeps running"
  e2e_agent_start 1; ok $? "agent $N1 restarted"
  # Re-adopted: the shim re-attaches, the pod is neither duplicated nor lost.
  e2e_wait 20 "grep -q 're-attached' '$E2E_RUNDIR/job_${j}_$N1.json.shim.log' 2>/dev/null || grep -q 'shim attached' <(tail -n 50 '$E2E_AGENTS/$N1/agent.log')"
  sleep 2
  [ "$(e2e_pod_pids "$j" k1)" = "$pid" ] && [ "$(e2e_pod_phase k1)" = Running ] \
    && [ "$(e2e_pod_field default/k1 '{.status.containerStatuses[0].restartCount}')" = 0 ]
  ok $? "after the restart: same process $pid, pod Running, restartCount 0 (pids now: $(e2e_pod_pids "$j" k1))"
  [ "$(grep -c " slurm-k8s:job_${j}_$N1:" /proc/self/mountinfo)" = 1 ]
  ok $? "after the restart: k1's memory volume is mounted once ($(grep " slurm-k8s:job_${j}_" /proc/self/mountinfo | awk '{print $5}' | paste -sd' '))"
  e2e_pod "$j" k2
  e2e_pod_running k2 30; ok $? "a new pod starts after the agent restart"
  # Its own network (SK_NETNS=1): re-adopted, not made twice; k1 keeps its address.
  if [ "$SK_NETNS" = 1 ] && [ "${E2E_POD_NETWORK:-cni}" = cni ]; then
    nets="$(ls "$E2E_AGENTS/$N1/net/pods" | wc -l)"
    [ "$(e2e_pod_field default/k1 '{.status.podIP}')" = "$ip" ] && [ -n "$ip" ] && [ "$nets" = 2 ] \
      && [ "$(e2e_pod_field default/k2 '{.status.podIP}')" != "$ip" ]
    ok $? "after the restart: k1 keeps its address $ip, k2 has its own, two networks held ($nets)"
  fi
  [ "$(e2e_ready_nodes "$j")" = 1 ]; ok $? "node $node Ready after the agent restart"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "agent_kill"
}

# The job's shim killed -9 while the job runs: its pod is Failed (ShimLost)
# and its process stopped; the agent reports the Node NotReady (a ShimDied
# Event) until the job's extern step has started a new shim in the same
# cgroups; that one attaches, the Node is Ready again (ShimAttached) and runs
# new pods; the job ends with nothing left.
case_shim_kill() {
  e2e_job 1 -N1 -w $N2 --gres=gpu:4 --k8s-gpus=2 || { ok 1 "shim_kill: job"; return; }
  local j="$E2E_JOB" spid npid node cg
  node="$(e2e_node_names "$j")"
  RESTART=Never e2e_pod "$j" m1; e2e_pod_running m1 30; ok $? "shim_kill: pod Running"
  spid="$(pgrep -u "$TEST_UID" -f "slurm-k8s-shim --job-id $j ")"
  cg="$(cat "/proc/$spid/cgroup" 2>/dev/null)"
  kill -KILL $spid; ok $? "shim ($spid) killed -9"
  # The pod must not stay "Running" in the API without anything running it.
  e2e_wait 40 "[ \"\$(e2e_pod_phase m1)\" = Failed ] || [ \"\$(e2e_pod_field default/m1 '{.status.containerStatuses[0].restartCount}')\" -ge 1 ] 2>/dev/null"
  ok $? "shim_kill: pod reported Failed or restarted (phase $(e2e_pod_phase m1), reason $(e2e_pod_field default/m1 '{.status.reason}'): $(e2e_pod_field default/m1 '{.status.message}'))"
  e2e_wait 5 "[ -z \"\$(e2e_pod_pids $j m1)\" ]"
  ok $? "shim_kill: the pod's process is stopped, not left orphaned ($(e2e_pod_pids "$j" m1))"
  if [ "$SK_NETNS" = 1 ] && [ "${E2E_POD_NETWORK:-cni}" = cni ]; then
    local m1uid; m1uid="$(e2e_pod_field default/m1 '{.metadata.uid}')"
    e2e_wait 10 "[ -n '$m1uid' ] && [ ! -e '$E2E_AGENTS/$N2/net/pods/$m1uid' ]"
    ok $? "shim_kill: the failed pod's network is let go ($E2E_AGENTS/$N2/net/pods/$m1uid)"
  fi
  node_events() {
    e2e_kubectl get events -n default --field-selector involvedObject.kind=Node,involvedObject.name="$node" \
      -o jsonpath='{range .items[*]}{.reason} {.type}: {.message}{"\n"}{end}' 2>&1
  }
  # The agent reported the node NotReady while no shim ran (the Event
  # stays; the state itself lasts about the keeper's 1 s back-off).
  e2e_wait 20 "node_events | grep -q '^ShimDied Warning: container runtime is down: the job.s shim (pid $spid) died'"
  ok $? "shim_kill: the Node was NotReady, its Event says why: $(node_events | grep ShimDied | head -n1)"
  # The extern step started a new shim, in the dead one's cgroups.
  e2e_wait 20 "npid=\$(pgrep -u $TEST_UID -f 'slurm-k8s-shim --job-id $j ') && [ -n \"\$npid\" ] && [ \"\$npid\" != $spid ]"
  ok $? "shim_kill: the job's extern step started a new shim ($(pgrep -u "$TEST_UID" -f "slurm-k8s-shim --job-id $j "))"
  npid="$(pgrep -u "$TEST_UID" -f "slurm-k8s-shim --job-id $j ")"
  [ -n "$cg" ] && [ "$(cat "/proc/$npid/cgroup" 2>/dev/null)" = "$cg" ]
  ok $? "shim_kill: the new shim is in the dead one's cgroups ($(tr '\n' ' ' <"/proc/$npid/cgroup" 2>/dev/null))"
  e2e_wait 20 "[ \"\$(e2e_ready_nodes $j)\" = 1 ] && node_events | grep -q '^ShimAttached Normal'"
  ok $? "shim_kill: the node is Ready again with the new shim ($(node_events | grep ShimAttached | head -n1))"
  NODE="$node" e2e_pod "$j" m2; e2e_pod_running m2 30
  ok $? "shim_kill: a new pod runs on the new shim ($(e2e_pod_phase m2))"
  [ "$(e2e_pod_field default/m1 '{.status.reason}')" = ShimLost ]
  ok $? "shim_kill: the lost pod keeps its ShimLost status ($(e2e_pod_field default/m1 '{.status.reason}'))"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "shim_kill"
}

case_api_down() {
  if [ -n "$E2E_KUBECONFIG" ]; then sk_skip "api_down: needs the test double"; return; fi
  e2e_job 1 -N1 -w $N3 --gres=gpu:2 --k8s-gpus=2 || { ok 1 "api_down: job"; return; }
  local j="$E2E_JOB" pid node t_back hb
  node="$(e2e_node_names "$j")"
  e2e_pod "$j" d1; e2e_pod_running d1 30; ok $? "api_down: pod Running"
  pid="$(e2e_pod_pids "$j" d1)"
  e2e_api POST /_test/fault '{"mode":"refuse","seconds":60}' >/dev/null; ok $? "API server refuses connections for 60 s"
  sleep 30
  [ "$(e2e_pod_pids "$j" d1)" = "$pid" ]; ok $? "API down 30 s: the pod process ($pid) keeps running"
  e2e_wait 45 "e2e_kubectl get --raw /readyz >/dev/null 2>&1"
  t_back=$(date -u +%s)
  ok $? "API server back"
  e2e_wait 30 "[ \"\$(e2e_ready_nodes $j)\" = 1 ] && hb=\$(e2e_kubectl get node $node -o 'jsonpath={.status.conditions[?(@.type==\"Ready\")].lastHeartbeatTime}') && [ \$(date -u -d \"\$hb\" +%s) -ge $t_back ]"
  ok $? "Ready re-posted after the API came back (heartbeat $(e2e_kubectl get node "$node" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}'))"
  [ "$(e2e_pod_pids "$j" d1)" = "$pid" ] && [ "$(e2e_pod_phase d1)" = Running ] \
    && [ "$(e2e_pod_field default/d1 '{.status.containerStatuses[0].restartCount}')" = 0 ]
  ok $? "the pod kept running through the outage (same process, Running, restartCount 0)"
  e2e_pod "$j" d2; e2e_pod_running d2 30
  ok $? "a new pod starts after the outage ($(e2e_kubectl get pod d2 --no-headers -o wide 2>&1 | head -n1))"
  e2e_log "api_down: d2: $(e2e_kubectl get pod d2 -o jsonpath='{.status.conditions}' 2>&1); node taints: $(e2e_kubectl get node "$node" -o jsonpath='{.spec.taints}' 2>&1)"
  e2e_end_job "$j"
  e2e_assert_clean "$j" "api_down"
}

# Submitted by run-all.sh after api_down (--time=1 = 60 s), checked after drain_before.
case_time_limit_submit() {
  e2e_job 1 -N1 -w $N3 --gres=gpu:1 --k8s-gpus=1 --time=1 || { E2E_TL_JOB=""; return 1; }
  E2E_TL_JOB="$E2E_JOB"
  # The state it ends in, recorded as it ends: the cases run until the check
  # can outlast MinJobAge, after which slurmctld no longer knows the job.
  rm -f "$E2E_D/time_limit_state"
  sk_record_end_state "$E2E_TL_JOB" "$E2E_D/time_limit_state" 900 &
  E2E_TL_FOLLOWER=$!
  # The agent cordons a node within cordon_before_end (2 min) of the job's
  # end: with a 1-minute limit at once, so the scheduler places nothing
  # there; a pod bound by name still runs until the end.
  e2e_wait 10 "e2e_kubectl get nodes -l slurm-k8s/job-id=$E2E_TL_JOB -o 'jsonpath={.items[*].spec.taints}' | grep -q job-ending"
  e2e_kubectl get nodes -l "slurm-k8s/job-id=$E2E_TL_JOB" -o 'jsonpath={.items[*].spec.taints}' > "$E2E_D/time_limit_taints"
  NODE="$(e2e_node_names "$E2E_TL_JOB")" e2e_pod "$E2E_TL_JOB" tl
  # Its own follower (not in RL_FOLLOWERS, which each case stops).
  mkdir -p "$E2E_D/podlogs"
  if ! e2e_pod_running tl 30; then
    e2e_log "time-limit pod tl not Ready: $(e2e_kubectl get pod tl -o jsonpath='{.status.conditions}' 2>&1); nodes: $(e2e_kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.allocatable} {.spec.taints}{"\n"}{end}' 2>&1)"
  else
    timeout 300 kubectl --kubeconfig "$E2E_ADMIN_KUBECONFIG" logs -f tl >"$E2E_D/podlogs/tl.log" 2>&1 &
    E2E_TL_FOLLOWER="$E2E_TL_FOLLOWER $!"
    local uid f
    uid="$(e2e_pod_field default/tl '{.metadata.uid}')"
    for f in "$E2E_AGENTS"/n*/shim/job_*/pods/"$uid"/*/0.log; do
      [ -f "$f" ] || continue
      timeout 300 tail -n +1 -F "$f" >"$E2E_D/podlogs/tl.cri" 2>/dev/null &
      E2E_TL_FOLLOWER="$E2E_TL_FOLLOWER $!"
    done
  fi
  echo "$E2E_TL_JOB" > "$E2E_D/time_limit_job"
}

case_time_limit() {
  local j
  j="$(cat "$E2E_D/time_limit_job" 2>/dev/null)"
  [ -n "$j" ] || { ok 1 "time_limit: the job was not submitted"; return; }
  grep -q '"slurm-k8s/job-ending"' "$E2E_D/time_limit_taints"
  ok $? "time limit: the node was cordoned ahead of the job's end ($(cat "$E2E_D/time_limit_taints"))"
  e2e_wait 120 "[ -s \"$E2E_D/time_limit_state\" ]"
  [ "$(cat "$E2E_D/time_limit_state" 2>/dev/null)" = TIMEOUT ]
  ok $? "time limit: job $j ended as $(cat "$E2E_D/time_limit_state" 2>/dev/null) (wanted TIMEOUT)"
  e2e_wait 30 "[ -z \"\$(e2e_node_names $j)\" ]"; ok $? "time limit: Node gone"
  sleep 0.5
  check_job_end_pod "$j" tl "time limit" TimeLimit
  e2e_assert_clean "$j" "time_limit"
}

# The online-RL loop of examples/online-rl (what scripts/run-scenario.sh, the
# README's first command, shows) on real Slurm: the job's 3 virtual nodes,
# the rollout and reward pods on the lent GPUs, the 3 trainer ranks (srun, on
# the GPUs the job kept) learning from the pods' samples with the weights
# pushed to the rollouts after every step, and everything gone at the end.
case_online_rl() {
  rl_submit -N3 --gres=gpu:4 --k8s-gpus=2 --k8s-labels=team=rl || return
  local j="$RL_JOB"
  rl_check_nodes "$j" 3 2 "team=rl"
  if ! rl_apply_and_wait "$j"; then
    scancel "$j"; sk_wait_gone "$j" 60
    rl_delete_workloads
    e2e_assert_clean "$j" "online_rl"
    return
  fi
  rl_check_pod_gpus "$j"
  rl_publish_services
  rl_wait_job_and_check_trainer "$j" 3
  rl_check_found_endpoints "$j"
  rl_check_learning "$j"
  rl_check_teardown "$j"
  e2e_assert_clean "$j" "online_rl"
}

# The same loop with the rollout and reward services from images
# (examples/online-rl/build-images.sh: python3 and numpy from this machine's
# Debian packages, pushed to the harness's registry), started by their
# ENTRYPOINT through the podman runtime: pulled on each node, each container
# with its own GPUs only (numbered from 0 inside, its /dev/nvidiaN alone),
# stopped with SIGTERM at the job's end, nothing left.
case_online_rl_images() {
  local t0=$SECONDS
  bash "$E2E_TOP/examples/online-rl/build-images.sh" "$E2E_REGISTRY" --tls-verify=false >>"$E2E_D/case-online_rl_images.build" 2>&1
  ok $? "online_rl_images: the example's images built and pushed ($((SECONDS - t0)) s; $(tail -n2 "$E2E_D/case-online_rl_images.build" | paste -sd' '))" || return
  rl_submit -N3 --gres=gpu:4 --k8s-gpus=2 --k8s-labels=team=rl || return
  local j="$RL_JOB"
  rl_check_nodes "$j" 3 2 "team=rl"
  if ! rl_apply_and_wait "$j" "$E2E_TOP/examples/online-rl/rollout-image.yaml" "$E2E_TOP/examples/online-rl/reward-image.yaml"; then
    scancel "$j"; sk_wait_gone "$j" 60
    rl_delete_workloads
    e2e_assert_clean "$j" "online_rl_images"
    return
  fi
  rl_check_pulled
  RL_IMAGES=1 rl_check_pod_gpus "$j"
  rl_publish_services
  rl_wait_job_and_check_trainer "$j" 3
  rl_check_found_endpoints "$j"
  rl_check_learning "$j"
  rl_check_teardown "$j"
  e2e_assert_clean "$j" "online_rl_images"
}

# The pid listening on IP:PORT on this host (a pod's service: pods run on
# the node's network, each at its pod IP).
rl_listener_pid() {  # rl_listener_pid IP PORT
  e2e_on_host "$1" ss -Htlnp "sport = :$2" | awk -v a="$1:$2" '$4 == a' | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n1
}

# A Ready rollout pod that is not one of RL_PODS (the Deployment's replacement).
rl_new_rollout() {
  local p
  for p in $(e2e_kubectl get pods -n default -l app=rollout \
               -o 'jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name}{" "}{end}' 2>/dev/null); do
    [[ " ${RL_PODS[*]} " == *" default/$p "* ]] && continue
    [ "$(e2e_pod_field "default/$p" '{.status.conditions[?(@.type=="Ready")].status}')" = True ] && { echo "$p"; return; }
  done
}

# Faults in the online-RL loop, with the trainer's steps paced at 0.25 s (a
# real step takes seconds; the example's takes milliseconds):
# - the process of one rollout replica killed at step 10: the shim restarts
#   it at once (restartPolicy Always, as a kubelet does); it comes back with
#   weights v0 and a new boot id in its sample ids;
# - another rollout pod deleted at step 20: the Deployment's ReplicaSet makes
#   a new pod, the scheduler places it where a lent GPU and the hostPort are
#   free, and the trainer finds it in the Service's Endpoints;
# - the reward service's process killed at step 40 (restarted by the shim).
# The trainer carries on (the next rollout when one fails, for up to
# STEP_DEADLINE; the current weights sent to a rollout found behind), still
# learns, loses and duplicates no sample (samples a restarted rollout made
# with old weights are counted late), and every rollout ends at the last
# weight version.
case_online_rl_faults() {
  RL_EXPORT="STEPS=100,STEP_SECONDS=0.25" rl_submit -N3 --gres=gpu:4 --k8s-gpus=2 --k8s-labels=team=rl || return
  local j="$RL_JOB" out pid ra rb ipa ipr new
  out="$SK_JOBS_DIR/online-rl-$j.out"
  rl_check_nodes "$j" 3 2 "team=rl"
  if ! rl_apply_and_wait "$j"; then
    scancel "$j"; sk_wait_gone "$j" 60
    rl_delete_workloads
    e2e_assert_clean "$j" "online_rl_faults"
    return
  fi
  rl_publish_services
  ra="$(printf '%s\n' "${RL_PODS[@]}" | grep /rollout- | sed -n 1p)"; ra="${ra#*/}"
  rb="$(printf '%s\n' "${RL_PODS[@]}" | grep /rollout- | sed -n 2p)"; rb="${rb#*/}"
  ipa="$(e2e_pod_field "default/$ra" '{.status.podIP}')"
  ipr="$(e2e_pod_field default/reward '{.status.podIP}')"
  e2e_wait 60 "grep -q '^step  10 ' '$out'"; ok $? "the loop reached step 10"
  pid="$(rl_listener_pid "$ipa" 18080)"
  [ -n "$pid" ] && kill -KILL "$pid"; ok $? "killed $ra's process (pid ${pid:-none}, $ipa:18080) at step $(grep -c '^step ' "$out")"
  e2e_wait 30 "[ \"\$(e2e_pod_field default/$ra '{.status.containerStatuses[0].restartCount}')\" -ge 1 ] 2>/dev/null"
  ok $? "$ra restarted in place (restartCount $(e2e_pod_field "default/$ra" '{.status.containerStatuses[0].restartCount}'))"
  e2e_wait 60 "grep -q '^step  20 ' '$out'"; ok $? "the loop reached step 20"
  e2e_kubectl delete pod -n default "$rb" --wait=false >/dev/null
  ok $? "deleted the rollout pod $rb at step $(grep -c '^step ' "$out")"
  e2e_wait 60 "[ -n \"\$(rl_new_rollout)\" ]"
  new="$(rl_new_rollout)"
  [ -n "$new" ]; ok $? "the Deployment replaced it: ${new:-no new pod} Ready on $(e2e_pod_field "default/$new" '{.spec.nodeName} at {.status.podIP}') at step $(grep -c '^step ' "$out")"
  e2e_wait 30 "grep -q 'rollout endpoints now.*' '$out'"
  ok $? "the trainer read the new Endpoints: $(grep -m1 'rollout endpoints now' "$out" | sed 's/^.*rollout endpoints now/rollout endpoints now/')"
  e2e_wait 60 "grep -q '^step  40 ' '$out'"; ok $? "the loop reached step 40"
  pid="$(rl_listener_pid "$ipr" 18090)"
  [ -n "$pid" ] && kill -KILL "$pid"; ok $? "killed the reward service's process (pid ${pid:-none}, $ipr:18090) at step $(grep -c '^step ' "$out")"
  e2e_wait 30 "[ \"\$(e2e_pod_field default/reward '{.status.containerStatuses[0].restartCount}')\" -ge 1 ] 2>/dev/null"
  ok $? "the reward pod restarted (restartCount $(e2e_pod_field default/reward '{.status.containerStatuses[0].restartCount}'))"
  sk_wait_state "$j" COMPLETED 180
  ok $? "job $j COMPLETED: every trainer rank exited 0 (job $(sk_job_state "$j"))"
  grep -E '^learning:|behind|NOT at|no rollout answered|endpoints now|Endpoints failed' "$out" | sed 's/^/  /'
  rl_check_learning "$j" faults
  local boots
  boots="$(python3 -c 'import json,sys; b = json.load(open(sys.argv[1]))["rollout_boots"]; print(b.get(sys.argv[2], 0), b.get(sys.argv[3], 0))' \
           "$SK_JOBS_DIR/online-rl-$j.json" "$ra" "${new:-none}" 2>/dev/null)"
  [ "${boots%% *}" -ge 2 ] 2>/dev/null; ok $? "the trainer got samples from both lives of $ra (${boots%% *} boot ids)"
  [ "${boots#* }" -ge 1 ] 2>/dev/null; ok $? "the trainer got samples from the replacement $new (${boots#* } boot ids)"
  e2e_wait 60 "[ -z \"\$(e2e_node_names $j)\" ]"; ok $? "the job's Nodes are deleted after it ends"
  rl_stop_log_followers
  rl_delete_workloads
  e2e_assert_clean "$j" "online_rl_faults"
}
