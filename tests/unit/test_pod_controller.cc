// The pod controller at its seams: a VirtualNode driven through its public
// interface (start, set_runtime, deregister, state, count_phases) on a
// virtual clock (tests/unit/controller_env.h), with the fake HTTP transport standing in for the API
// server and the fake runtime for the shim. Asserts only what can be observed: the requests sent,
// the runtime's calls, the callbacks (as virtual-kubelet's node/ mock tests do).
#include <time.h>

#include <string>
#include <vector>

#include "agent/controllers/node_builder.h"
#include "common/rfc3339.h"
#include "tests/unit/check_main.h"
#include "tests/unit/controller_env.h"

using namespace sk;
using namespace sk::agent;
using namespace sk::agent::test;

namespace {

// Started, listed (these pods), the fake runtime attached, the watch open.
void start_with_pods(ControllerEnv &env, const std::vector<Json::Value> &pods) {
    env.serve_node_and_lease();
    env.serve_pods(pods);
    env.start_node();
    env.attach_fake_runtime();
    ck_assert_msg(env.run_until([&] { return env.http().open_stream(kPodsPath) != 0; }),
                  "the pod watch did not open");
}

std::string param(const std::string &path, const std::string &key) {
    size_t at = path.find(key + "=");
    if (at == std::string::npos) return "";
    size_t from = at + key.size() + 1;
    return path.substr(from, path.find('&', from) - from);
}

// The watch requests (streams) sent so far.
std::vector<FakeRequest> watches(ControllerEnv &env) {
    std::vector<FakeRequest> out;
    for (const auto &r : env.http().matching("GET", kPodsPath))
        if (r.stream) out.push_back(r);
    return out;
}

size_t lists(ControllerEnv &env) {
    return env.http().matching("GET", kPodsPath).size() - watches(env).size();
}

const FakeRuntime::Call *kill_of(const FakeRuntime &rt, const std::string &uid) {
    for (const auto &k : rt.kills())
        if (k.uid == uid) return &k;
    return nullptr;
}

std::string status_path(const std::string &name) {
    return "/api/v1/namespaces/default/pods/" + name + "/status";
}

// A pod of ServiceAccount trainer with the admission's kube-api-access
// volume: a projected token the agent requests before the pod runs.
Json::Value pod_with_token(const std::string &name, const std::string &uid) {
    Json::Value p = make_pod(name, uid);
    p["spec"]["serviceAccountName"] = "trainer";
    Json::Value vol(Json::objectValue);
    vol["name"] = "kube-api-access-abcde";
    Json::Value src(Json::objectValue);
    src["serviceAccountToken"]["expirationSeconds"] = 3607;
    src["serviceAccountToken"]["path"] = "token";
    vol["projected"]["sources"].append(src);
    p["spec"]["volumes"].append(vol);
    return p;
}

Json::Value deleting(Json::Value pod, uint32_t grace) {
    pod["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z";
    pod["metadata"]["deletionGracePeriodSeconds"] = grace;
    return pod;
}

}  // namespace

// ---- watch sequences ----
// One step: an event pushed on the open watch, or the watch's end.
struct WatchStep {
    const char *type;  // ADDED MODIFIED DELETED BOOKMARK ERROR, or END
    const char *rv;    // the object's resourceVersion
    int end_status;    // END: 200 (closed by the server), 410, or 0 (transport failure)
};
struct WatchCase {
    const char *name;
    WatchStep steps[4];
    unsigned runs;            // runtime run() calls for p1
    const char *kill_reason;  // runtime kill() of p1, "" = none
    size_t lists;             // pod lists sent (1 = the first only)
    const char *watch_rv;     // resourceVersion of the last watch request
};
static const WatchCase kWatchCases[] = {
    {"ADDED runs the pod", {{"ADDED", "11", 0}}, 1, "", 1, "10"},
    {"MODIFIED does not run it again", {{"ADDED", "11", 0}, {"MODIFIED", "12", 0}}, 1, "", 1, "10"},
    {"DELETED lets the runtime forget it",
     {{"ADDED", "11", 0}, {"DELETED", "13", 0}},
     1,
     "Deleted",
     1,
     "10"},
    {"a BOOKMARK moves the resume point",
     {{"ADDED", "11", 0}, {"BOOKMARK", "30", 0}, {"END", "", 200}},
     1,
     "",
     1,
     "30"},
    {"a closed stream resumes from the last event",
     {{"ADDED", "11", 0}, {"END", "", 200}},
     1,
     "",
     1,
     "11"},
    // ERROR 410 (history expired): a fresh list, in which p1 is gone.
    {"ERROR 410 relists",
     {{"ADDED", "11", 0}, {"ERROR", "", 0}, {"END", "", 200}},
     1,
     "Deleted",
     2,
     "10"},
    {"a watch answered 410 relists", {{"ADDED", "11", 0}, {"END", "", 410}}, 1, "Deleted", 2, "10"},
    {"a broken stream resumes after a back-off, no relist",
     {{"ADDED", "11", 0}, {"END", "", 0}},
     1,
     "",
     1,
     "11"},
};

START_TEST(watch_sequences) {
    const WatchCase &c = kWatchCases[_i];
    ControllerEnv env;
    start_with_pods(env, {});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    Json::Value p1 = make_pod("p1", "u1");
    env.serve_pod(p1);
    for (const auto &s : c.steps) {
        if (!s.type) break;
        uint64_t id = env.http().open_stream(kPodsPath);
        ck_assert_msg(id != 0, "%s: no open watch before %s", c.name, s.type);
        std::string type = s.type;
        size_t before = watches(env).size();
        if (type == "END") {
            if (s.end_status == 0)
                env.http().end(id, FakeAnswer::refuse());
            else if (s.end_status == 200)
                env.http().end(id, FakeAnswer{200, "", false});
            else
                env.http().end(id, FakeAnswer::error(s.end_status, "Expired"));
            ck_assert_msg(env.run_until([&] { return watches(env).size() > before; }, 3000),
                          "%s: no new watch after the end", c.name);
            continue;
        }
        Json::Value obj = p1;
        if (type == "ERROR") {
            obj = Json::Value(Json::objectValue);
            obj["kind"] = "Status";
            obj["code"] = 410;
            obj["reason"] = "Expired";
            obj["message"] = "too old resource version";
        } else if (type == "BOOKMARK") {
            obj = Json::Value(Json::objectValue);
            obj["kind"] = "Pod";
            obj["metadata"]["resourceVersion"] = s.rv;
        } else {
            obj = env.served_pod("p1");  // the API's copy: its status as last PATCHed
            obj["metadata"]["resourceVersion"] = s.rv;
        }
        env.http().push(id, type, obj);
        env.run_for(150);
    }
    env.run_for(300);
    ck_assert_msg(rt->run_calls() == c.runs, "%s: %u runs", c.name, rt->run_calls());
    const FakeRuntime::Call *k = kill_of(*rt, "u1");
    if (*c.kill_reason) {
        ck_assert_msg(k != nullptr, "%s: p1 not killed", c.name);
        ck_assert_sstr_eq(k->reason, c.kill_reason);
        ck_assert_uint_eq(k->grace_s, 0);
    } else {
        ck_assert_msg(k == nullptr, "%s: p1 killed (%s)", c.name, k ? k->reason.c_str() : "");
    }
    ck_assert_msg(lists(env) == c.lists, "%s: %zu lists", c.name, lists(env));
    auto w = watches(env);
    ck_assert_sstr_eq(param(w.back().path, "resourceVersion"), c.watch_rv);
    ck_assert(w.back().path.find("allowWatchBookmarks=true") != std::string::npos);
    // A pod deleted from the API is never DELETEd by the agent.
    ck_assert_uint_eq(env.http().count("DELETE", "/api/v1/namespaces/default/pods/p1"), 0);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- status: PATCHed only when it changed ----
START_TEST(status_no_op_suppressed) {
    ControllerEnv env;
    Json::Value p1 = make_pod("p1", "u1");
    start_with_pods(env, {p1});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    ck_assert(env.run_until([&] { return env.served_pod("p1")["status"]["phase"] == "Running"; }));
    env.run_for(200);
    ck_assert_uint_eq(env.http().count("PATCH", status_path("p1")), 1);
    Json::Value patch = env.http().matching("PATCH", status_path("p1"))[0].json();
    ck_assert_sstr_eq(patch["metadata"]["uid"].asString(), "u1");
    ck_assert_sstr_eq(patch["status"]["hostIP"].asString(), "127.0.0.1");

    // The runtime repeats the same status; the watch echoes the API's copy.
    Json::Value running = env.served_pod("p1")["status"];
    ck_assert(rt->set_status("u1", running));
    Json::Value echo = env.served_pod("p1");
    env.http().push(env.http().open_stream(kPodsPath), "MODIFIED", echo);
    env.run_for(300);
    ck_assert_uint_eq(env.http().count("PATCH", status_path("p1")), 1);

    // A real change is written once.
    ck_assert(rt->set_status("u1", FakeRuntime::terminated_status(p1, running, 3, 1795963182)));
    ck_assert(env.run_until([&] { return env.served_pod("p1")["status"]["phase"] == "Failed"; }));
    env.run_for(200);
    ck_assert_uint_eq(env.http().count("PATCH", status_path("p1")), 2);
    std::map<std::string, int64_t> phases;
    env.node->count_phases(&phases);
    ck_assert_int_eq(phases["Failed"], 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- admission: who may run here ----
// With no namespace list (the job's or the site's) no pod runs; a DaemonSet's
// pods are refused unless the site allows them. Each refusal is the pod's
// Failed status with a reason and a Warning Event saying what to do.
START_TEST(admission_refusals) {
    ControllerEnv env;
    env.cfg().allowed_namespaces.clear();  // the default: none
    Json::Value plain = make_pod("p1", "u1");
    Json::Value ds = make_pod("p2", "u2");
    Json::Value owner(Json::objectValue);
    owner["apiVersion"] = "apps/v1";
    owner["kind"] = "DaemonSet";
    owner["name"] = "node-exporter";
    owner["uid"] = "ds-1";
    owner["controller"] = true;
    ds["metadata"]["ownerReferences"].append(owner);
    start_with_pods(env, {plain});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    ck_assert(env.run_until([&] { return env.served_pod("p1")["status"]["phase"] == "Failed"; }));
    Json::Value st = env.served_pod("p1")["status"];
    ck_assert_sstr_eq(st["reason"].asString(), "NamespaceNotAllowed");
    ck_assert_sstr_eq(st["message"].asString(),
                      "namespace default may not use the nodes of Slurm job 42: the job named no "
                      "namespace (sbatch --k8s-namespace=NS) and this site allows none by default");
    ck_assert(!rt->has("u1"));

    // Any namespace, the DaemonSet's pod still refused.
    env.cfg().allowed_namespaces = {"*"};
    env.serve_pod(ds);
    env.http().push(env.http().open_stream(kPodsPath), "ADDED", ds);
    ck_assert(env.run_until([&] { return env.served_pod("p2")["status"]["phase"] == "Failed"; }));
    st = env.served_pod("p2")["status"];
    ck_assert_sstr_eq(st["reason"].asString(), "DaemonSetNotAllowed");
    ck_assert_msg(st["message"].asString().find(
                      "pods of DaemonSet default/node-exporter do not run on the nodes Slurm "
                      "jobs lend (they would run inside the job of user alice)") == 0,
                  "%s", st["message"].asString().c_str());
    ck_assert(!rt->has("u2"));
    bool event = false;
    for (const auto &r : env.http().matching("POST", "/api/v1/namespaces/default/events"))
        event = event || r.json()["reason"].asString() == "DaemonSetNotAllowed";
    ck_assert_msg(event, "no DaemonSetNotAllowed Event");

    // Allowed by the site: it runs. A pod that merely names a DaemonSet as a
    // non-controlling owner was never refused.
    env.cfg().allow_daemonsets = true;
    Json::Value ds3 = ds;
    ds3["metadata"]["name"] = "p3";
    ds3["metadata"]["uid"] = "u3";
    env.serve_pod(ds3);
    env.http().push(env.http().open_stream(kPodsPath), "ADDED", ds3);
    ck_assert(env.run_until([&] { return rt->has("u3"); }));
    env.cfg().allow_daemonsets = false;
    Json::Value loose = ds;
    loose["metadata"]["name"] = "p4";
    loose["metadata"]["uid"] = "u4";
    loose["metadata"]["ownerReferences"][0]["controller"] = false;
    env.serve_pod(loose);
    env.http().push(env.http().open_stream(kPodsPath), "ADDED", loose);
    ck_assert(env.run_until([&] { return rt->has("u4"); }));
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- no failed-pod storms ----
// A refused pod's ReplicaSet makes the next at once: refused at once too,
// that is thousands of Failed pods a minute. Here every Failed status brings
// the next pod of the same owner, as a ReplicaSet does; in 3.5 s the owner
// gets 3 refusals (at 0, 1 and 3 s), the pod waiting its turn an Event.
START_TEST(refusals_of_one_owner_spaced) {
    ControllerEnv env;
    env.cfg().allowed_namespaces.clear();
    Json::Value owner(Json::objectValue);
    owner["apiVersion"] = "apps/v1";
    owner["kind"] = "ReplicaSet";
    owner["name"] = "web-5d8f";
    owner["uid"] = "rs-1";
    owner["controller"] = true;
    int made = 0;
    auto next_pod = [&] {
        made++;
        Json::Value p = make_pod("web-" + std::to_string(made), "uw" + std::to_string(made));
        p["metadata"]["ownerReferences"].append(owner);
        env.serve_pod(p);
        return p;
    };
    Json::Value first = next_pod();
    start_with_pods(env, {first});
    int refused = 0;
    uint64_t t0 = env.now_ms();
    std::vector<uint64_t> at;
    // The ReplicaSet: a Failed status of its last pod brings the next one.
    while (env.now_ms() - t0 < 3500) {
        env.run_for(20);
        Json::Value last = env.served_pod("web-" + std::to_string(made));
        if (last["status"]["phase"] == "Failed") {
            refused++;
            at.push_back(env.now_ms() - t0);
            env.http().push(env.http().open_stream(kPodsPath), "ADDED", next_pod());
        }
    }
    ck_assert_msg(refused == 3, "%d refusals in 3.5 s", refused);
    ck_assert_msg(at[1] >= 900 && at[2] >= 2900, "at %llu, %llu ms",
                  static_cast<unsigned long long>(at[1]), static_cast<unsigned long long>(at[2]));
    // The pod waiting its turn is Pending, its refusal said in an Event.
    Json::Value waiting = env.served_pod("web-" + std::to_string(made));
    ck_assert(waiting["status"]["phase"] != "Failed");
    size_t events = 0;
    for (const auto &r : env.http().matching("POST", "/api/v1/namespaces/default/events"))
        events +=
            r.json()["reason"].asString() == "NamespaceNotAllowed" &&
            r.json()["involvedObject"]["name"].asString() == waiting["metadata"]["name"].asString();
    ck_assert_uint_eq(events, 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- projected ServiceAccount tokens ----
// A pod's kube-api-access volume gets a TokenRequest bound to it before it
// runs; at 80 % of the token's reported lifetime a new one is requested and
// written into the running pod (the runtime's update_files).
START_TEST(projected_token_renewed) {
    ControllerEnv env;
    Json::Value p1 = pod_with_token("p1", "u1");
    const std::string path = "/api/v1/namespaces/default/serviceaccounts/trainer/token";
    int issued = 0;
    env.http().on("POST", path, [&](const FakeRequest &) {
        Json::Value tr(Json::objectValue);
        tr["status"]["token"] = "tok-" + std::to_string(++issued);
        // A 2 s lifetime as the API server reports it: renewed after 1.6 s.
        tr["status"]["expirationTimestamp"] = rfc3339(time(nullptr) + 2);
        return FakeAnswer::ok(tr);
    });
    start_with_pods(env, {p1});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    ck_assert(env.run_until([&] { return rt->has("u1"); }));
    auto posts = env.http().matching("POST", path);
    ck_assert_uint_eq(posts.size(), 1);
    Json::Value body = posts[0].json();
    ck_assert_sstr_eq(body["spec"]["boundObjectRef"]["uid"].asString(), "u1");
    ck_assert_int_eq(body["spec"]["expirationSeconds"].asInt(), 3607);
    ck_assert(env.run_until([&] { return rt->file_updates().size() >= 1; }, 5000));
    const auto &u = rt->file_updates()[0];
    ck_assert_sstr_eq(u.uid, "u1");
    ck_assert_sstr_eq(u.files.at("kube-api-access-abcde").at("token"), "tok-2");
    // And again, from the renewed token's own lifetime.
    ck_assert(env.run_until([&] { return rt->file_updates().size() >= 2; }, 5000));
    ck_assert_sstr_eq(rt->file_updates()[1].files.at("kube-api-access-abcde").at("token"), "tok-3");
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- ConfigMap volumes ----
// Every volume_refresh_s the ConfigMaps of a running pod's volumes are read
// again: a round that changes nothing writes nothing; a changed key is
// written in place (the runtime's update_files), a key added since the start
// is not (the runtime's volume holds the start's keys).
START_TEST(configmap_volume_updated_in_place) {
    ControllerEnv env;
    env.cfg().volume_refresh_s = 1;
    Json::Value p1 = make_pod("p1", "u1");
    Json::Value vol(Json::objectValue);
    vol["name"] = "conf";
    vol["configMap"]["name"] = "cfg";
    p1["spec"]["volumes"].append(vol);
    std::string mode = "fast";
    bool extra = false;
    const std::string path = "/api/v1/namespaces/default/configmaps/cfg";
    env.http().on("GET", path, [&](const FakeRequest &) {
        Json::Value cm(Json::objectValue);
        cm["data"]["mode"] = mode;
        if (extra) cm["data"]["extra"] = "new";
        return FakeAnswer::ok(cm);
    });
    start_with_pods(env, {p1});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    ck_assert(env.run_until([&] { return rt->has("u1"); }));
    size_t reads = env.http().count("GET", path);
    ck_assert(env.run_until([&] { return env.http().count("GET", path) >= reads + 2; }, 5000));
    ck_assert_uint_eq(rt->file_updates().size(), 0);  // nothing changed
    mode = "slow";
    extra = true;
    ck_assert(env.run_until([&] { return !rt->file_updates().empty(); }, 5000));
    const auto &u = rt->file_updates()[0];
    ck_assert_sstr_eq(u.uid, "u1");
    ck_assert_uint_eq(u.files.size(), 1);
    ck_assert_uint_eq(u.files.at("conf").size(), 1);
    ck_assert_sstr_eq(u.files.at("conf").at("mode"), "slow");
    // Written once: the next rounds find the runtime's copy current.
    reads = env.http().count("GET", path);
    ck_assert(env.run_until([&] { return env.http().count("GET", path) >= reads + 2; }, 5000));
    ck_assert_uint_eq(rt->file_updates().size(), 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- a start that a read blocks ----
// A node identity's TokenRequest refused while the API server's Node
// authorizer has not seen the binding yet (the real server's 403): the start
// is tried again with back-off, without waiting for a change of the pod, and
// a refusal that passes leaves no Event and no error in the pod's status.
START_TEST(start_retried_after_refusal) {
    ControllerEnv env;
    Json::Value p1 = pod_with_token("p1", "u1");
    Json::Value tr(Json::objectValue);
    tr["status"]["token"] = "tok";
    tr["status"]["expirationTimestamp"] = rfc3339(time(nullptr) + 3600);
    const std::string path = "/api/v1/namespaces/default/serviceaccounts/trainer/token";
    const char *msg =
        "serviceaccounts \"trainer\" is forbidden: node requested token bound to a pod "
        "scheduled on a different node";
    env.http().on("POST", path,
                  {FakeAnswer::error(403, "Forbidden", msg),
                   FakeAnswer::error(403, "Forbidden", msg), FakeAnswer::ok(tr)});
    start_with_pods(env, {p1});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    ck_assert(env.run_until([&] { return rt->has("u1"); }));
    ck_assert_uint_eq(env.http().count("POST", path), 3);
    ck_assert_uint_eq(rt->run_calls(), 1);
    for (const auto &r : env.http().matching("POST", "/api/v1/namespaces/default/events"))
        ck_assert_msg(r.json()["type"].asString() != "Warning", "a passing refusal posted %s",
                      r.json()["reason"].asString().c_str());
    for (const auto &r : env.http().matching("PATCH", status_path("p1")))
        ck_assert_msg(r.body.find("ContainerCreating") == std::string::npos &&
                          r.body.find("CreateContainerConfigError") == std::string::npos,
                      "the pod's status showed the passing refusal: %s", r.body.c_str());
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// A ConfigMap the env needs that does not exist yet: the pod says so at
// once (CreateContainerConfigError and the kubelet's Failed event), and
// starts by itself once the ConfigMap is there, with no change of the pod.
START_TEST(start_waits_for_missing_configmap) {
    ControllerEnv env;
    Json::Value p1 = make_pod("p1", "u1");
    Json::Value e(Json::objectValue);
    e["name"] = "MODE";
    e["valueFrom"]["configMapKeyRef"]["name"] = "cfg";
    e["valueFrom"]["configMapKeyRef"]["key"] = "mode";
    p1["spec"]["containers"][0]["env"].append(e);
    bool exists = false;
    const std::string path = "/api/v1/namespaces/default/configmaps/cfg";
    env.http().on("GET", path, [&](const FakeRequest &) {
        if (!exists) return FakeAnswer::error(404, "NotFound", "configmaps \"cfg\" not found");
        Json::Value cm(Json::objectValue);
        cm["data"]["mode"] = "fast";
        return FakeAnswer::ok(cm);
    });
    start_with_pods(env, {p1});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    auto waiting = [&](const char *key) {
        return env.served_pod("p1")["status"]["containerStatuses"][0]["state"]["waiting"][key]
            .asString();
    };
    ck_assert(env.run_until([&] { return waiting("reason") == "CreateContainerConfigError"; }));
    ck_assert_msg(waiting("message").find("configmap \"cfg\" not found") != std::string::npos, "%s",
                  waiting("message").c_str());
    ck_assert_sstr_eq(env.served_pod("p1")["status"]["phase"].asString(), "Pending");
    ck_assert(env.run_until([&] {
        for (const auto &r : env.http().matching("POST", "/api/v1/namespaces/default/events"))
            if (r.json()["reason"].asString() == "Failed") return true;
        return false;
    }));
    ck_assert(!rt->has("u1"));
    size_t before = env.http().count("GET", path);
    ck_assert(env.run_until([&] { return env.http().count("GET", path) > before; }));
    exists = true;
    ck_assert(env.run_until([&] { return rt->has("u1"); }, 15000));
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- graceful delete ----
START_TEST(graceful_delete) {
    ControllerEnv env;
    start_with_pods(env, {make_pod("p1", "u1")});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    ck_assert(env.run_until([&] { return env.served_pod("p1")["status"]["phase"] == "Running"; }));
    env.serve_pod(deleting(env.served_pod("p1"), 17));  // `kubectl delete pod p1`
    env.http().push(env.http().open_stream(kPodsPath), "MODIFIED", env.served_pod("p1"));
    ck_assert(env.run_until(
        [&] { return env.http().count("DELETE", "/api/v1/namespaces/default/pods/p1") > 0; }));
    const FakeRuntime::Call *k = kill_of(*rt, "u1");
    ck_assert(k != nullptr);
    ck_assert_uint_eq(k->grace_s, 17);  // the pod's own grace
    ck_assert_sstr_eq(k->reason, "Killing");
    // The terminal status is written before the final delete.
    ck_assert_sstr_eq(env.served_pod("p1")["status"]["phase"].asString(), "Succeeded");
    auto del = env.http().matching("DELETE", "/api/v1/namespaces/default/pods/p1");
    ck_assert_uint_eq(del.size(), 1);
    ck_assert_int_eq(del[0].json()["gracePeriodSeconds"].asInt(), 0);
    ck_assert_sstr_eq(del[0].json()["preconditions"]["uid"].asString(), "u1");
    auto patches = env.http().matching("PATCH", status_path("p1"));
    ck_assert_uint_lt(patches.back().id, del[0].id);
    // Events: Killing for the container.
    bool killing = false;
    for (const auto &r : env.http().matching("POST", "/api/v1/namespaces/default/events"))
        killing = killing || r.json()["reason"].asString() == "Killing";
    ck_assert(killing);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- API errors: 404, 409 ----
struct ErrorCase {
    const char *name;
    const char *method;  // PATCH (status) or DELETE (final delete)
    long status;
    const char *reason;
    size_t expect_requests;   // of that method to p1 after the error
    const char *kill_reason;  // runtime kill() of p1 after the error ("" = none beyond Killing)
};
static const ErrorCase kErrorCases[] = {
    // deleted meanwhile: forget it, and the runtime forgets it too
    {"status PATCH 404", "PATCH", 404, "NotFound", 1, "Deleted"},
    // a write conflict: written again after a pause, with the newest status
    {"status PATCH 409", "PATCH", 409, "Conflict", 2, ""},
    // the uid precondition failed (a new pod under the name): done, never retried
    {"final DELETE 409", "DELETE", 409, "Conflict", 1, ""},
    {"final DELETE 404", "DELETE", 404, "NotFound", 1, ""},
};
START_TEST(api_errors) {
    const ErrorCase &c = kErrorCases[_i];
    ControllerEnv env;
    std::string method = c.method;
    if (method == "PATCH") env.fail_pod_patches("p1", {FakeAnswer::error(c.status, c.reason)});
    if (method == "DELETE")
        env.http().on("DELETE", "/api/v1/namespaces/default/pods/p1",
                      {FakeAnswer::error(c.status, c.reason)});
    start_with_pods(env, {make_pod("p1", "u1")});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    std::string path = method == "PATCH" ? status_path("p1") : "/api/v1/namespaces/default/pods/p1";
    if (method == "DELETE") {
        ck_assert(
            env.run_until([&] { return env.served_pod("p1")["status"]["phase"] == "Running"; }));
        env.serve_pod(deleting(env.served_pod("p1"), 5));
        env.http().push(env.http().open_stream(kPodsPath), "MODIFIED", env.served_pod("p1"));
    }
    ck_assert_msg(env.run_until([&] { return env.http().count(method, path) >= 1; }), "%s", c.name);
    env.run_for(1600);         // past the 1 s retry pause
    if (method == "DELETE") {  // the watch repeats the pod: a finished delete is not sent again
        env.http().push(env.http().open_stream(kPodsPath), "MODIFIED", env.served_pod("p1"));
        env.run_for(300);
    }
    ck_assert_msg(env.http().count(method, path) == c.expect_requests, "%s: %zu requests", c.name,
                  env.http().count(method, path));
    const FakeRuntime::Call *k = nullptr;  // the first kill after the error
    for (const auto &call : rt->kills())
        if (!k && call.uid == "u1" && call.reason != "Killing") k = &call;
    if (*c.kill_reason) {
        ck_assert_msg(k != nullptr, "%s: not forgotten by the runtime", c.name);
        ck_assert_sstr_eq(k->reason, c.kill_reason);
    } else {
        ck_assert_msg(k == nullptr, "%s: runtime kill %s", c.name, k ? k->reason.c_str() : "");
    }
    if (method == "PATCH" && c.status == 409)
        ck_assert_sstr_eq(env.served_pod("p1")["status"]["phase"].asString(), "Running");
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- drain (deregister) ----
struct DrainCase {
    const char *name;
    bool runtime;       // a runtime is attached (else the pods never ran)
    uint32_t stopped;   // done(pods_stopped)
    const char *phase;  // final phase of the pods
    bool p1_recreated;  // p1's DELETE fails its uid precondition (409): it is gone
};
static const DrainCase kDrainCases[] = {
    {"running pods are stopped", true, 2, "Succeeded", false},
    {"pods that never ran fail", false, 0, "Failed", false},
    {"a pod re-created under its name counts as deleted", true, 2, "Succeeded", true},
};
START_TEST(drain) {
    const DrainCase &c = kDrainCases[_i];
    ControllerEnv env;
    env.serve_node_and_lease();
    env.serve_pods({make_pod("p1", "u1"), make_pod("p2", "u2")});
    if (c.p1_recreated)
        env.http().on("DELETE", "/api/v1/namespaces/default/pods/p1",
                      {FakeAnswer::error(409, "Conflict", "Precondition failed: UID")});
    env.start_node();
    FakeRuntime *rt = c.runtime ? env.attach_fake_runtime() : nullptr;
    ck_assert(env.run_until([&] {
        return env.http().open_stream(kPodsPath) != 0 && env.http().count("POST", kLeasesPath);
    }));
    if (rt)
        ck_assert(env.run_until([&] {
            return env.served_pod("p1")["status"]["phase"] == "Running" &&
                   env.served_pod("p2")["status"]["phase"] == "Running";
        }));
    std::vector<std::string> bad;
    ck_assert_uint_eq(env.ctx().store->load_all(&bad).size(), 1);

    int done_calls = 0;
    uint32_t stopped = 99;
    env.node->deregister(7, "JobEnded", [&](uint32_t n) {
        done_calls++;
        stopped = n;
    });
    ck_assert_sstr_eq(env.node->state().phase, "draining");
    ck_assert(!env.node->state().ready);
    ck_assert_msg(env.run_until([&] { return done_calls > 0; }, 5000), "%s: no answer", c.name);
    ck_assert_int_eq(done_calls, 1);
    ck_assert_uint_eq(stopped, c.stopped);

    if (rt) {  // stopped with the job's grace and reason; the runtime shut down at the end
        for (const char *uid : {"u1", "u2"}) {
            const FakeRuntime::Call *k = kill_of(*rt, uid);
            ck_assert_msg(k != nullptr, "%s not stopped", uid);
            ck_assert_uint_eq(k->grace_s, 7);
            ck_assert_sstr_eq(k->reason, "JobEnded");
        }
        ck_assert_uint_eq(rt->shutdowns().size(), 1);
    }
    // Cordoned with the NoExecute taint of the job's end.
    bool tainted = false;
    for (const auto &r : env.http().matching("PATCH", kNodePath)) {
        if (r.path != kNodePath) continue;  // not .../status
        const Json::Value body = r.json();
        ck_assert(body["spec"]["unschedulable"].asBool());
        for (const auto &t : body["spec"]["taints"])
            tainted = tainted || (t["key"].asString() == kEndedTaintKey &&
                                  t["effect"].asString() == "NoExecute");
    }
    ck_assert(tainted);
    // Final statuses name the job's end, then each pod is deleted (grace 0, uid).
    uint64_t last_pod_delete = 0;
    for (const char *name : {"p1", "p2"}) {
        Json::Value st = env.served_pod(name)["status"];
        ck_assert_sstr_eq(st["phase"].asString(), c.phase);
        ck_assert_sstr_eq(st["reason"].asString(), "JobEnded");
        ck_assert(st["message"].asString().find("job 42") != std::string::npos);
        auto del =
            env.http().matching("DELETE", std::string("/api/v1/namespaces/default/pods/") + name);
        ck_assert_uint_eq(del.size(), 1);
        ck_assert_int_eq(del[0].json()["gracePeriodSeconds"].asInt(), 0);
        ck_assert_sstr_eq(del[0].json()["preconditions"]["uid"].asString(),
                          std::string(name) == "p1" ? "u1" : "u2");
        last_pod_delete = std::max(last_pod_delete, del[0].id);
    }
    // Then the Lease and the Node (uid preconditions), after the pods.
    auto lease_del = env.http().matching("DELETE", kLeasePath);
    auto node_del = env.http().matching("DELETE", kNodePath);
    ck_assert_uint_eq(lease_del.size(), 1);
    ck_assert_uint_eq(node_del.size(), 1);
    ck_assert_uint_gt(lease_del[0].id, last_pod_delete);
    ck_assert_uint_gt(node_del[0].id, lease_del[0].id);
    ck_assert_sstr_eq(lease_del[0].json()["preconditions"]["uid"].asString(), "lease-uid-1");
    ck_assert_sstr_eq(node_del[0].json()["preconditions"]["uid"].asString(), kNodeUid);
    // The job's record is gone; nothing is written after the drain.
    ck_assert_uint_eq(env.ctx().store->load_all(&bad).size(), 0);
    size_t n = env.http().requests().size();
    env.run_for(1200);
    ck_assert_uint_eq(env.http().requests().size(), n);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// A second deregister (an epilog retry) answers when the first one ends.
START_TEST(drain_twice_answers_both) {
    ControllerEnv env;
    start_with_pods(env, {make_pod("p1", "u1")});
    ck_assert(env.run_until([&] { return env.served_pod("p1")["status"]["phase"] == "Running"; }));
    int answers = 0;
    env.node->deregister(3, "JobEnded", [&](uint32_t n) { answers += n == 1; });
    env.node->deregister(3, "JobEnded", [&](uint32_t n) { answers += n == 1; });
    ck_assert(env.run_until([&] { return answers == 2; }, 5000));
    ck_assert_uint_eq(env.http().count("DELETE", kNodePath), 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- a pod DELETE in flight when the drain starts ----
// Sent before the drain (`kubectl delete pod`), answered during it: the drain
// ends as soon as that answer leaves nothing in the API, not on its grace +
// 5 s timer.
struct DeleteInFlightCase {
    const char *name;
    std::vector<FakeAnswer> answers;  // of p1's DELETE, in order (the first in flight)
    size_t deletes;                   // p1 DELETEs sent in all
    uint64_t done_before_ms;          // done this soon after deregister
};
static const DeleteInFlightCase kDeleteInFlight[] = {
    {"answered ok during the drain",
     {FakeAnswer::ok(Json::Value(Json::objectValue)).after_ms(300)},
     1,
     2500},
    {"answered 404 during the drain", {FakeAnswer::error(404, "NotFound").after_ms(300)}, 1, 2500},
    // The drain retries the failed delete after its 1 s pause.
    {"failed during the drain, retried by it",
     {FakeAnswer::error(500, "InternalError").after_ms(300),
      FakeAnswer::ok(Json::Value(Json::objectValue))},
     2,
     3500},
};
START_TEST(drain_with_delete_in_flight) {
    const DeleteInFlightCase &c = kDeleteInFlight[_i];
    const std::string del_path = "/api/v1/namespaces/default/pods/p1";
    ControllerEnv env;
    env.http().on("DELETE", del_path, c.answers);
    start_with_pods(env, {make_pod("p1", "u1")});
    ck_assert(env.run_until([&] { return env.served_pod("p1")["status"]["phase"] == "Running"; }));
    env.serve_pod(deleting(env.served_pod("p1"), 0));  // `kubectl delete pod p1 --grace-period=0`
    env.http().push(env.http().open_stream(kPodsPath), "MODIFIED", env.served_pod("p1"));
    ck_assert(env.run_until([&] { return env.http().count("DELETE", del_path) == 1; }));

    int done_calls = 0;
    uint64_t done_at = 0;
    const uint64_t start = env.now_ms();
    env.node->deregister(1, "JobEnded", [&](uint32_t) {  // timer: 1 + 5 s
        done_calls++;
        done_at = env.now_ms();
    });
    ck_assert_msg(env.run_until([&] { return done_calls > 0; }, 8000), "%s: no answer", c.name);
    ck_assert_msg(done_at - start < c.done_before_ms, "%s: done after %llu ms", c.name,
                  static_cast<unsigned long long>(done_at - start));
    ck_assert_uint_eq(env.http().count("DELETE", del_path), c.deletes);
    ck_assert_uint_eq(env.http().count("DELETE", kNodePath), 1);
    ck_assert_uint_gt(env.http().matching("DELETE", kLeasePath)[0].id,
                      env.http().matching("DELETE", del_path).back().id);
    ck_assert_int_eq(done_calls, 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- a pod list in flight when the node goes ----
// A relist sent before the drain ended the watch (no pods left: it goes at
// once), answered while the Lease and the Node are deleted: no watch and no
// further list follow.
struct ListInFlightCase {
    const char *name;
    FakeAnswer list;  // the relist's answer, in flight
};
static const ListInFlightCase kListInFlight[] = {
    {"answered with the pods", pod_list({}, "20").after_ms(300)},
    {"failed (a back-off, then a relist)", FakeAnswer::error(500, "InternalError").after_ms(300)},
};
START_TEST(drain_with_list_in_flight) {
    const ListInFlightCase &c = kListInFlight[_i];
    ControllerEnv env;
    env.http().on("DELETE", kLeasePath,
                  {FakeAnswer::ok(Json::Value(Json::objectValue)).after_ms(2000)});
    start_with_pods(env, {});
    env.http().on("GET", kPodsPath, {c.list});
    // A watch ERROR (410) and the stream's close: an immediate relist.
    uint64_t id = env.http().open_stream(kPodsPath);
    Json::Value expired(Json::objectValue);
    expired["kind"] = "Status";
    expired["code"] = 410;
    env.http().push(id, "ERROR", expired);
    env.http().end(id, FakeAnswer{200, "", false});
    ck_assert_msg(env.run_until([&] { return lists(env) == 2; }), "%s: no relist", c.name);

    const uint64_t mark = env.http().requests().back().id;
    int done_calls = 0;
    env.node->deregister(0, "JobEnded", [&](uint32_t) { done_calls++; });
    ck_assert_msg(env.run_until([&] { return done_calls > 0; }, 8000), "%s: no answer", c.name);
    env.run_for(1000);
    for (const auto &r : env.http().matching("GET", kPodsPath))
        ck_assert_msg(r.id <= mark, "%s: %s %s sent after the drain started", c.name,
                      r.stream ? "watch" : "list", r.path.c_str());
    ck_assert_uint_eq(env.http().count("DELETE", kNodePath), 1);
    ck_assert_int_eq(done_calls, 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- the first pod list late: the node went before it ever came back ----
// A restarted agent re-adopts a job that ended meanwhile and drains it
// before its first pod list answered. A pod the list would have named must
// not stay in the API: came the list during the drain, the pod gets the
// drain's final status and delete; came it only after the drain's budget
// (the node is gone), the node's leftover deletes list the pods bound to it
// (retried with back-off), set each Failed with the drain's reason, and
// delete it (grace 0, uid precondition). Nothing is re-created.
struct LateListCase {
    const char *name;
    std::vector<FakeAnswer> lists;  // the pod list's answers, in order (the last repeats)
    bool final_status;              // listed during the drain: final status JobEnded first
};
static const LateListCase kLateList[] = {
    {"answered during the drain", {pod_list({make_pod("p1", "u1")}, "10").after_ms(1500)}, true},
    {"answered after the drain's budget",
     {pod_list({make_pod("p1", "u1")}, "10").after_ms(6500)},
     false},
    {"failing past the budget, then answering",
     {FakeAnswer::error(500, "InternalError").after_ms(5500),
      FakeAnswer::error(503, "ServiceUnavailable"), pod_list({make_pod("p1", "u1")}, "10")},
     false},
};
START_TEST(drain_before_first_list) {
    const LateListCase &c = kLateList[_i];
    const std::string del_path = "/api/v1/namespaces/default/pods/p1";
    ControllerEnv env;
    env.serve_node_and_lease();
    env.serve_pods({make_pod("p1", "u1")});  // the status PATCHes
    env.http().on("GET", kPodsPath, c.lists);
    env.start_node();
    ck_assert(env.run_until([&] {
        return env.http().count("GET", kPodsPath) == 1 && env.http().count("POST", kLeasesPath);
    }));
    int done_calls = 0;
    env.node->deregister(0, "JobEnded", [&](uint32_t) { done_calls++; });
    ck_assert_msg(env.run_until([&] { return done_calls > 0; }, 8000), "%s: no answer", c.name);
    ck_assert_msg(env.run_until([&] { return env.http().count("DELETE", del_path) > 0; }, 8000),
                  "%s: p1 never deleted", c.name);
    env.run_for(600);
    auto del = env.http().matching("DELETE", del_path);
    ck_assert_uint_eq(del.size(), 1);
    ck_assert_int_eq(del[0].json()["gracePeriodSeconds"].asInt(), 0);
    ck_assert_sstr_eq(del[0].json()["preconditions"]["uid"].asString(), "u1");
    // Its final status names the job's end before its delete, either way.
    ck_assert_sstr_eq(env.served_pod("p1")["status"]["reason"].asString(), "JobEnded");
    ck_assert_sstr_eq(env.served_pod("p1")["status"]["phase"].asString(), "Failed");
    auto patches = env.http().matching("PATCH", del_path + "/status");
    ck_assert_uint_ge(patches.size(), 1);
    ck_assert_uint_lt(patches.back().id, del[0].id);
    if (c.final_status)
        ck_assert_uint_lt(del[0].id, env.http().matching("DELETE", kNodePath)[0].id);
    ck_assert_uint_eq(env.http().count("DELETE", kNodePath), 1);
    ck_assert_uint_eq(env.http().count("POST", "/api/v1/nodes"), 1);
    ck_assert_uint_eq(env.http().count("POST", kLeasesPath), 1);
    ck_assert_uint_eq(env.http().count("POST", "/api/v1/namespaces/default/pods"), 0);
    ck_assert_int_eq(done_calls, 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// A second deregister that comes once the first one answered (before the
// node is dropped) is answered at once, with the same count.
struct LateRetryCase {
    const char *name;
    bool from_done;  // from inside the first done, else on a later loop turn
};
static const LateRetryCase kLateRetry[] = {
    {"from the first answer", true},
    {"after the first answer", false},
};
START_TEST(drain_retry_after_done) {
    const LateRetryCase &c = kLateRetry[_i];
    ControllerEnv env;
    start_with_pods(env, {make_pod("p1", "u1")});
    ck_assert(env.run_until([&] { return env.served_pod("p1")["status"]["phase"] == "Running"; }));
    std::vector<uint32_t> answers;
    auto retry = [&] {
        env.node->deregister(3, "JobEnded", [&](uint32_t n) { answers.push_back(n); });
    };
    env.node->deregister(3, "JobEnded", [&](uint32_t n) {
        answers.push_back(n);
        if (c.from_done) retry();
    });
    ck_assert(env.run_until([&] { return !answers.empty(); }, 5000));
    if (!c.from_done) {
        env.run_for(100);
        retry();
    }
    ck_assert_msg(env.run_until([&] { return answers.size() == 2; }, 1000), "%s: %zu answers",
                  c.name, answers.size());
    ck_assert_uint_eq(answers[0], 1);
    ck_assert_uint_eq(answers[1], 1);
    ck_assert_uint_eq(env.http().count("DELETE", kNodePath), 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- the drain ahead of the job's end (--k8s-drain-before) ----
// The job's end, re-read every second, comes within drain_before_end: the
// running pod is stopped with its grace cut to the time left and ends
// Failed/Terminated with a DisruptionTarget condition, and stays in the API
// (its controller replaces it elsewhere); a pod bound afterwards is refused
// (NodeShutdown). The end moving away again lets new pods run.
const Json::Value *condition(const Json::Value &pod, const char *type) {
    for (const auto &c : pod["status"]["conditions"])
        if (c["type"] == type) return &c;
    return nullptr;
}

START_TEST(drain_ahead_of_end) {
    ControllerEnv env;
    env.cfg().drain_before_end_s = 30;
    env.cfg().end_time_check_s = 1;
    const int64_t now = static_cast<int64_t>(time(nullptr));
    int64_t end = now + 3600;
    env.slurm().on_end_time = [&](uint32_t, const std::function<void(int64_t)> &cb) { cb(end); };
    start_with_pods(env, {make_pod("p1", "u1")});
    auto *rt = static_cast<FakeRuntime *>(env.node->runtime());
    ck_assert(env.run_until([&] { return env.served_pod("p1")["status"]["phase"] == "Running"; }));
    env.run_for(1200);  // re-read once: an hour ahead, nothing happens
    ck_assert(kill_of(*rt, "u1") == nullptr);

    end = now + 20;  // scontrol update TimeLimit=: within drain_before_end now
    ck_assert_msg(
        env.run_until([&] { return env.served_pod("p1")["status"]["reason"] == "Terminated"; },
                      4000),
        "p1 not terminated: %s", env.served_pod("p1")["status"].toStyledString().c_str());
    const FakeRuntime::Call *k = kill_of(*rt, "u1");
    ck_assert(k != nullptr);
    ck_assert_msg(k->grace_s >= 15 && k->grace_s <= 20, "grace %u: not cut to the time left",
                  k->grace_s);
    Json::Value p1 = env.served_pod("p1");
    ck_assert_sstr_eq(p1["status"]["phase"].asString(), "Failed");
    ck_assert(p1["status"]["message"].asString().find("Slurm job 42") != std::string::npos);
    const Json::Value *dt = condition(p1, "DisruptionTarget");
    ck_assert_msg(dt != nullptr, "no DisruptionTarget: %s", p1["status"].toStyledString().c_str());
    ck_assert_sstr_eq((*dt)["reason"].asString(), "TerminationByKubelet");
    ck_assert_sstr_eq((*dt)["status"].asString(), "True");
    ck_assert(condition(p1, "PodScheduled") != nullptr);
    // Not deleted: it stays, Failed, until the job's end removes the node.
    ck_assert_uint_eq(env.http().count("DELETE", "/api/v1/namespaces/default/pods/p1"), 0);

    // A pod bound by name after the drain: refused, never run.
    unsigned runs = rt->run_calls();
    Json::Value p2 = make_pod("p2", "u2", "20");
    env.serve_pod(p2);
    env.http().push(env.http().open_stream(kPodsPath), "ADDED", p2);
    ck_assert(env.run_until([&] { return env.served_pod("p2")["status"]["phase"] == "Failed"; }));
    ck_assert_sstr_eq(env.served_pod("p2")["status"]["reason"].asString(), "NodeShutdown");
    ck_assert_uint_eq(rt->run_calls(), runs);

    // The end moves away (a longer time limit): pods run here again.
    end = now + 3600;
    env.run_for(1500);
    Json::Value p3 = make_pod("p3", "u3", "21");
    env.serve_pod(p3);
    env.http().push(env.http().open_stream(kPodsPath), "ADDED", p3);
    ck_assert(env.run_until([&] { return env.served_pod("p3")["status"]["phase"] == "Running"; }));
    ck_assert(kill_of(*rt, "u3") == nullptr);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

int main() {
    Suite *s = suite_create("pod_controller");
    TCase *tc = tcase_create("pods");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, watch_sequences, 0, TABLE_SIZE(kWatchCases));
    tcase_add_test(tc, status_no_op_suppressed);
    tcase_add_test(tc, admission_refusals);
    tcase_add_test(tc, refusals_of_one_owner_spaced);
    tcase_add_test(tc, projected_token_renewed);
    tcase_add_test(tc, configmap_volume_updated_in_place);
    tcase_add_test(tc, start_retried_after_refusal);
    tcase_add_test(tc, start_waits_for_missing_configmap);
    tcase_add_test(tc, graceful_delete);
    tcase_add_loop_test(tc, api_errors, 0, TABLE_SIZE(kErrorCases));
    tcase_add_loop_test(tc, drain, 0, TABLE_SIZE(kDrainCases));
    tcase_add_test(tc, drain_twice_answers_both);
    tcase_add_loop_test(tc, drain_with_delete_in_flight, 0, TABLE_SIZE(kDeleteInFlight));
    tcase_add_loop_test(tc, drain_with_list_in_flight, 0, TABLE_SIZE(kListInFlight));
    tcase_add_loop_test(tc, drain_retry_after_done, 0, TABLE_SIZE(kLateRetry));
    tcase_add_loop_test(tc, drain_before_first_list, 0, TABLE_SIZE(kLateList));
    tcase_add_test(tc, drain_ahead_of_end);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
