# Sourced by test_kubectl.sh after kubectl_streams.sh (its helpers t, tn, ok, nok, skipped, api,
# renew, K128/K132, NS, NODE: Ready, 4 CPUs and 8Gi allocatable, labelled kubectl-test=$SFX; pods
# kp1 and kp2 bound to NODE; the fake kubelet reading its /metrics/resource figures from
# $WORK/usage.json at each scrape): the real `kubectl top nodes` and `kubectl top pods` of kubectl
# 1.28 and 1.32 against the metrics.k8s.io API the double computes from two scrapes of each Ready
# node's kubelet (tests/kube/README.md, "The metrics API").

cat >"$WORK/usage.json" <<EOF
{"node": {"cpu": 1, "memory": 2147483648},
 "containers": [{"namespace": "$NS", "pod": "kp1", "container": "main", "cpu": 0.25, "memory": 67108864},
                {"namespace": "$NS", "pod": "kp2", "container": "main", "cpu": 0.05, "memory": 1048576},
                {"namespace": "$NS", "pod": "kp2", "container": "side", "cpu": 0.01, "memory": 3145728},
                {"namespace": "$NS", "pod": "kunbound", "container": "main", "cpu": 1, "memory": 1048576}]}
EOF
# A Ready node whose kubelet refuses connections: metrics-server leaves it out, kubectl prints <unknown>.
TOPDEAD=kt-$SFX
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
api POST /api/v1/nodes "{\"metadata\":{\"name\":\"$TOPDEAD\",\"labels\":{\"kubectl-top\":\"$SFX\"}},\"status\":{\"capacity\":{\"cpu\":\"2\",\"memory\":\"1Gi\",\"pods\":\"10\"},\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":1}},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"kubelet is posting ready status\",\"lastHeartbeatTime\":\"$now\",\"lastTransitionTime\":\"$now\"}]}}" >/dev/null
renew

# Figures need two scrapes (the double scrapes at most once a second): poll until kubectl shows them.
for _ in $(seq 600); do
    "$K128" top pods -n "$NS" 2>/dev/null | grep -q "^kp2 " && break
    sleep 0.1
done
for kv in 1.28 1.32; do
    kc=$K128
    pct='CPU% +MEMORY\(bytes\) +MEMORY%'
    if [ "$kv" = 1.32 ]; then
        kc=$K132
        pct='CPU\(%\) +MEMORY\(bytes\) +MEMORY\(%\)'
        [ -x "$kc" ] || { skipped "kubectl top with kubectl 1.32 (no $kc)"; continue; }
    fi
    t "$kv top nodes header" "^NAME +CPU\(cores\) +$pct *$" "$kc" top nodes -l "kubectl-test=$SFX"
    t "$kv top nodes row" "^$NODE +1000m +25% +2048Mi +25% *$" "$kc" top nodes -l "kubectl-test=$SFX"
    t "$kv top node NAME" "^$NODE +1000m +25% +2048Mi +25% *$" "$kc" top node "$NODE"
    t "$kv top nodes: unreachable kubelet" "^$TOPDEAD +<unknown> +<unknown> +<unknown> +<unknown> *$" "$kc" top nodes
    t "$kv top nodes: only unreachable ones" "metrics not available yet" "$kc" top nodes -l "kubectl-top=$SFX"
    t "$kv top node NAME: unreachable" "nodemetrics\.metrics\.k8s\.io \"$TOPDEAD\" not found" "$kc" top node "$TOPDEAD"
    t "$kv top pods header" "^NAME +CPU\(cores\) +MEMORY\(bytes\) *$" "$kc" top pods -n "$NS"
    t "$kv top pods kp1" "^kp1 +250m +64Mi *$" "$kc" top pods -n "$NS"
    t "$kv top pods kp2 (sum of its containers)" "^kp2 +60m +4Mi *$" "$kc" top pods -n "$NS"
    tn "$kv top pods: pods without figures left out" "^(missing-x|notrunning-x|kdead|kunbound) " "$kc" top pods -n "$NS"
    t "$kv top pods -A" "^$NS +kp1 +250m +64Mi *$" "$kc" top pods -A
    t "$kv top pods --containers" "^kp2 +side +10m +3Mi *$" "$kc" top pods -n "$NS" --containers
    t "$kv top pods -l" "^kp2 " "$kc" top pods -n "$NS" -l app=kubectl-test
    tn "$kv top pods -l selects" "^kp1 " "$kc" top pods -n "$NS" -l app=kubectl-test
    t "$kv top pod NAME" "^kp1 +250m +64Mi *$" "$kc" top pod kp1 -n "$NS"
    t "$kv top pod NAME without figures" "podmetrics\.metrics\.k8s\.io \"$NS/kunbound\" not found" "$kc" top pod kunbound -n "$NS"
    t "$kv top pods: empty namespace" "No resources found in kube-public namespace\." "$kc" top pods -n kube-public
done
t "api-resources: NodeMetrics" "^nodes +metrics\.k8s\.io/v1beta1 +false +NodeMetrics *$" k api-resources --api-group=metrics.k8s.io
t "api-resources: PodMetrics" "^pods +metrics\.k8s\.io/v1beta1 +true +PodMetrics *$" k api-resources --api-group=metrics.k8s.io
t "get nodes.metrics.k8s.io (the Table)" "^$NODE +1 +2Gi +[0-9.]+m?s *$" k get nodes.metrics.k8s.io "$NODE"
t "metrics scrapes carry the kubelet client certificate" "^/metrics/resource - kube-apiserver-kubelet-client method=GET$" \
    lastreq /metrics/resource
api DELETE "/api/v1/nodes/$TOPDEAD" >/dev/null
rm -f "$WORK/usage.json"
