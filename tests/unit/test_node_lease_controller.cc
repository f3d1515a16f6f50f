// The node and lease controller at its seams: a VirtualNode driven through
// its public interface on a virtual clock (tests/unit/controller_env.h) over
// the fake HTTP transport.
// Registration, a Node or Lease that already exists (409), a Lease or Node
// that went away (404), an API server outage and its end. Asserts on the
// requests sent, the ready callback and state(), nothing internal.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <time.h>

#include <functional>
#include <string>
#include <vector>

#include "agent/controllers/node_builder.h"
#include "tests/unit/check_main.h"
#include "tests/unit/controller_env.h"

using namespace sk;
using namespace sk::agent;
using namespace sk::agent::test;

namespace {

struct Ready {
    int calls = 0;
    Status st;
};

// Registered: the ready callback ran and the first Lease was written.
void register_node(ControllerEnv &env, Ready &ready) {
    env.start_node([&ready](const Status &st) {
        ready.calls++;
        ready.st = st;
    });
    ck_assert_msg(
        env.run_until([&] { return ready.calls > 0 && env.http().count("POST", kLeasesPath) > 0; }),
        "not registered");
}

// The last status report's Ready condition: "True", "False/REASON: MESSAGE",
// "none" before any report.
std::string last_ready(ControllerEnv &env) {
    auto sent = env.http().matching("PATCH", std::string(kNodePath) + "/status");
    if (sent.empty()) return "none";
    const Json::Value body = sent.back().json();
    for (const auto &c : body["status"]["conditions"])
        if (c["type"] == "Ready")
            return c["status"].asString() == "True"
                       ? std::string("True")
                       : "False/" + c["reason"].asString() + ": " + c["message"].asString();
    return "no Ready";
}

std::string owner_uid(const Json::Value &lease) {
    return lease["metadata"]["ownerReferences"][0]["uid"].asString();
}

bool posts_ready(const FakeRequest &r) {
    const Json::Value body = r.json();
    for (const auto &c : body["status"]["conditions"])
        if (c["type"] == "Ready") return c["status"] == "True";
    return false;
}

}  // namespace

START_TEST(registers_node_then_lease) {
    ControllerEnv env;
    env.serve_node_and_lease();
    Ready ready;
    register_node(env, ready);
    ck_assert_int_eq(ready.calls, 1);
    ck_assert(ready.st.ok());
    auto node = env.http().matching("POST", "/api/v1/nodes");
    ck_assert_uint_eq(node.size(), 1);
    Json::Value n = node[0].json();
    ck_assert_sstr_eq(n["metadata"]["name"].asString(), kNodeName);
    ck_assert_sstr_eq(n["metadata"]["labels"]["slurm-k8s/job-id"].asString(), "42");
    auto lease = env.http().matching("POST", kLeasesPath);
    ck_assert_uint_gt(lease[0].id, node[0].id);
    ck_assert_sstr_eq(owner_uid(lease[0].json()), kNodeUid);
    ck_assert_sstr_eq(lease[0].json()["spec"]["holderIdentity"].asString(), kNodeName);
    proto::NodeState s = env.node->state();
    ck_assert_sstr_eq(s.phase, "ready");
    ck_assert(s.ready);
    ck_assert_sstr_eq(s.node_name, kNodeName);
    // Renewals every lease_renew_interval, each over the last reply.
    ck_assert(env.run_until([&] { return env.http().count("PUT", kLeasePath) >= 2; }, 3500));
    auto puts = env.http().matching("PUT", kLeasePath);
    ck_assert_sstr_eq(puts[0].json()["metadata"]["resourceVersion"].asString(), "200");
    ck_assert_sstr_eq(puts[1].json()["metadata"]["resourceVersion"].asString(), "201");
    ck_assert_sstr_eq(puts[1].json()["metadata"]["uid"].asString(), "lease-uid-1");
    ck_assert_uint_eq(env.http().count("POST", "/api/v1/nodes"), 1);
    ck_assert_uint_eq(env.http().count("PATCH", kNodePath), 0);  // no not-ready taint: no lift
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// A virtual node's KubeClient dies with its node (the job deregistered)
// while a request and a watch it sent are in flight: their completions come
// later and must touch nothing of the client (seen under ASan in the HTTP/2
// component test: a heap-use-after-free in the completion, which read the
// client's observer). The observer, copied at send time, still sees them.
START_TEST(client_gone_with_requests_in_flight) {
    ControllerEnv env;
    env.http().on("GET", "/api/v1/nodes/x", {FakeAnswer::ok(Json::Value()).after_ms(50)});
    env.http().on("WATCH", "/api/v1/pods", {FakeAnswer::error(500).after_ms(50)});
    std::vector<std::string> seen;
    int answered = 0, ended = 0;
    auto client = std::make_unique<KubeClient>(env.http(), "https://api.test", 5000);
    client->set_observer([&seen](const char *verb, int code) {
        seen.push_back(std::string(verb) + " " + std::to_string(code));
    });
    client->get("/api/v1/nodes/x", [&answered](const Result<Json::Value> &) { answered++; });
    client->watch(
        "/api/v1/pods?watch=1", [](const WatchEvent &) {}, [&ended](const Status &) { ended++; });
    client.reset();
    ck_assert(env.run_until([&] { return answered == 1 && ended == 1; }));
    ck_assert_uint_eq(seen.size(), 2);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- the admission's not-ready:NoSchedule taint on the new Node ----
// _i: 0 lifted at once, 1 lifted after a 409 (re-read first), 2 off
// (lift_not_ready_taint = false: left to the controller-manager).
START_TEST(not_ready_taint_lifted) {
    ControllerEnv env;
    env.cfg().lift_not_ready_taint = _i != 2;
    env.serve_node_and_lease();
    Json::Value node;  // what the API server made of the POST
    env.http().on("POST", "/api/v1/nodes", [&node](const FakeRequest &r) {
        node = r.json();
        node["metadata"]["uid"] = kNodeUid;
        node["metadata"]["resourceVersion"] = "101";
        Json::Value t;
        t["key"] = "node.kubernetes.io/not-ready";
        t["effect"] = "NoSchedule";
        node["spec"]["taints"].append(t);
        return FakeAnswer::ok(node);
    });
    env.http().on("GET", kNodePath, [&node](const FakeRequest &) {
        Json::Value n = node;
        n["metadata"]["resourceVersion"] = "102";
        return FakeAnswer::ok(n);
    });
    int patches = 0;
    const bool conflict_first = _i == 1;
    env.http().on("PATCH", kNodePath, [&patches, conflict_first](const FakeRequest &r) {
        if (++patches == 1 && conflict_first) return FakeAnswer::error(409, "Conflict");
        return FakeAnswer::ok(r.json());
    });
    Ready ready;
    register_node(env, ready);
    if (_i == 2) {
        env.run_until([] { return false; }, 300);
        ck_assert_int_eq(patches, 0);
    } else {
        ck_assert(env.run_until([&] { return patches == (_i == 1 ? 2 : 1); }));
        auto sent = env.http().matching("PATCH", kNodePath);
        Json::Value last = sent.back().json();
        // The job's taint stays, the not-ready one goes; guarded by what was read.
        ck_assert_int_eq(last["spec"]["taints"].size(), 1);
        ck_assert_sstr_eq(last["spec"]["taints"][0]["key"].asString(), "slurm-k8s/job");
        ck_assert_sstr_eq(last["metadata"]["resourceVersion"].asString(), _i == 1 ? "102" : "101");
        ck_assert_uint_eq(env.http().count("GET", kNodePath), _i == 1 ? 1 : 0);
    }
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- the Node exists (POST 409 AlreadyExists) ----
struct ExistsCase {
    const char *name;
    const char *job_label;  // the existing Node's slurm-k8s/job-id
    bool adopted;
};
static const ExistsCase kExists[] = {
    {"this job's Node (agent restart) is adopted", "42", true},
    {"another job's Node is not touched", "41", false},
};
START_TEST(node_already_exists) {
    const ExistsCase &c = kExists[_i];
    ControllerEnv env;
    env.serve_node_and_lease();
    Json::Value existing;
    env.http().on("POST", "/api/v1/nodes", [&](const FakeRequest &r) {
        existing = r.json();
        existing["metadata"]["uid"] = "old-node-uid";
        existing["metadata"]["resourceVersion"] = "5";
        existing["metadata"]["labels"]["slurm-k8s/job-id"] = c.job_label;
        return FakeAnswer::error(409, "AlreadyExists", "nodes \"slurm-n1-42\" already exists");
    });
    env.http().on("GET", kNodePath, [&](const FakeRequest &) { return FakeAnswer::ok(existing); });
    Ready ready;
    env.start_node([&](const Status &st) {
        ready.calls++;
        ready.st = st;
    });
    ck_assert(env.run_until([&] { return ready.calls > 0; }));
    env.run_for(300);
    ck_assert_int_eq(ready.calls, 1);
    if (c.adopted) {
        ck_assert_msg(ready.st.ok(), "%s: %s", c.name, ready.st.message().c_str());
        auto st = env.http().matching("PATCH", std::string(kNodePath) + "/status");
        ck_assert_uint_ge(st.size(), 1);
        ck_assert(posts_ready(st[0]));
        ck_assert(env.run_until([&] { return env.http().count("POST", kLeasesPath) > 0; }));
        ck_assert_sstr_eq(owner_uid(env.http().matching("POST", kLeasesPath)[0].json()),
                          "old-node-uid");
        ck_assert(env.node->state().ready);
    } else {
        ck_assert_msg(!ready.st.ok(), "%s", c.name);
        ck_assert_int_eq(static_cast<int>(ready.st.error()),
                         static_cast<int>(Error::AlreadyExists));
        ck_assert_uint_eq(env.http().count("PATCH", kNodePath), 0);
        ck_assert_uint_eq(env.http().count("POST", kLeasesPath), 0);
        ck_assert_uint_eq(env.http().count("DELETE", kNodePath), 0);
        ck_assert(!env.node->state().ready);
    }
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- 409 on the Lease: left by an earlier run (a stale owner uid), or a
// write conflict on renewal: read it back, write over the fresh copy ----
struct LeaseConflictCase {
    const char *name;
    const char *method;  // the request answered 409
    const char *reason;
};
static const LeaseConflictCase kLeaseConflicts[] = {
    {"create: a Lease of a stale Node uid exists", "POST", "AlreadyExists"},
    {"renewal: a write conflict", "PUT", "Conflict"},
};
START_TEST(lease_conflict) {
    const LeaseConflictCase &c = kLeaseConflicts[_i];
    ControllerEnv env;
    env.serve_node_and_lease();
    std::string method = c.method;
    Json::Value stored = build_lease(kNodeName, "stale-node-uid", 10, 0);
    stored["metadata"]["uid"] = "lease-uid-old";
    stored["metadata"]["resourceVersion"] = "77";
    env.http().on("GET", kLeasePath, {FakeAnswer::ok(stored)});
    if (method == "POST")
        env.http().on("POST", kLeasesPath, {FakeAnswer::error(409, c.reason)});
    else
        env.http().on("PUT", kLeasePath,
                      {FakeAnswer::error(409, c.reason), FakeAnswer::ok(stored)});
    Ready ready;
    register_node(env, ready);
    size_t first_put = method == "PUT" ? 2 : 1;  // the PUT after the read-back
    ck_assert_msg(
        env.run_until([&] { return env.http().count("PUT", kLeasePath) >= first_put; }, 3500),
        "%s: no renewal", c.name);
    ck_assert_uint_ge(env.http().count("GET", kLeasePath), 1);
    auto put = env.http().matching("PUT", kLeasePath)[first_put - 1];
    auto get = env.http().matching("GET", kLeasePath)[0];
    ck_assert_uint_gt(put.id, get.id);
    Json::Value l = put.json();
    ck_assert_sstr_eq(l["metadata"]["resourceVersion"].asString(), "77");
    ck_assert_sstr_eq(l["metadata"]["uid"].asString(), "lease-uid-old");
    ck_assert_sstr_eq(owner_uid(l), kNodeUid);  // the stale owner replaced
    ck_assert_uint_eq(env.http().count("POST", kLeasesPath), 1);
    ck_assert_uint_eq(env.http().count("POST", "/api/v1/nodes"), 1);
    ck_assert(env.node->state().ready);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- 404: the Lease went (garbage-collected with a deleted Node) ----
struct GoneCase {
    const char *name;
    bool node_gone;  // the Node was deleted too: re-created
    // The renewal's answer: 404, or the real API server's 409 (the PUT's
    // uid precondition meets no Lease), whose GET of the Lease is a 404.
    bool conflict;
};
static const GoneCase kGone[] = {
    {"Lease deleted: re-created", false, false},
    {"Node deleted: Node and Lease re-created", true, false},
    {"Lease deleted, 409 on its uid: re-created", false, true},
    {"Node deleted, 409 on the Lease's uid: Node and Lease re-created", true, true},
};
START_TEST(lease_or_node_gone) {
    const GoneCase &c = kGone[_i];
    ControllerEnv env;
    env.serve_node_and_lease();
    Ready ready;
    register_node(env, ready);
    if (c.conflict) {
        env.http().on("PUT", kLeasePath, {FakeAnswer::error(409, "Conflict")});
        env.http().on("GET", kLeasePath, {FakeAnswer::error(404, "NotFound")});
    } else {
        env.http().on("PUT", kLeasePath, {FakeAnswer::error(404, "NotFound")});
    }
    if (c.node_gone) env.http().on("GET", kNodePath, {FakeAnswer::error(404, "NotFound")});
    ck_assert_msg(env.run_until([&] { return env.http().count("POST", kLeasesPath) >= 2; }, 4000),
                  "%s: Lease not re-created", c.name);
    auto get = env.http().matching("GET", kNodePath);
    ck_assert_uint_ge(get.size(), 1);  // the 404 made it look at the Node
    auto leases = env.http().matching("POST", kLeasesPath);
    ck_assert_uint_eq(env.http().count("POST", "/api/v1/nodes"), c.node_gone ? 2 : 1);
    const char *owner = c.node_gone ? "node-uid-2" : kNodeUid;
    ck_assert_sstr_eq(owner_uid(leases[1].json()), owner);
    ck_assert_int_eq(ready.calls, 1);  // the job's register was answered once
    std::vector<std::string> bad;
    auto recs = env.ctx().store->load_all(&bad);
    ck_assert_uint_eq(recs.size(), 1);
    ck_assert_sstr_eq(recs[0].node_uid, owner);  // the new uid is saved
    ck_assert(env.run_until([&] { return env.node->state().ready; }));
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- outage and return ----
START_TEST(outage_and_return) {
    ControllerEnv env;
    env.serve_node_and_lease();
    env.serve_pods({});
    Ready ready;
    register_node(env, ready);
    ck_assert(env.run_until([&] { return env.http().open_stream(kPodsPath) != 0; }));
    ck_assert(env.node->state().ready);
    size_t lists_before = env.http().count("GET", kPodsPath);
    std::string status_path = std::string(kNodePath) + "/status";
    size_t status_before = env.http().count("PATCH", status_path);

    env.http().set_outage(true);  // connection refused from now on; the watch breaks
    ck_assert_msg(env.run_until([&] { return !env.node->state().ready; }, 3500),
                  "a failing Lease renewal must make the node not ready");
    ck_assert_sstr_eq(env.node->state().phase, "ready");  // still registered
    env.run_for(1200);
    ck_assert_uint_eq(env.http().count("POST", "/api/v1/nodes"), 1);  // no re-create on doubt

    env.http().set_outage(false);
    size_t mark = env.http().requests().size();
    ck_assert_msg(env.run_until([&] { return env.node->state().ready; }, 3500), "not back");
    ck_assert(
        env.run_until([&] { return env.http().count("PATCH", status_path) > status_before; }));
    auto st = env.http().matching("PATCH", status_path);
    ck_assert(posts_ready(st.back()));  // Ready re-posted: a Lease alone does not clear Unknown
    ck_assert_uint_gt(st.back().id, env.http().requests()[mark - 1].id);
    // The pod watch is back (relisted, not left in a long back-off).
    ck_assert(env.run_until([&] { return env.http().open_stream(kPodsPath) != 0; }, 3000));
    ck_assert_uint_gt(env.http().count("GET", kPodsPath), lists_before);
    ck_assert_uint_eq(env.http().count("POST", "/api/v1/nodes"), 1);
    ck_assert_int_eq(ready.calls, 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- back-off as the API asks ----
// A Lease renewal that fails is tried again with back-off, not at the next
// period (which, against a lease a few periods long, lets it lapse); a 503's
// Retry-After is waited out; a success returns to the period.
START_TEST(lease_renewal_retried_within_its_duration) {
    ControllerEnv env;
    env.cfg().lease_renew_s = 4;
    env.cfg().lease_duration_s = 10;
    env.serve_node_and_lease();
    std::vector<uint64_t> at;  // virtual time of each PUT
    int fail_left = 0;
    std::vector<FakeAnswer> faults = {FakeAnswer::error(500, "InternalError"),
                                      FakeAnswer::error(503, "ServiceUnavailable"),
                                      FakeAnswer::error(429, "TooManyRequests")};
    faults[1].retry_after_s = 1;
    env.http().on("PUT", kLeasePath, [&](const FakeRequest &r) {
        at.push_back(env.now_ms());
        if (fail_left > 0) return faults[faults.size() - fail_left--];
        Json::Value l = r.json();
        long rv = std::strtol(l["metadata"]["resourceVersion"].asCString(), nullptr, 10);
        l["metadata"]["resourceVersion"] = std::to_string(rv + 1);
        return FakeAnswer::ok(l);
    });
    Ready ready;
    register_node(env, ready);
    ck_assert(env.run_until([&] { return at.size() >= 1; }, 6000));
    fail_left = 3;
    ck_assert(env.run_until([&] { return at.size() >= 6; }, 15000));
    // at[1] 500 -> at[2] within the back-off's first steps; at[2] 503 with
    // Retry-After 1 -> at[3] a second or more later; at[3] 429 -> at[4]
    // soon; at[4] ok -> at[5] a period later.
    ck_assert_msg(at[2] - at[1] < 1000, "after a 500: %llu ms",
                  static_cast<unsigned long long>(at[2] - at[1]));
    ck_assert_msg(at[3] - at[2] >= 1000 && at[3] - at[2] < 2500,
                  "after a 503 (Retry-After 1): %llu",
                  static_cast<unsigned long long>(at[3] - at[2]));
    ck_assert_msg(at[4] - at[3] < 2500, "after a 429: %llu",
                  static_cast<unsigned long long>(at[4] - at[3]));
    ck_assert_msg(at[5] - at[4] >= 4000 && at[5] - at[4] <= 4200, "after a success: %llu",
                  static_cast<unsigned long long>(at[5] - at[4]));
    ck_assert(env.node->state().ready);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// The Node's creation refused (403: RBAC or an admission policy, fixed by an
// admin meanwhile) or failing (500): retried with back-off, the refusal said
// once in a Warning Event; the registration does not end.
START_TEST(node_creation_refused_is_retried) {
    ControllerEnv env;
    env.serve_node_and_lease();
    int refusals = 3;
    FakeAnswer forbidden = FakeAnswer::error(
        403, "Forbidden", "nodes is forbidden: User \"x\" cannot create resource");
    FakeAnswer broken = FakeAnswer::error(500, "InternalError");
    Json::Value created;
    env.http().on("POST", "/api/v1/nodes", [&](const FakeRequest &r) {
        if (refusals-- > 0) return refusals == 1 ? broken : forbidden;
        Json::Value n = r.json();
        n["metadata"]["uid"] = kNodeUid;
        n["metadata"]["resourceVersion"] = "100";
        created = n;
        return FakeAnswer::ok(n);
    });
    env.http().on("GET", kNodePath, [&](const FakeRequest &) { return FakeAnswer::ok(created); });
    Ready ready;
    register_node(env, ready);
    ck_assert_int_eq(ready.calls, 1);
    ck_assert(ready.st.ok());
    ck_assert_uint_eq(env.http().count("POST", "/api/v1/nodes"), 4);
    size_t refused = 0;
    for (const auto &r : env.http().matching("POST", "/api/v1/namespaces/default/events"))
        if (r.json()["reason"].asString() == "NodeRegistrationRefused") {
            refused++;
            ck_assert_sstr_eq(r.json()["type"].asString(), "Warning");
            ck_assert(r.json()["message"].asString().find("forbidden") != std::string::npos);
        }
    ck_assert_uint_eq(refused, 1);  // the same refusal twice: one Event
    ck_assert(env.node->state().ready);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- a drain that starts while a registration step is in flight ----
// The drain owns the Node from then on: the step's answer neither makes the
// node ready nor starts status reports or the Lease.
struct DrainInFlightCase {
    const char *name;
    bool exists;         // the Node survived an agent restart: POST 409, then adopted
    const char *method;  // the request in flight when the drain starts
    const char *path;
};
static const DrainInFlightCase kDrainInFlight[] = {
    {"the Node create", false, "POST", "/api/v1/nodes"},
    {"the read of an existing Node", true, "GET", kNodePath},
    {"the Ready post of an adopted Node", true, "PATCH", "/api/v1/nodes/slurm-n1-42/status"},
};
START_TEST(drain_during_registration) {
    const DrainInFlightCase &c = kDrainInFlight[_i];
    const std::string status_path = std::string(kNodePath) + "/status";
    ControllerEnv env;
    env.cfg().status_report_s = 1;  // a status timer would post every second
    env.serve_node_and_lease();
    env.serve_pods({});
    Json::Value existing(Json::objectValue);
    existing["metadata"]["name"] = kNodeName;
    existing["metadata"]["uid"] = "old-node-uid";
    existing["metadata"]["resourceVersion"] = "5";
    existing["metadata"]["labels"]["slurm-k8s/job-id"] = "42";
    existing["metadata"]["labels"]["slurm-k8s/cluster"] = "unit";
    existing["metadata"]["labels"]["slurm-k8s/slurm-node"] = "n1";
    FakeAnswer conflict = FakeAnswer::error(409, "AlreadyExists");
    FakeAnswer slow_ok = FakeAnswer::ok(Json::Value(Json::objectValue)).after_ms(300);
    std::string method = c.method;
    if (c.exists) {
        env.http().on("POST", "/api/v1/nodes", {conflict});
        env.http().on(
            "GET", kNodePath,
            {method == "GET" ? FakeAnswer::ok(existing).after_ms(300) : FakeAnswer::ok(existing)});
    } else {
        env.http().on("POST", "/api/v1/nodes", [&](const FakeRequest &r) {
            Json::Value n = r.json();
            n["metadata"]["uid"] = kNodeUid;
            return FakeAnswer::ok(n).after_ms(300);
        });
    }
    if (method == "PATCH") env.http().on("PATCH", status_path, {slow_ok});
    int ready_calls = 0;
    env.start_node([&](const Status &) { ready_calls++; });
    ck_assert_msg(env.run_until([&] { return env.http().count(c.method, c.path) == 1; }),
                  "%s: not sent", c.name);
    size_t status_posts = env.http().count("PATCH", status_path);
    int done_calls = 0;
    env.node->deregister(0, "JobEnded", [&](uint32_t) { done_calls++; });
    ck_assert_msg(env.run_until([&] { return done_calls > 0; }, 8000), "%s: no answer", c.name);
    env.run_for(2300);  // past the answer in flight and two status periods
    ck_assert_msg(env.http().count("PATCH", status_path) == status_posts,
                  "%s: %zu status posts after the drain started", c.name,
                  env.http().count("PATCH", status_path) - status_posts);
    ck_assert_uint_eq(env.http().count("POST", kLeasesPath), 0);
    ck_assert_uint_eq(env.http().count("PUT", kLeasePath), 0);
    ck_assert_uint_eq(env.http().count("POST", "/api/v1/nodes"), 1);
    ck_assert_uint_eq(env.http().count("DELETE", kNodePath), 1);
    ck_assert_int_eq(ready_calls, 0);  // the job's register is not answered Ready
    ck_assert(!env.node->state().ready);
    ck_assert_int_eq(done_calls, 1);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- the end-time cordon follows a changed time limit ----
// A fake end-time source (Slurm's squeue in the agent) whose answer the test
// changes, re-read every second; the fake API side keeps the Node and merges
// its PATCHes, so the assertions are on the Node as a user would see it.
void merge_patch(Json::Value &dst, const Json::Value &patch) {
    for (const auto &k : patch.getMemberNames()) {
        if (patch[k].isNull())
            dst.removeMember(k);
        else if (patch[k].isObject() && dst[k].isObject())
            merge_patch(dst[k], patch[k]);
        else
            dst[k] = patch[k];
    }
}

// The Node as the API keeps it: made by the agent's POST (unschedulable
// when an admin had cordoned it), read by GET, merge-PATCHed with a new
// resourceVersion; fail_next_patch makes the next PATCH a 403, once.
struct ServedNode {
    Json::Value node;
    int rv = 100;
    bool fail_next_patch = false;
    void serve(ControllerEnv &env, bool admin_cordon) {
        env.http().on("POST", "/api/v1/nodes", [this, admin_cordon](const FakeRequest &r) {
            node = r.json();
            node["metadata"]["uid"] = kNodeUid;
            node["metadata"]["resourceVersion"] = std::to_string(rv);
            if (admin_cordon) node["spec"]["unschedulable"] = true;
            return FakeAnswer::ok(node);
        });
        env.http().on("GET", kNodePath,
                      [this](const FakeRequest &) { return FakeAnswer::ok(node); });
        env.http().on("PATCH", kNodePath, [this](const FakeRequest &r) {
            if (fail_next_patch) {
                fail_next_patch = false;
                return FakeAnswer::error(403, "Forbidden");
            }
            merge_patch(node, r.json());
            node["metadata"]["resourceVersion"] = std::to_string(++rv);
            return FakeAnswer::ok(node);
        });
    }
};

struct EndCase {
    const char *name;
    int64_t first_end_in_s;   // the end Slurm reports at register
    int64_t second_end_in_s;  // after `scontrol update TimeLimit=`
    bool admin_cordon;        // an admin cordoned the Node before the end-time cordon
    bool first_patch_fails;   // the first Node PATCH after the change answers 403
};
static const EndCase kEndCases[] = {
    {"an extension uncordons", 30, 3600, false, false},
    {"a shortening cordons earlier", 3600, 30, false, false},
    {"an extension keeps an admin's cordon", 30, 3600, true, false},
    {"a failed uncordon is retried", 30, 3600, false, true},
    {"a failed cordon is retried", 3600, 30, false, true},
};
START_TEST(end_time_followed) {
    const EndCase &c = kEndCases[_i];
    ControllerEnv env;
    env.cfg().cordon_before_end_s = 60;
    env.cfg().end_time_check_s = 1;
    env.serve_node_and_lease();
    ServedNode served;
    served.serve(env, c.admin_cordon);
    Json::Value &node = served.node;
    bool &fail_next_patch = served.fail_next_patch;
    const int64_t now = static_cast<int64_t>(time(nullptr));
    int64_t end = now + c.first_end_in_s;
    int queries = 0;
    env.slurm().on_end_time = [&](uint32_t job, const std::function<void(int64_t)> &cb) {
        ck_assert_uint_eq(job, 42);
        queries++;
        cb(end);
    };
    auto cordoned = [&] {
        bool taint = false;
        for (const auto &t : node["spec"]["taints"])
            if (t["key"] == kEndingTaintKey) taint = true;
        return taint && node["spec"]["unschedulable"].asBool();
    };
    Ready ready;
    register_node(env, ready);
    const bool first_due = c.first_end_in_s <= 60;
    if (first_due) {
        ck_assert_msg(env.run_until(cordoned), "%s: not cordoned ahead of the first end", c.name);
        ck_assert_msg(
            node["metadata"]["annotations"].isMember(kEndCordonAnnotation) == !c.admin_cordon,
            "%s: annotation %s", c.name, node.toStyledString().c_str());
    } else {
        env.run_for(1500);  // a re-read has happened: still not due
        ck_assert_msg(!cordoned(), "%s: cordoned 1 h before the end", c.name);
    }
    end = now + c.second_end_in_s;
    fail_next_patch = c.first_patch_fails;
    int q = queries;
    if (c.second_end_in_s > 60) {
        bool taint_gone = env.run_until(
            [&] {
                for (const auto &t : node["spec"]["taints"])
                    if (t["key"] == kEndingTaintKey) return false;
                return queries > q;
            },
            4000);
        ck_assert_msg(taint_gone, "%s: the ending taint stayed: %s", c.name,
                      node.toStyledString().c_str());
        env.run_for(300);
        ck_assert_msg(node["spec"]["unschedulable"].asBool() == c.admin_cordon,
                      "%s: unschedulable %s", c.name,
                      node["spec"]["unschedulable"].toStyledString().c_str());
        ck_assert(!node["metadata"]["annotations"].isMember(kEndCordonAnnotation));
    } else {
        ck_assert_msg(env.run_until(cordoned, 4000), "%s: not cordoned after the shortening",
                      c.name);
    }
    ck_assert_msg(!fail_next_patch, "%s: no Node PATCH after the change", c.name);
    // The end stays where it is now: no more PATCHes of the Node.
    size_t patches = env.http().count("PATCH", kNodePath) -
                     env.http().count("PATCH", std::string(kNodePath) + "/status");
    env.run_for(2200);
    ck_assert_uint_eq(env.http().count("PATCH", kNodePath) -
                          env.http().count("PATCH", std::string(kNodePath) + "/status"),
                      patches);
    ck_assert_int_ge(queries, 3);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// Slurm's end time back before the Node is there to be read (the agent
// queries it as it creates the Node): the cordon that failed is tried again
// within seconds, not at the next end-time check (30 s here).
START_TEST(end_cordon_retried_soon) {
    ControllerEnv env;
    env.cfg().cordon_before_end_s = 60;
    env.cfg().end_time_check_s = 30;
    env.serve_node_and_lease();
    ServedNode served;
    served.serve(env, false);
    int not_yet = 2;  // the Node's first GETs answer 404, as before its creation
    env.http().on("GET", kNodePath, [&](const FakeRequest &) {
        if (not_yet > 0) {
            not_yet--;
            return FakeAnswer::error(404, "NotFound");
        }
        return FakeAnswer::ok(served.node);
    });
    const int64_t end = static_cast<int64_t>(time(nullptr)) + 30;
    env.slurm().on_end_time = [&](uint32_t, const std::function<void(int64_t)> &cb) { cb(end); };
    Ready ready;
    register_node(env, ready);
    auto cordoned = [&] {
        for (const auto &t : served.node["spec"]["taints"])
            if (t["key"] == kEndingTaintKey) return served.node["spec"]["unschedulable"].asBool();
        return false;
    };
    ck_assert_msg(env.run_until(cordoned, 10000), "not cordoned within 10 s: %s",
                  served.node.toStyledString().c_str());
    ck_assert_int_eq(not_yet, 0);
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// ---- the job's suspension (scontrol suspend / resume) ----
// _i: 0 plain; 1 the Node was cordoned by an admin before (stays cordoned
// after the resume); 2 the end-time cordon comes while suspended (the Node
// stays cordoned after the resume, the end's cordon owns it then); 3 the
// first suspension cordon PATCH fails (retried at the next state check).
START_TEST(suspension_followed) {
    ControllerEnv env;
    env.cfg().job_state_check_s = 1;
    env.cfg().end_time_check_s = 1;
    env.cfg().status_report_s = 1;
    env.cfg().cordon_before_end_s = 60;
    env.serve_node_and_lease();
    ServedNode served;
    served.fail_next_patch = _i == 3;
    served.serve(env, _i == 1);
    Json::Value &node = served.node;
    JobState state = JobState::Alive;
    int queries = 0;
    env.slurm().on_state = [&](uint32_t job, const std::function<void(JobState)> &cb) {
        ck_assert_uint_eq(job, 42);
        queries++;
        cb(state);
    };
    int64_t end = 0;
    env.slurm().on_end_time = [&](uint32_t, const std::function<void(int64_t)> &cb) { cb(end); };
    auto has = [&](const char *key) {
        for (const auto &t : node["spec"]["taints"])
            if (t["key"] == key) return true;
        return false;
    };
    auto ready = [&] { return last_ready(env); };
    Ready reg;
    register_node(env, reg);
    FakeRuntime *rt = env.attach_fake_runtime();
    env.run_for(1200);  // a state check saw it running: nothing changes
    ck_assert_int_ge(queries, 1);
    ck_assert(rt->pauses().empty());
    ck_assert(!has(kSuspendedTaintKey));

    state = JobState::Suspended;
    ck_assert_msg(env.run_until([&] { return has(kSuspendedTaintKey); }, 4000),
                  "not cordoned while suspended: %s", node.toStyledString().c_str());
    ck_assert(node["spec"]["unschedulable"].asBool());
    ck_assert(node["metadata"]["annotations"].isMember(kSuspendCordonAnnotation) == (_i != 1));
    ck_assert_uint_eq(rt->pauses().size(), 1);
    ck_assert(rt->pauses()[0]);
    ck_assert_msg(ready() ==
                      "False/JobSuspended: Slurm job 42 is suspended: its pods are stopped "
                      "until it resumes",
                  "%s", ready().c_str());
    ck_assert_sstr_eq(env.node->state().phase, "suspended");
    ck_assert(!env.node->state().ready);
    // The Node's Event.
    bool event = false;
    for (const auto &r : env.http().matching("POST", "/api/v1/namespaces/default/events")) {
        const Json::Value ev = r.json();
        event = event || ev["reason"] == kSuspendedReason;
    }
    ck_assert(event);
    // Reports while suspended keep saying so.
    size_t reports = env.http().count("PATCH", std::string(kNodePath) + "/status");
    ck_assert(env.run_until(
        [&] { return env.http().count("PATCH", std::string(kNodePath) + "/status") > reports; },
        4000));
    ck_assert_msg(ready().rfind("False/JobSuspended", 0) == 0, "%s", ready().c_str());
    if (_i == 2) {  // the end comes within the cordon's lead meanwhile
        end = static_cast<int64_t>(time(nullptr)) + 30;
        ck_assert(env.run_until([&] { return has(kEndingTaintKey); }, 4000));
    }

    state = JobState::Alive;
    ck_assert_msg(env.run_until([&] { return !has(kSuspendedTaintKey); }, 4000),
                  "still cordoned after the resume: %s", node.toStyledString().c_str());
    env.run_for(200);
    ck_assert_uint_eq(rt->pauses().size(), 2);
    ck_assert(!rt->pauses()[1]);
    ck_assert_sstr_eq(ready(), "True");
    ck_assert(!node["metadata"]["annotations"].isMember(kSuspendCordonAnnotation));
    ck_assert_sstr_eq(env.node->state().phase, "ready");
    if (_i == 0 || _i == 3) ck_assert(!node["spec"]["unschedulable"].asBool());
    if (_i == 1) ck_assert(node["spec"]["unschedulable"].asBool());  // the admin's
    if (_i == 2) {  // the end's cordon holds the Node now, and may undo it later
        ck_assert(node["spec"]["unschedulable"].asBool());
        ck_assert(has(kEndingTaintKey));
        ck_assert(node["metadata"]["annotations"].isMember(kEndCordonAnnotation));
    }
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

// The job's shim dies: once its connection is gone and its pid dead (a shim
// that only reconnects changes nothing), the Node posts Ready=False
// (KubeletNotReady, "container runtime is down", naming the pid) with a
// ShimDied Event and state phase "shim-down"; a new shim attaching makes it
// Ready again, with a ShimAttached Event.
START_TEST(shim_death_followed) {
    ControllerEnv env;
    env.serve_node_and_lease();
    auto ready = [&] { return last_ready(env); };
    auto events = [&](const char *reason) {
        int n = 0;
        for (const auto &r : env.http().matching("POST", "/api/v1/namespaces/default/events"))
            n += r.json()["reason"] == reason;
        return n;
    };
    Ready reg;
    register_node(env, reg);
    pid_t shim = fork();
    if (shim == 0) {
        pause();
        _exit(0);
    }
    ck_assert_int_gt(shim, 0);
    FakeRuntime *rt = env.attach_fake_runtime(shim);
    rt->lose();
    env.run_for(600);  // connection gone, the shim alive: it may reconnect
    ck_assert_sstr_eq(env.node->state().phase, "ready");
    ck_assert_int_eq(events("ShimDied"), 0);
    kill(shim, SIGKILL);
    waitpid(shim, nullptr, 0);
    std::string want = "False/KubeletNotReady: container runtime is down: the job's shim (pid " +
                       std::to_string(shim) + ") died";
    ck_assert_msg(env.run_until([&] { return ready().rfind(want, 0) == 0; }, 3000), "%s",
                  ready().c_str());
    ck_assert_sstr_eq(env.node->state().phase, "shim-down");
    ck_assert(!env.node->state().ready);
    ck_assert_msg(env.run_until([&] { return events("ShimDied") == 1; }, 2000), "no ShimDied");
    env.attach_fake_runtime(0);
    ck_assert_msg(env.run_until([&] { return ready() == "True"; }, 3000), "%s", ready().c_str());
    ck_assert_sstr_eq(env.node->state().phase, "ready");
    ck_assert(env.node->state().ready);
    ck_assert_msg(env.run_until([&] { return events("ShimAttached") == 1; }, 2000),
                  "no ShimAttached");
    ck_assert_int_eq(env.close(), 0);
}
END_TEST

int main() {
    Suite *s = suite_create("node_lease_controller");
    TCase *tc = tcase_create("node_lease");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, registers_node_then_lease);
    tcase_add_test(tc, client_gone_with_requests_in_flight);
    tcase_add_loop_test(tc, not_ready_taint_lifted, 0, 3);
    tcase_add_loop_test(tc, node_already_exists, 0, TABLE_SIZE(kExists));
    tcase_add_loop_test(tc, lease_conflict, 0, TABLE_SIZE(kLeaseConflicts));
    tcase_add_loop_test(tc, lease_or_node_gone, 0, TABLE_SIZE(kGone));
    tcase_add_test(tc, outage_and_return);
    tcase_add_test(tc, lease_renewal_retried_within_its_duration);
    tcase_add_test(tc, node_creation_refused_is_retried);
    tcase_add_loop_test(tc, drain_during_registration, 0, TABLE_SIZE(kDrainInFlight));
    tcase_add_loop_test(tc, end_time_followed, 0, TABLE_SIZE(kEndCases));
    tcase_add_test(tc, end_cordon_retried_soon);
    tcase_add_loop_test(tc, suspension_followed, 0, 4);
    tcase_add_test(tc, shim_death_followed);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
