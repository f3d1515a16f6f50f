// The agent's pure core: Node/Lease builders against what a real kubelet
// writes (recorded from a real kubelet v1.28), the watch stream parser,
// back-off, pod status diffing, env resolution, socket auth decisions, the
// configuration file and the job state files.
#include <unistd.h>

#include <string>

#include "agent/backoff.h"
#include "agent/agent_config.h"
#include "agent/env_resolver.h"
#include "agent/job_store.h"
#include "agent/kube_time.h"
#include "agent/lost_shim.h"
#include "agent/node_builder.h"
#include "agent/peer_auth.h"
#include "agent/pod_status_patch.h"
#include "agent/watch_parser.h"
#include "common/base64.h"
#include "common/json.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

static Json::Value J(const char *text) {
    auto v = json::parse(text);
    ck_assert_msg(v.ok(), "bad test JSON: %s", text);
    return *v;
}

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

// ---- time ----
START_TEST(micro_time_has_six_digits) {
    ck_assert_sstr_eq(micro_time(1795963182589439LL), "2026-11-29T14:39:42.589439Z");
    ck_assert_sstr_eq(micro_time(1795963182000001LL), "2026-11-29T14:39:42.000001Z");
    ck_assert_sstr_eq(rfc3339(1795963182), "2026-11-29T14:39:42Z");
    ck_assert_int_eq(parse_rfc3339("2026-11-29T14:39:42Z"), 1795963182);
    ck_assert_int_eq(parse_rfc3339("2026-11-29T14:39:42.5Z"), 1795963182);
    ck_assert_int_eq(parse_rfc3339("2026-11-29 14:39:42"), -1);
}
END_TEST

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
    ck_assert_int_eq(s["daemonEndpoints"]["kubeletEndpoint"]["Port"].asInt(), 10250);
    ck_assert_sstr_eq(s["addresses"][0]["type"].asString(), "InternalIP");
    ck_assert_sstr_eq(s["addresses"][0]["address"].asString(), "192.0.2.2");
    ck_assert_sstr_eq(s["addresses"][1]["type"].asString(), "Hostname");
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

// ---- watch parser ----
START_TEST(watch_split_chunks) {
    std::string stream =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}}"
        "\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":"
        "\"9\"}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"10\"}"
        "}}\n";
    // Every split point gives the same three events.
    for (size_t cut = 0; cut <= stream.size(); cut++) {
        WatchParser p;
        auto a = p.feed(std::string_view(stream).substr(0, cut));
        ck_assert(a.ok());
        auto b = p.feed(std::string_view(stream).substr(cut));
        ck_assert(b.ok());
        std::vector<WatchEvent> all = *a;
        all.insert(all.end(), b->begin(), b->end());
        ck_assert_int_eq(all.size(), 3);
        ck_assert(all[0].type == WatchType::Added);
        ck_assert(all[1].type == WatchType::Bookmark);
        ck_assert_sstr_eq(all[1].resource_version, "9");
        ck_assert(all[2].type == WatchType::Deleted);
        ck_assert_sstr_eq(all[2].resource_version, "10");
        ck_assert_int_eq(p.buffered(), 0);
    }
}
END_TEST

START_TEST(watch_error_410) {
    WatchParser p;
    auto e = p.feed(
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
        "\"Failure\",\"message\":\"too old resource version: 1 (812)\",\"reason\":\"Expired\","
        "\"code\":410}}\n");
    ck_assert(e.ok());
    ck_assert_int_eq(e->size(), 1);
    ck_assert((*e)[0].type == WatchType::Error);
    ck_assert_int_eq((*e)[0].error_code, 410);
    ck_assert_sstr_eq((*e)[0].error_message, "too old resource version: 1 (812)");
}
END_TEST

static const char *kBadWatchLines[] = {
    "not json\n",
    "[1]\n",
    "{\"type\":\"ADDED\"}\n",
    "{\"type\":\"WHAT\",\"object\":{}}\n",
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}}\n",  // no resourceVersion
};
START_TEST(watch_bad_lines) {
    WatchParser p;
    auto e = p.feed(kBadWatchLines[_i]);
    ck_assert_msg(!e.ok(), "accepted %s", kBadWatchLines[_i]);
}
END_TEST

START_TEST(watch_line_bound) {
    WatchParser p(100);
    auto e = p.feed(std::string(101, 'x'));
    ck_assert(!e.ok());
    ck_assert(e.error() == Error::TooLarge);
}
END_TEST

// ---- back-off ----
START_TEST(backoff_doubles_and_caps) {
    Backoff b(100, 1000, [](uint64_t d) { return d; });
    uint64_t want[] = {100, 200, 400, 800, 1000, 1000};
    for (uint64_t w : want)
        ck_assert_uint_eq(b.next_ms(), w);
    b.reset();
    ck_assert_uint_eq(b.next_ms(), 100);
    Backoff j(100, 1000);
    for (int i = 0; i < 20; i++) {
        uint64_t d = j.next_ms();
        ck_assert(d >= 100 && d <= 1250);
    }
}
END_TEST

// ---- pod status ----
static Json::Value api_pod() {
    return J(R"({"metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"3"},
      "spec":{"containers":[{"name":"main"}]},
      "status":{"phase":"Pending","qosClass":"BestEffort","conditions":[
        {"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-01-01T00:00:00Z"}]}})");
}
static Json::Value running() {
    return J(R"({"phase":"Running","startTime":"2026-01-01T00:00:01Z","conditions":[
        {"type":"Initialized","status":"True"},{"type":"Ready","status":"True"},
        {"type":"ContainersReady","status":"True"}],
      "containerStatuses":[{"name":"main","ready":true,"started":true,"restartCount":0,
        "state":{"running":{"startedAt":"2026-01-01T00:00:01Z"}}}]})");
}

START_TEST(status_patch_only_changes) {
    Json::Value pod = api_pod();
    Json::Value d = desired_pod_status(running(), pod, "192.0.2.2");
    ck_assert_sstr_eq(d["hostIP"].asString(), "192.0.2.2");
    ck_assert_sstr_eq(d["podIPs"][0]["ip"].asString(), "192.0.2.2");
    ck_assert_int_eq(d["conditions"].size(), 4);  // PodScheduled kept
    Json::Value p = pod_status_patch(pod, d);
    ck_assert(!p.isNull());
    ck_assert_sstr_eq(p["metadata"]["uid"].asString(), "u1");
    ck_assert_sstr_eq(p["status"]["phase"].asString(), "Running");
    ck_assert(!p["status"].isMember("qosClass"));
    ck_assert_int_eq(p["status"]["$setElementOrder/conditions"].size(), 4);
    // Applied: the same status again is a no-op (no PATCH).
    pod["status"] = d;
    ck_assert(pod_status_patch(pod, desired_pod_status(running(), pod, "192.0.2.2")).isNull());
    // Conditions in another order are still the same.
    Json::Value reordered = pod;
    Json::Value c = reordered["status"]["conditions"];
    reordered["status"]["conditions"] = Json::Value(Json::arrayValue);
    for (int i = static_cast<int>(c.size()) - 1; i >= 0; i--)
        reordered["status"]["conditions"].append(c[i]);
    ck_assert(pod_status_patch(reordered, d).isNull());
    // A pod bound by spec.nodeName has no PodScheduled: the agent adds it.
    Json::Value direct = api_pod();
    direct["status"]["conditions"] = Json::Value(Json::arrayValue);
    Json::Value dd = desired_pod_status(running(), direct, "10.0.0.1");
    ck_assert_int_eq(dd["conditions"].size(), 4);
    ck_assert_sstr_eq(dd["conditions"][3]["type"].asString(), "PodScheduled");
}
END_TEST

START_TEST(status_patch_clears_reason) {
    Json::Value pod = api_pod();
    pod["status"]["reason"] = "Old";
    pod["status"]["message"] = "old";
    Json::Value p = pod_status_patch(pod, desired_pod_status(running(), pod, "10.0.0.1"));
    ck_assert(p["status"].isMember("reason"));
    ck_assert(p["status"]["reason"].isNull());
    ck_assert(p["status"]["message"].isNull());
}
END_TEST

START_TEST(refused_and_job_end) {
    Json::Value s = refused_pod_status(api_pod(), "NamespaceNotAllowed", "no", "10.0.0.1", 5);
    ck_assert_sstr_eq(s["phase"].asString(), "Failed");
    ck_assert_sstr_eq(s["reason"].asString(), "NamespaceNotAllowed");
    ck_assert(pod_is_terminal(s));
    Json::Value e = job_end_status(running(), "TimeLimit", 42);
    ck_assert_sstr_eq(e["phase"].asString(), "Failed");
    ck_assert_sstr_eq(e["reason"].asString(), "TimeLimit");
    ck_assert(e["message"].asString().find("Slurm job 42") != std::string::npos);
    Json::Value ok = running();
    ok["phase"] = "Succeeded";
    ck_assert_sstr_eq(job_end_status(ok, "", 1)["phase"].asString(), "Succeeded");
}
END_TEST

START_TEST(events_from_transitions) {
    Json::Value pod = api_pod();
    auto ev = status_events(pod, pod["status"], running());
    ck_assert_int_eq(ev.size(), 1);
    ck_assert_sstr_eq(ev[0].reason, "Started");
    ck_assert_sstr_eq(ev[0].field_path, "spec.containers{main}");
    ck_assert_int_eq(status_events(pod, running(), running()).size(), 0);
    Json::Value crash = running();
    crash["containerStatuses"][0]["state"] =
        J(R"({"waiting":{"reason":"CrashLoopBackOff","message":"back-off 10s"}})");
    crash["containerStatuses"][0]["restartCount"] = 1;
    ev = status_events(pod, running(), crash);
    ck_assert_int_eq(ev.size(), 1);
    ck_assert_sstr_eq(ev[0].reason, "BackOff");
    ck_assert_sstr_eq(ev[0].message, "Back-off restarting failed container main in pod p_ns(u1)");
    Json::Value e = build_pod_event(pod, ev[0], "slurm-n1-42", 1795963182000000LL);
    ck_assert_sstr_eq(e["source"]["component"].asString(), "kubelet");
    ck_assert_sstr_eq(e["source"]["host"].asString(), "slurm-n1-42");
    ck_assert_sstr_eq(e["reportingComponent"].asString(), "kubelet");
    ck_assert_sstr_eq(e["involvedObject"]["fieldPath"].asString(), "spec.containers{main}");
    ck_assert_int_eq(e["count"].asInt(), 1);
    ck_assert_sstr_eq(e["firstTimestamp"].asString(), "2026-11-29T14:39:42Z");
    ck_assert(e["metadata"]["name"].asString().rfind("p.", 0) == 0);
}
END_TEST

// ---- env resolution ----
static Json::Value env_pod() {
    return J(R"({"metadata":{"name":"p","namespace":"ns","uid":"u1","labels":{"app":"x"}},
      "spec":{"containers":[{"name":"main","resources":{"limits":{"cpu":"500m","memory":"1Gi"}},
        "env":[{"name":"PLAIN","value":"v"},
          {"name":"CM","valueFrom":{"configMapKeyRef":{"name":"cfg","key":"k"}}},
          {"name":"SEC","valueFrom":{"secretKeyRef":{"name":"s","key":"pw"}}},
          {"name":"OPT","valueFrom":{"secretKeyRef":{"name":"s","key":"none","optional":true}}},
          {"name":"NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},
          {"name":"APP","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['app']"}}},
          {"name":"IP","valueFrom":{"fieldRef":{"fieldPath":"status.podIP"}}},
          {"name":"CPU","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu"}}},
          {"name":"MEM","valueFrom":{"resourceFieldRef":{"resource":"limits.memory","divisor":"1Mi"}}}]}],
        "volumes":[{"name":"conf","configMap":{"name":"cfg"}}]}})");
}

START_TEST(env_resolves_every_kind) {
    Json::Value pod = env_pod();
    auto refs = referenced_objects(pod);
    ck_assert_int_eq(refs.size(), 2);
    FetchedObjects objs;
    objs[{"configmaps", "cfg"}] = J(R"({"data":{"k":"cmval"}})");
    objs[{"secrets", "s"}] = J(R"({"data":{"pw":"c2VjcmV0"}})");
    auto r = resolve_pod(pod, objs, {"slurm-n1-42", "10.0.0.9", 4, 2048});
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    std::map<std::string, std::string> env;
    for (const auto &e : (*r)["pod"]["spec"]["containers"][0]["env"]) {
        ck_assert(!e.isMember("valueFrom"));
        env[e["name"].asString()] = e["value"].asString();
    }
    ck_assert_sstr_eq(env["PLAIN"], "v");
    ck_assert_sstr_eq(env["CM"], "cmval");
    ck_assert_sstr_eq(env["SEC"], "secret");
    ck_assert(env.count("OPT") == 0);
    ck_assert_sstr_eq(env["NAME"], "p");
    ck_assert_sstr_eq(env["APP"], "x");
    ck_assert_sstr_eq(env["IP"], "10.0.0.9");
    ck_assert_sstr_eq(env["CPU"], "1");  // 500m rounded up to whole cores
    ck_assert_sstr_eq(env["MEM"], "1024");
    ck_assert_sstr_eq((*r)["files"]["conf"]["k"].asString(), base64_encode("cmval"));
}
END_TEST

struct EnvFail {
    const char *drop;  // which object is missing
    const char *message_has;
};
static const EnvFail kEnvFails[] = {
    {"configmaps", "configmap \"cfg\" not found"},
    {"secrets", "secret \"s\" not found"},
    {"key", "couldn't find key pw in Secret ns/s"},
};
START_TEST(env_missing_refs_fail) {
    FetchedObjects objs;
    objs[{"configmaps", "cfg"}] = J(R"({"data":{"k":"cmval"}})");
    objs[{"secrets", "s"}] = J(R"({"data":{"pw":"c2VjcmV0"}})");
    std::string drop = kEnvFails[_i].drop;
    if (drop == "key")
        objs[{"secrets", "s"}] = J(R"({"data":{}})");
    else
        objs.erase({drop, drop == "secrets" ? "s" : "cfg"});
    auto r = resolve_pod(env_pod(), objs, {"n", "1.2.3.4", 1, 1});
    ck_assert(!r.ok());
    ck_assert_msg(r.message().find(kEnvFails[_i].message_has) != std::string::npos, "%s",
                  r.message().c_str());
}
END_TEST

struct Quantity {
    const char *text;
    int64_t milli;  // -1 = invalid
};
static const Quantity kQuantities[] = {
    {"500m", 500}, {"2", 2000},      {"1Ki", 1024000}, {"1Gi", 1073741824000LL},
    {"1.5", 1500}, {"1e3", 1000000}, {"", -1},         {"abc", -1},
    {"1Xi", -1},   {"1.2.3", -1},
};
START_TEST(quantities) {
    auto r = parse_quantity_milli(kQuantities[_i].text);
    if (kQuantities[_i].milli < 0) {
        ck_assert_msg(!r.ok(), "accepted '%s'", kQuantities[_i].text);
    } else {
        ck_assert_msg(r.ok(), "'%s'", kQuantities[_i].text);
        ck_assert_int_eq(*r, kQuantities[_i].milli);
    }
}
END_TEST

START_TEST(base64_round_trip) {
    for (std::string s : {"", "a", "ab", "abc", "abcd", "\x01\xff\x10"}) {
        auto d = base64_decode(base64_encode(s));
        ck_assert(d.ok());
        ck_assert_sstr_eq(*d, s);
    }
    ck_assert(!base64_decode("a").ok());
    ck_assert(!base64_decode("a$==").ok());
}
END_TEST

// ---- socket auth ----
struct OpCase {
    const char *op;
    uint32_t uid;
    bool allowed;
};
static const OpCase kOps[] = {
    {"register", 0, true},       {"register", 1000, false}, {"deregister", 64030, true},
    {"deregister", 1000, false}, {"status", 1000, true},    {"list", 0, true},
    {"list", 1000, true},        {"attach", 1000, true},    {"pod_run", 0, false},
    {"shutdown", 0, false},
};
START_TEST(op_authorization) {
    const auto &c = kOps[_i];
    Status st = authorize_op(c.op, PeerCred{123, c.uid, c.uid}, {0, 64030});
    ck_assert_msg(st.ok() == c.allowed, "%s by uid %u", c.op, c.uid);
    if (!st.ok()) ck_assert(st.error() == Error::Forbidden);
}
END_TEST

struct AttachCase {
    uint32_t uid;
    ShimAuth mode;
    const char *cgroup;
    bool allowed;
    const char *message_has;
};
static const AttachCase kAttach[] = {
    {1000, ShimAuth::Cgroup, "0::/system.slice/slurmstepd.scope/job_42/step_extern/user/task_0\n",
     true, ""},
    {1000, ShimAuth::Cgroup, "5:devices:/slurm/uid_1000/job_42/step_extern\n", true, ""},
    {1000, ShimAuth::Cgroup, "0::/system.slice/slurmstepd.scope/job_420/step_extern\n", false,
     "cgroup"},
    {1000, ShimAuth::Cgroup, "0::/user.slice/user-1000.slice/session-3.scope\n", false, "cgroup"},
    {1000, ShimAuth::Cgroup, "", false, "cannot read"},
    {1001, ShimAuth::Cgroup, "0::/x/job_42/step_extern\n", false, "not the job's user"},
    {1001, ShimAuth::Uid, "", false, "not the job's user"},
    {1000, ShimAuth::Uid, "", true, ""},
};
START_TEST(attach_authorization) {
    const auto &c = kAttach[_i];
    Status st = authorize_attach(PeerCred{77, c.uid, c.uid}, 42, 1000, c.mode, c.cgroup);
    ck_assert_msg(st.ok() == c.allowed, "case %d", _i);
    if (!st.ok())
        ck_assert_msg(st.message().find(c.message_has) != std::string::npos, "%s",
                      st.message().c_str());
}
END_TEST

// ---- configuration ----
static const char *kGoodConf =
    "api_server = https://127.0.0.1:6443/\n"
    "api_ca_file = /etc/ca.crt\n"
    "api_token_file = /etc/token\n"
    "labels = site=a\n"
    "taints = dedicated=gpu:NoSchedule\n"
    "admin_uids = 0,64030\n"
    "socket_mode = 0660\n"
    "lease_renew_interval = 8s\n";

START_TEST(config_good) {
    auto c = parse_agent_config(kGoodConf, "agent.conf");
    ck_assert_msg(c.ok(), "%s", c.ok() ? "" : c.message().c_str());
    ck_assert_sstr_eq(c->api.server, "https://127.0.0.1:6443");
    ck_assert_sstr_eq(c->labels.at("site"), "a");
    ck_assert_sstr_eq(c->taints[0].key, "dedicated");
    ck_assert_int_eq(c->admin_uids.size(), 2);
    ck_assert_uint_eq(c->socket_mode, 0660);
    ck_assert_uint_eq(c->lease_renew_s, 8);
    ck_assert_uint_eq(c->lease_duration_s, 40);
}
END_TEST

struct BadConf {
    const char *extra;
    const char *message_has;
};
static const BadConf kBadConfs[] = {
    {"nope = 1\n", "unknown key 'nope'"},
    {"lease_duration = 12s\n", "at most half"},
    {"api_client_cert = /c\n", "set together"},
    {"max_pods = 0\n", "out of range"},
    {"shim_auth = none\n", "shim_auth"},
    {"runtime = fake\n", "runtime"},  // the test double is no choice of the shipped daemon
    {"node_name_template = {node}\n", "{node} and {job}"},
    {"node_name_template = BAD_{node}_{job}!\n", "not a valid Kubernetes node name"},
    {"allowed_namespaces = Bad\n", "not a namespace name"},
    {"kubeconfig = /nonexistent/kc\n", "set either kubeconfig"},
    {"api_server = x\n", "set twice"},
};
START_TEST(config_bad) {
    std::string text = std::string(kGoodConf) + kBadConfs[_i].extra;
    auto c = parse_agent_config(text, "agent.conf");
    ck_assert_msg(!c.ok(), "accepted %s", kBadConfs[_i].extra);
    ck_assert_msg(c.message().find(kBadConfs[_i].message_has) != std::string::npos, "%s",
                  c.message().c_str());
}
END_TEST

// A build that registers extra runtimes (agent/daemon.h) accepts their names.
START_TEST(config_extra_runtime) {
    auto c =
        parse_agent_config(std::string(kGoodConf) + "runtime = fake\n", "agent.conf", {"fake"});
    ck_assert_msg(c.ok(), "%s", c.ok() ? "" : c.message().c_str());
    ck_assert_sstr_eq(c->runtime, "fake");
    ck_assert_sstr_eq(parse_agent_config(kGoodConf, "agent.conf", {"fake"})->runtime, "shim");
    ck_assert(describe_agent_config({"fake"}).find("or fake") != std::string::npos);
    ck_assert(describe_agent_config().find("fake") == std::string::npos);
}
END_TEST

START_TEST(config_requires_credentials) {
    auto c = parse_agent_config("api_server = https://h:1\n", "a.conf");
    ck_assert(!c.ok());
    ck_assert(c.message().find("api_token_file") != std::string::npos);
    ck_assert(!parse_agent_config("", "a.conf").ok());
}
END_TEST

START_TEST(kubeconfig_subset) {
    auto a = parse_kubeconfig(
        "clusters:\n- name: x\n  cluster:\n    server: https://127.0.0.1:1\n"
        "    certificate-authority: ca.crt\nusers:\n- name: a\n  user:\n    tokenFile: /t\n",
        "/d");
    ck_assert(a.ok());
    ck_assert_sstr_eq(a->server, "https://127.0.0.1:1");
    ck_assert_sstr_eq(a->ca_file, "/d/ca.crt");
    ck_assert_sstr_eq(a->token_file, "/t");
    ck_assert(!parse_kubeconfig("users: []\n", "/").ok());
    ck_assert(!parse_kubeconfig("server: https://h\ncertificate-authority-data: AAA\n", "/").ok());
}
END_TEST

START_TEST(node_names) {
    auto n = expand_node_name("slurm-{node}-{job}", "GPU_N1", 42);
    ck_assert(n.ok());
    ck_assert_sstr_eq(*n, "slurm-gpu-n1-42");
    ck_assert(!expand_node_name("{node}-{job}-", "n1", 1).ok());
}
END_TEST

// ---- state files ----
START_TEST(job_store_round_trip) {
    char tmpl[] = "/tmp/sk-agent-test-XXXXXX";
    ck_assert(mkdtemp(tmpl) != nullptr);
    JobStore store(tmpl);
    ck_assert(store.init().ok());
    JobRecord r;
    r.job.job_id = 42;
    r.job.slurm_node = "n1";
    r.job.user = "alice";
    r.job.uid = 1000;
    r.job.gpus = {1};
    r.node_name = "slurm-n1-42";
    r.node_uid = "u";
    ck_assert(store.save(r).ok());
    r.draining = true;
    ck_assert(store.save(r).ok());  // overwrite
    // A torn or foreign file is skipped and reported, not fatal.
    FILE *f = fopen((std::string(tmpl) + "/jobs/job_7_n1.json").c_str(), "w");
    fputs("{\"job\":", f);
    fclose(f);
    std::vector<std::string> bad;
    auto all = store.load_all(&bad);
    ck_assert_int_eq(all.size(), 1);
    ck_assert_int_eq(bad.size(), 1);
    ck_assert_sstr_eq(all[0].node_name, "slurm-n1-42");
    ck_assert(all[0].draining);
    ck_assert_int_eq(all[0].job.gpus[0], 1);
    ck_assert(access((std::string(tmpl) + "/jobs/job_42_n1.json.tmp").c_str(), F_OK) != 0);
    // With a background sync, a save is readable at once and hands the
    // fsync of exactly that file to the syncer.
    std::vector<std::string> synced;
    store.set_background_sync([&](const std::string &p) { synced.push_back(p); });
    r.draining = false;
    ck_assert(store.save(r).ok());
    ck_assert_int_eq(synced.size(), 1);
    ck_assert_sstr_eq(synced[0], store.path_of(42, "n1"));
    sync_to_disk(synced[0]);
    sync_to_disk(std::string(tmpl) + "/jobs/nonexistent.json");  // gone meanwhile: no error
    bad.clear();
    all = store.load_all(&bad);
    ck_assert_int_eq(all.size(), 1);
    ck_assert(!all[0].draining);
    ck_assert(store.remove(42, "n1").ok());
    ck_assert(store.remove(42, "n1").ok());  // idempotent
    unlink((std::string(tmpl) + "/jobs/job_7_n1.json").c_str());
    rmdir((std::string(tmpl) + "/jobs").c_str());
    ck_assert_int_eq(rmdir(tmpl), 0);
}
END_TEST

// A dead shim's state.json: only unfinished pods' well-formed records name
// processes to stop (negative rows: anything else names none).
static const struct {
    const char *state;
    size_t n;
} kRecords[] = {
    {R"({"finished":false,"processes":{"a":{"pid":1234,"start_ticks":99},"b":{"pid":77,"start_ticks":5}}})",
     2},
    {R"({"finished":true,"processes":{"a":{"pid":1234,"start_ticks":99}}})", 0},
    {R"({"finished":false,"processes":{"a":{"pid":1,"start_ticks":99}}})", 0},
    {R"({"finished":false,"processes":{"a":{"pid":-5,"start_ticks":99}}})", 0},
    {R"({"finished":false,"processes":{"a":{"pid":"12","start_ticks":99}}})", 0},
    {R"({"finished":false,"processes":{"a":{"pid":12}}})", 0},
    {R"({"finished":false,"processes":{"a":{"pid":12,"start_ticks":0}}})", 0},
    {R"({"finished":false,"processes":{"a":{"pid":99999999999,"start_ticks":3}}})", 0},
    {R"({"finished":false,"processes":[1,2]})", 0},
    {R"([1,2])", 0},
    {R"({"finished":false})", 0},
};

START_TEST(lost_shim_records) {
    auto procs = recorded_processes(J(kRecords[_i].state));
    ck_assert_uint_eq(procs.size(), kRecords[_i].n);
    if (_i == 0) {
        ck_assert_int_eq(procs[0].pid, 1234);
        ck_assert_uint_eq(procs[0].start_ticks, 99);
    }
}
END_TEST

START_TEST(lost_shim_status) {
    Json::Value st =
        shim_lost_status(J(R"({"phase":"Running","conditions":[{"type":"Ready","status":"True"},
              {"type":"Initialized","status":"True"}],
              "containerStatuses":[{"name":"a","ready":true,"started":true,"containerID":"x",
                                    "state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}},
                                   {"name":"b","ready":false,
                                    "state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]})"),
                         "the shim died", "2026-01-01T00:01:00Z");
    ck_assert_sstr_eq(st["phase"].asString(), "Failed");
    ck_assert_sstr_eq(st["reason"].asString(), "ShimLost");
    ck_assert_sstr_eq(st["message"].asString(), "the shim died");
    const Json::Value &a = st["containerStatuses"][0];
    ck_assert_int_eq(a["state"]["terminated"]["exitCode"].asInt(), 137);
    ck_assert_sstr_eq(a["state"]["terminated"]["startedAt"].asString(), "2026-01-01T00:00:00Z");
    ck_assert_sstr_eq(a["state"]["terminated"]["finishedAt"].asString(), "2026-01-01T00:01:00Z");
    ck_assert(!a["state"].isMember("running"));
    ck_assert(!a["ready"].asBool() && !a["started"].asBool());
    // An already finished container keeps its own result.
    ck_assert_sstr_eq(st["containerStatuses"][1]["state"]["terminated"]["reason"].asString(),
                      "Completed");
    ck_assert_sstr_eq(st["conditions"][0]["status"].asString(), "False");
    ck_assert_sstr_eq(st["conditions"][1]["status"].asString(), "True");
    ck_assert(pod_is_terminal(st));
    // No status at all (never reported): still a well-formed Failed one.
    Json::Value empty = shim_lost_status(Json::Value(), "m", "t");
    ck_assert_sstr_eq(empty["phase"].asString(), "Failed");
    ck_assert(!empty.isMember("containerStatuses") && !empty.isMember("conditions"));
}
END_TEST

START_TEST(lost_shim_process_checks) {
    unsigned long long me = proc_start_ticks(getpid());
    ck_assert(me > 0);
    ck_assert(!process_gone(getpid(), me));
    ck_assert(process_gone(getpid(), me + 1));  // a reused pid
    ck_assert(process_gone(0x3ffffff, 1));      // no such process
    ck_assert_uint_eq(proc_start_ticks(-1), 0);
    // Nothing under a missing state dir: nothing signalled.
    ck_assert_int_eq(stop_recorded_processes("/nonexistent/sk-state", getuid(), getgid()), 0);
}
END_TEST

int main() {
    Suite *s = suite_create("agent_core");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, micro_time_has_six_digits);
    tcase_add_test(tc, node_has_kubelet_shape);
    tcase_add_test(tc, job_taints_replace_default);
    tcase_add_test(tc, status_patch_orders_conditions);
    tcase_add_test(tc, cordon_patch_keeps_taints);
    tcase_add_test(tc, ownership_by_labels);
    tcase_add_test(tc, lease_like_kubelet);
    tcase_add_test(tc, watch_split_chunks);
    tcase_add_test(tc, watch_error_410);
    tcase_add_loop_test(tc, watch_bad_lines, 0, TABLE_SIZE(kBadWatchLines));
    tcase_add_test(tc, watch_line_bound);
    tcase_add_test(tc, backoff_doubles_and_caps);
    tcase_add_test(tc, status_patch_only_changes);
    tcase_add_test(tc, status_patch_clears_reason);
    tcase_add_test(tc, refused_and_job_end);
    tcase_add_test(tc, events_from_transitions);
    tcase_add_test(tc, env_resolves_every_kind);
    tcase_add_loop_test(tc, env_missing_refs_fail, 0, TABLE_SIZE(kEnvFails));
    tcase_add_loop_test(tc, quantities, 0, TABLE_SIZE(kQuantities));
    tcase_add_test(tc, base64_round_trip);
    tcase_add_loop_test(tc, op_authorization, 0, TABLE_SIZE(kOps));
    tcase_add_loop_test(tc, attach_authorization, 0, TABLE_SIZE(kAttach));
    tcase_add_test(tc, config_good);
    tcase_add_loop_test(tc, config_bad, 0, TABLE_SIZE(kBadConfs));
    tcase_add_test(tc, config_extra_runtime);
    tcase_add_test(tc, config_requires_credentials);
    tcase_add_test(tc, kubeconfig_subset);
    tcase_add_test(tc, node_names);
    tcase_add_test(tc, job_store_round_trip);
    tcase_add_loop_test(tc, lost_shim_records, 0, TABLE_SIZE(kRecords));
    tcase_add_test(tc, lost_shim_status);
    tcase_add_test(tc, lost_shim_process_checks);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
