// agent/controllers/pod_status_patch: the desired status and the patch of only what
// changed, refused and job-end statuses, and the kubelet's events from
// status transitions (not doubled when the runtime reports its own).
#include <string>

#include "agent/controllers/pod_status_patch.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

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

// Ready=False with a reason (ContainersNotReady, JobSuspended), then True:
// conditions merge by type in a strategic merge patch, so the patch must
// delete the old reason and message (null), or Ready=True keeps them.
START_TEST(status_patch_clears_condition_reason) {
    Json::Value pod = api_pod();
    pod["status"]["conditions"].append(J(R"({"type":"Ready","status":"False",
        "reason":"JobSuspended","message":"Slurm job 7 is suspended"})"));
    pod["status"]["conditions"].append(J(R"({"type":"Initialized","status":"True"})"));
    Json::Value p = pod_status_patch(pod, desired_pod_status(running(), pod, "10.0.0.1"));
    bool seen_ready = false;
    for (const auto &c : p["status"]["conditions"]) {
        if (c["type"].asString() == "Ready") {
            seen_ready = true;
            ck_assert_sstr_eq(c["status"].asString(), "True");
            ck_assert(c.isMember("reason") && c["reason"].isNull());
            ck_assert(c.isMember("message") && c["message"].isNull());
        } else {
            // Nothing to delete where the old condition had no reason.
            ck_assert(!c.isMember("reason"));
            ck_assert(!c.isMember("message"));
        }
    }
    ck_assert(seen_ready);
}
END_TEST

// A pod whose node the garbage collection removes (its runtime gone with
// it): Failed naming the job's end, not Ready, its running container
// terminated 137 (ContainerStatusUnknown); a terminal pod is left as it is.
START_TEST(orphan_final_status) {
    Json::Value pod = api_pod();
    pod["status"] = running();
    pod["status"]["conditions"][1]["lastTransitionTime"] = "2026-01-01T00:00:02Z";
    Json::Value p = orphan_final_status_patch(pod, "NodeFail", 7, 1767225600);
    ck_assert_sstr_eq(p["metadata"]["uid"].asString(), "u1");
    const Json::Value &st = p["status"];
    ck_assert_sstr_eq(st["phase"].asString(), "Failed");
    ck_assert_sstr_eq(st["reason"].asString(), "NodeFail");
    ck_assert_sstr_eq(st["message"].asString(),
                      "the Slurm job 7 lending this node ended: Slurm declared the node failed");
    const Json::Value &cs = st["containerStatuses"][0];
    ck_assert(!cs["ready"].asBool());
    ck_assert_int_eq(cs["state"]["terminated"]["exitCode"].asInt(), 137);
    ck_assert_sstr_eq(cs["state"]["terminated"]["reason"].asString(), "ContainerStatusUnknown");
    ck_assert_sstr_eq(cs["state"]["terminated"]["startedAt"].asString(), "2026-01-01T00:00:01Z");
    ck_assert_sstr_eq(cs["state"]["terminated"]["finishedAt"].asString(), "2026-01-01T00:00:00Z");
    ck_assert(!cs["state"].isMember("running"));
    int unready = 0;
    for (const auto &c : st["conditions"])
        if (c["type"] == "Ready" || c["type"] == "ContainersReady") {
            ck_assert_sstr_eq(c["status"].asString(), "False");
            ck_assert_sstr_eq(c["reason"].asString(), "PodFailed");
            unready++;
        }
    ck_assert_int_eq(unready, 2);
    Json::Value done = api_pod();
    done["status"] = job_end_status(running(), "JobCancelled", 7);
    ck_assert(orphan_final_status_patch(done, "NodeFail", 7, 1767225600).isNull());
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
    ck_assert_sstr_eq(job_end_status(ok, "", 1)["reason"].asString(), "JobEnded");
}
END_TEST

// Each way a job ends has its own words; an unknown reason still names the job.
START_TEST(job_end_messages) {
    const char *want[][2] = {
        {"JobCompleted", "completed"}, {"JobFailed", "failed"},
        {"JobCancelled", "cancelled"}, {"TimeLimit", "time limit"},
        {"NodeFail", "node failed"},   {"Preempted", "preempted"},
        {"Requeued", "requeued"},      {"JobEnded", "lending this node ended"}};
    for (const auto &w : want) {
        Json::Value e = job_end_status(running(), w[0], 7);
        ck_assert_sstr_eq(e["reason"].asString(), w[0]);
        ck_assert_msg(e["message"].asString().find(w[1]) != std::string::npos, "%s: %s", w[0],
                      e["message"].asString().c_str());
        ck_assert(e["message"].asString().find("Slurm job 7 ") != std::string::npos);
    }
}
END_TEST

// A Node's Event as a kubelet writes it (kubelet-objects: namespace default,
// involvedObject uid = the node's name).
START_TEST(node_event_shape) {
    Json::Value ev =
        build_node_event("slurm-n1-42", {"Normal", "JobCancelled", "m", ""}, 1700000000123456);
    ck_assert_sstr_eq(ev["metadata"]["namespace"].asString(), "default");
    ck_assert(ev["metadata"]["name"].asString().rfind("slurm-n1-42.", 0) == 0);
    ck_assert_sstr_eq(ev["involvedObject"]["kind"].asString(), "Node");
    ck_assert_sstr_eq(ev["involvedObject"]["name"].asString(), "slurm-n1-42");
    ck_assert_sstr_eq(ev["involvedObject"]["uid"].asString(), "slurm-n1-42");
    ck_assert(!ev["involvedObject"].isMember("namespace"));
    ck_assert_sstr_eq(ev["reason"].asString(), "JobCancelled");
    ck_assert_sstr_eq(ev["source"]["host"].asString(), "slurm-n1-42");
    ck_assert_sstr_eq(ev["lastTimestamp"].asString(), "2023-11-14T22:13:20Z");
}
END_TEST

START_TEST(events_from_transitions) {
    Json::Value pod = api_pod();
    auto ev = status_events(pod, pod["status"], running());
    ck_assert_int_eq(ev.size(), 2);
    ck_assert_sstr_eq(ev[0].reason, "Created");
    ck_assert_sstr_eq(ev[0].message, "Created container main");
    ck_assert_sstr_eq(ev[1].reason, "Started");
    ck_assert_sstr_eq(ev[1].message, "Started container main");
    ck_assert_sstr_eq(ev[1].field_path, "spec.containers{main}");
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

// ---- backoff events are the runtime's when it reports events ----
START_TEST(backoff_not_doubled) {
    Json::Value pod = J(R"({"metadata":{"name":"p","namespace":"ns","uid":"u"}})");
    Json::Value old_st =
        J(R"({"containerStatuses":[{"name":"main","restartCount":0,"state":{"running":{}}}]})");
    Json::Value new_st = J(R"({"containerStatuses":[{"name":"main","restartCount":1,
        "state":{"waiting":{"reason":"CrashLoopBackOff"}}}]})");
    ck_assert_int_eq(status_events(pod, old_st, new_st, true).size(), 1);
    ck_assert_int_eq(status_events(pod, old_st, new_st, false).size(), 0);
}
END_TEST

int main() {
    Suite *s = suite_create("pod_status_patch");
    TCase *tc = tcase_create("pod_status_patch");
    tcase_add_test(tc, status_patch_only_changes);
    tcase_add_test(tc, status_patch_clears_reason);
    tcase_add_test(tc, status_patch_clears_condition_reason);
    tcase_add_test(tc, orphan_final_status);
    tcase_add_test(tc, refused_and_job_end);
    tcase_add_test(tc, job_end_messages);
    tcase_add_test(tc, node_event_shape);
    tcase_add_test(tc, events_from_transitions);
    tcase_add_test(tc, backoff_not_doubled);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
