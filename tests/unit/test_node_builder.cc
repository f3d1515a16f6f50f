// agent/controllers/node_builder: the Node and its status patch, cordon and ownership,
// and the Lease, against what a real kubelet writes (recorded from a real
// kubelet v1.28).
#include <string>

#include "agent/controllers/node_builder.h"
#include "common/rfc3339.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

static NodeSpecInput sample_input() {
    NodeSpecInput in;
    in.node_name = "slurm-n1-42";
    in.job.job_id = 42;
    in.job.slurm_node = "n1";
    in.job.user = "alice";
    in.job.partition = "gpu";
    in.job.gpus = {2, 3};
    in.job.cpus = 8;
    in.job.memory_mib = 16384;
    in.job.labels = {{"team", "rl"}, {"slurm-k8s/job-id", "999"}};
    in.cluster = "c1";
    in.node_address = "192.0.2.2";
    in.kubelet_port = 10250;
    in.agent_version = "0.1.0";
    return in;
}

// ---- node ----
START_TEST(node_has_kubelet_shape) {
    Json::Value n = build_node(sample_input(), 1795963182);
    ck_assert_sstr_eq(n["metadata"]["name"].asString(), "slurm-n1-42");
    const Json::Value &l = n["metadata"]["labels"];
    ck_assert_sstr_eq(l["slurm-k8s/job-id"].asString(), "42");  // the user's cannot override
    ck_assert_sstr_eq(l["slurm-k8s/user"].asString(), "alice");
    ck_assert_sstr_eq(l["slurm-k8s/partition"].asString(), "gpu");
    ck_assert_sstr_eq(l["slurm-k8s/slurm-node"].asString(), "n1");
    ck_assert_sstr_eq(l["slurm-k8s/cluster"].asString(), "c1");
    ck_assert_sstr_eq(l["kubernetes.io/hostname"].asString(), "slurm-n1-42");
    ck_assert_sstr_eq(l["node.kubernetes.io/instance-type"].asString(), "slurm-k8s");
    ck_assert_sstr_eq(l["team"].asString(), "rl");
    // GPU feature discovery's labels, from what Slurm knows: the lent count,
    // and the model only when Slurm has a type for the lent GPUs.
    ck_assert_sstr_eq(l["nvidia.com/gpu.count"].asString(), "2");
    ck_assert(!l.isMember("nvidia.com/gpu.product"));
    NodeSpecInput typed = sample_input();
    typed.job.gpu_type = "a100";
    ck_assert_sstr_eq(
        build_node(typed, 1)["metadata"]["labels"]["nvidia.com/gpu.product"].asString(), "a100");
    // An array task and a het component carry the whole job's ids too.
    ck_assert(!l.isMember("slurm-k8s/array-job-id") && !l.isMember("slurm-k8s/het-job-id"));
    NodeSpecInput task = sample_input();
    task.job.array_job_id = 40;
    task.job.array_task_id = 0;
    task.job.het_job_id = 41;
    task.job.het_offset = 1;
    Json::Value tl = build_node(task, 1)["metadata"]["labels"];
    ck_assert_sstr_eq(tl["slurm-k8s/job-id"].asString(), "42");
    ck_assert_sstr_eq(tl["slurm-k8s/array-job-id"].asString(), "40");
    ck_assert_sstr_eq(tl["slurm-k8s/array-task-id"].asString(), "0");
    ck_assert_sstr_eq(tl["slurm-k8s/het-job-id"].asString(), "41");
    ck_assert_sstr_eq(tl["slurm-k8s/het-component"].asString(), "1");
    NodeSpecInput no_gpus = sample_input();
    no_gpus.job.gpus.clear();
    no_gpus.job.gpu_type = "a100";
    ck_assert(!build_node(no_gpus, 1)["metadata"]["labels"].isMember("nvidia.com/gpu.count"));
    ck_assert(!build_node(no_gpus, 1)["metadata"]["labels"].isMember("nvidia.com/gpu.product"));
    const Json::Value &t = n["spec"]["taints"];
    ck_assert_int_eq(t.size(), 1);
    ck_assert_sstr_eq(t[0]["key"].asString(), "slurm-k8s/job");
    ck_assert_sstr_eq(t[0]["value"].asString(), "42");
    ck_assert_sstr_eq(t[0]["effect"].asString(), "NoSchedule");
    const Json::Value &s = n["status"];
    ck_assert_sstr_eq(s["capacity"]["nvidia.com/gpu"].asString(), "2");
    ck_assert_sstr_eq(s["capacity"]["cpu"].asString(), "8");
    ck_assert_sstr_eq(s["capacity"]["memory"].asString(), "16777216Ki");
    ck_assert_sstr_eq(s["allocatable"]["pods"].asString(), "110");
    // Who may run pods there, for kubectl describe node.
    ck_assert_sstr_eq(n["metadata"]["annotations"]["slurm-k8s/namespaces"].asString(),
                      "none: the job named no namespace (sbatch --k8s-namespace=NS) and this site "
                      "allows none by default");
    NodeSpecInput site = sample_input();
    site.site_namespaces = {"*"};
    ck_assert_sstr_eq(
        build_node(site, 1)["metadata"]["annotations"]["slurm-k8s/namespaces"].asString(), "*");
    site.job.namespaces = {"rl", "serving"};  // the job's list wins
    ck_assert_sstr_eq(
        build_node(site, 1)["metadata"]["annotations"]["slurm-k8s/namespaces"].asString(),
        "rl,serving");
    ck_assert(namespace_allowed({"*"}, "kube-system"));
    ck_assert(namespace_allowed({"rl"}, "rl") && !namespace_allowed({"rl"}, "default"));
    ck_assert(!namespace_allowed({}, "default"));
    // ephemeral-storage only when the pods' file system was measured.
    ck_assert(!s["capacity"].isMember("ephemeral-storage"));
    NodeSpecInput disk = sample_input();
    disk.ephemeral_storage_bytes = 50ULL << 30;
    Json::Value ds = build_node(disk, 1)["status"];
    ck_assert_sstr_eq(ds["capacity"]["ephemeral-storage"].asString(), "52428800Ki");
    ck_assert_sstr_eq(ds["allocatable"]["ephemeral-storage"].asString(), "52428800Ki");
    // spec.podCIDR(s): the host's pod range with pod_network = cni, else none.
    ck_assert(!build_node(disk, 1)["spec"].isMember("podCIDR"));
    NodeSpecInput ranged = sample_input();
    ranged.pod_cidr = "10.244.3.0/24";
    Json::Value rs = build_node(ranged, 1)["spec"];
    ck_assert_sstr_eq(rs["podCIDR"].asString(), "10.244.3.0/24");
    ck_assert(rs["podCIDRs"].size() == 1 && rs["podCIDRs"][0].asString() == "10.244.3.0/24");
    ck_assert_int_eq(s["daemonEndpoints"]["kubeletEndpoint"]["Port"].asInt(), 10250);
    ck_assert_sstr_eq(s["addresses"][0]["type"].asString(), "InternalIP");
    ck_assert_sstr_eq(s["addresses"][0]["address"].asString(), "192.0.2.2");
    // No Hostname unless one was found usable: the API server would dial the
    // virtual node's name first (agent/core/node_address.h).
    ck_assert_int_eq(s["addresses"].size(), 1);
    NodeSpecInput named = sample_input();
    named.node_hostname = "cn1.example.org";
    Json::Value sn = build_node(named, 1700000000)["status"];
    ck_assert_int_eq(sn["addresses"].size(), 2);
    ck_assert_sstr_eq(sn["addresses"][1]["type"].asString(), "Hostname");
    ck_assert_sstr_eq(sn["addresses"][1]["address"].asString(), "cn1.example.org");
    // The 4 conditions in the kubelet's order with its reasons (README obs. 4).
    const char *types[] = {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"};
    const char *reasons[] = {"KubeletHasSufficientMemory", "KubeletHasNoDiskPressure",
                             "KubeletHasSufficientPID", "KubeletReady"};
    ck_assert_int_eq(s["conditions"].size(), 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_sstr_eq(s["conditions"][i]["type"].asString(), types[i]);
        ck_assert_sstr_eq(s["conditions"][i]["reason"].asString(), reasons[i]);
        ck_assert_sstr_eq(s["conditions"][i]["status"].asString(), i == 3 ? "True" : "False");
        ck_assert_sstr_eq(s["conditions"][i]["lastHeartbeatTime"].asString(),
                          "2026-11-29T14:39:42Z");
    }
}
END_TEST

START_TEST(job_taints_replace_default) {
    NodeSpecInput in = sample_input();
    in.job.taints = {{"slurm-k8s/job-id", "42", "NoSchedule"}};
    in.site_taints = {{"site", "x", "PreferNoSchedule"}, {"slurm-k8s/job-id", "42", "NoSchedule"}};
    auto t = node_taints(in);
    ck_assert_int_eq(t.size(), 2);
    ck_assert_sstr_eq(t[0].key, "slurm-k8s/job-id");
    ck_assert_sstr_eq(t[1].key, "site");
}
END_TEST

START_TEST(status_patch_orders_conditions) {
    Json::Value p = build_node_status_patch(sample_input(), false, 200, 100);
    const Json::Value &c = p["status"]["conditions"];
    ck_assert_sstr_eq(c[3]["status"].asString(), "False");
    ck_assert_sstr_eq(c[3]["reason"].asString(), "KubeletNotReady");
    ck_assert_sstr_eq(c[3]["lastTransitionTime"].asString(), rfc3339(100));
    ck_assert_sstr_eq(p["status"]["$setElementOrder/conditions"][3]["type"].asString(), "Ready");
    ck_assert(!p.isMember("spec"));  // /status ignores spec anyway
}
END_TEST

START_TEST(cordon_patch_keeps_taints) {
    Json::Value node = J(R"({"metadata":{"resourceVersion":"7"},"spec":{"taints":[
        {"key":"slurm-k8s/job","value":"42","effect":"NoSchedule"}]}})");
    Json::Value p = build_cordon_patch(node, {"slurm-k8s/job-ended", "42", "NoExecute"});
    ck_assert_sstr_eq(p["metadata"]["resourceVersion"].asString(), "7");
    ck_assert(p["spec"]["unschedulable"].asBool());
    ck_assert_int_eq(p["spec"]["taints"].size(), 2);
    ck_assert_sstr_eq(p["spec"]["taints"][1]["effect"].asString(), "NoExecute");
    // Idempotent: cordoning twice does not add the taint twice.
    node["spec"]["taints"] = p["spec"]["taints"];
    Json::Value p2 = build_cordon_patch(node, {"slurm-k8s/job-ended", "42", "NoExecute"});
    ck_assert_int_eq(p2["spec"]["taints"].size(), 2);
}
END_TEST

START_TEST(ownership_by_labels) {
    Json::Value n = build_node(sample_input(), 1);
    ck_assert(node_is_ours(n, "c1", "n1"));
    ck_assert(!node_is_ours(n, "c2", "n1"));
    ck_assert(!node_is_ours(n, "c1", "n2"));
    ck_assert(!node_is_ours(J(R"({"metadata":{"name":"x"}})"), "c1", "n1"));
}
END_TEST

// ---- lease ----
START_TEST(lease_like_kubelet) {
    Json::Value l = build_lease("slurm-n1-42", "uid-1", 40, 1795963182589439LL);
    ck_assert_sstr_eq(l["apiVersion"].asString(), "coordination.k8s.io/v1");
    ck_assert_sstr_eq(l["metadata"]["namespace"].asString(), "kube-node-lease");
    const Json::Value &o = l["metadata"]["ownerReferences"][0];
    ck_assert_sstr_eq(o["kind"].asString(), "Node");
    ck_assert_sstr_eq(o["uid"].asString(), "uid-1");
    ck_assert(!o.isMember("controller"));
    ck_assert_sstr_eq(l["spec"]["holderIdentity"].asString(), "slurm-n1-42");
    ck_assert_int_eq(l["spec"]["leaseDurationSeconds"].asInt(), 40);
    ck_assert_sstr_eq(l["spec"]["renewTime"].asString(), "2026-11-29T14:39:42.589439Z");
    ck_assert(!l["spec"].isMember("acquireTime"));
    Json::Value cur = l;
    cur["metadata"]["resourceVersion"] = "55";
    Json::Value r = renew_lease(cur, "slurm-n1-42", "uid-1", 40, 1795963192000000LL);
    ck_assert_sstr_eq(r["metadata"]["resourceVersion"].asString(), "55");
    ck_assert_sstr_eq(r["spec"]["renewTime"].asString(), "2026-11-29T14:39:52.000000Z");
}
END_TEST

int main() {
    Suite *s = suite_create("node_builder");
    TCase *tc = tcase_create("node_builder");
    tcase_add_test(tc, node_has_kubelet_shape);
    tcase_add_test(tc, job_taints_replace_default);
    tcase_add_test(tc, status_patch_orders_conditions);
    tcase_add_test(tc, cordon_patch_keeps_taints);
    tcase_add_test(tc, ownership_by_labels);
    tcase_add_test(tc, lease_like_kubelet);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
