// The final status of a pod whose pod runner is gone (common/daemons/pod_loss.h),
// and the shim's use of it for the pods of a previous shim
// (k8s-shim/pod_status.h restarted_pod_status): a pod reported Failed must
// not stay Ready.
#include <string>

#include "common/daemons/json.h"
#include "common/daemons/pod_loss.h"
#include "common/rfc3339.h"
#include "k8s-shim/pod_status.h"
#include "tests/unit/check_main.h"

using namespace sk;

static Json::Value J(const char *text) {
    auto v = json::parse(text);
    ck_assert_msg(v.ok(), "bad test JSON: %s", text);
    return *v;
}

// A running pod as the shim reports it: an init container done, one app
// container running and ready, one waiting; Ready and ContainersReady True.
static const char *kRunning = R"({
  "phase": "Running", "startTime": "2026-01-01T00:00:00Z",
  "conditions": [
    {"type": "Initialized", "status": "True"},
    {"type": "Ready", "status": "True"},
    {"type": "ContainersReady", "status": "True"},
    {"type": "PodScheduled", "status": "True"}],
  "initContainerStatuses": [
    {"name": "init", "ready": true, "started": false, "containerID": "slurm-k8s://u/init/0",
     "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
  "containerStatuses": [
    {"name": "main", "ready": true, "started": true, "containerID": "slurm-k8s://u/main/0",
     "state": {"running": {"startedAt": "2026-01-01T00:00:05Z"}}},
    {"name": "side", "ready": false, "started": false,
     "state": {"waiting": {"reason": "PodInitializing"}}}]})";

static void check_failed_and_unready(const Json::Value &st) {
    ck_assert_sstr_eq(st["phase"].asString(), "Failed");
    for (const auto &c : st["conditions"]) {
        const std::string type = c["type"].asString();
        if (type == "Ready" || type == "ContainersReady")
            ck_assert_msg(c["status"].asString() == "False", "%s is %s on a Failed pod",
                          type.c_str(), c["status"].asString().c_str());
        else
            ck_assert_sstr_eq(c["status"].asString(), "True");
    }
    for (const char *list : {"initContainerStatuses", "containerStatuses"})
        for (const auto &cs : st[list]) {
            ck_assert_msg(!cs["ready"].asBool(), "%s is ready", cs["name"].asCString());
            ck_assert_msg(!cs["started"].asBool(), "%s is started", cs["name"].asCString());
            ck_assert(!cs["state"].isMember("running"));
        }
}

START_TEST(lost_pod_is_failed_and_not_ready) {
    PodLoss loss{"Lost", "the runner died", "Gone", "container lost", "2026-01-01T00:01:00Z"};
    Json::Value st = lost_pod_status(J(kRunning), loss);
    check_failed_and_unready(st);
    ck_assert_sstr_eq(st["reason"].asString(), "Lost");
    ck_assert_sstr_eq(st["message"].asString(), "the runner died");
    ck_assert_sstr_eq(st["startTime"].asString(), "2026-01-01T00:00:00Z");
    const Json::Value &t = st["containerStatuses"][0]["state"]["terminated"];
    ck_assert_int_eq(t["exitCode"].asInt(), 137);
    ck_assert_sstr_eq(t["reason"].asString(), "Gone");
    ck_assert_sstr_eq(t["message"].asString(), "container lost");
    ck_assert_sstr_eq(t["startedAt"].asString(), "2026-01-01T00:00:05Z");
    ck_assert_sstr_eq(t["finishedAt"].asString(), "2026-01-01T00:01:00Z");
    ck_assert_sstr_eq(t["containerID"].asString(), "slurm-k8s://u/main/0");
    // Finished and waiting containers keep their state; nothing is invented.
    ck_assert_sstr_eq(st["initContainerStatuses"][0]["state"]["terminated"]["reason"].asString(),
                      "Completed");
    ck_assert(st["containerStatuses"][1]["state"].isMember("waiting"));
    ck_assert(!st["containerStatuses"][1].isMember("containerID"));
}
END_TEST

START_TEST(lost_pod_running_init_container) {
    Json::Value st =
        lost_pod_status(J(R"({"phase":"Pending","initContainerStatuses":[{"name":"i","ready":false,
              "state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]})"),
                        PodLoss{"Lost", "m", "Gone", "cm", "2026-01-01T00:00:09Z"});
    const Json::Value &i = st["initContainerStatuses"][0];
    ck_assert_int_eq(i["state"]["terminated"]["exitCode"].asInt(), 137);
    ck_assert(!i.isMember("started"));  // absent stays absent
    ck_assert(!i["state"]["terminated"].isMember("containerID"));
    ck_assert(!st.isMember("containerStatuses") && !st.isMember("conditions"));
}
END_TEST

// Whatever the recorded status holds, the result is a Failed pod status.
static const char *kOdd[] = {
    "[]",
    R"({"containerStatuses":"x","conditions":7})",
    R"({"containerStatuses":[1,"a",null,{"state":"x"},{"state":{"running":3}}]})",
    R"({"conditions":[1,{"type":7,"status":"True"}]})",
};
START_TEST(lost_pod_odd_input) {
    Json::Value st =
        lost_pod_status(J(kOdd[_i]), PodLoss{"Lost", "m", "Gone", "cm", "2026-01-01T00:00:09Z"});
    ck_assert(st.isObject());
    ck_assert_sstr_eq(st["phase"].asString(), "Failed");
    ck_assert_sstr_eq(st["reason"].asString(), "Lost");
    for (const Json::Value &v : {Json::Value(), Json::Value("x"), Json::Value(3)}) {
        Json::Value w = lost_pod_status(v, PodLoss{"Lost", "m", "Gone", "cm", "t"});
        ck_assert(w.isObject() && w["phase"].asString() == "Failed");
    }
}
END_TEST

// Regression: the shim reported the pods of its predecessor Failed but left
// their Ready and ContainersReady conditions True (and the init containers
// as they were).
START_TEST(shim_restarted_pod_is_not_ready) {
    const int64_t now_ms = 1767225660000;  // 2026-01-01T00:01:00Z
    Json::Value st = shim::restarted_pod_status(J(kRunning), true, now_ms);
    check_failed_and_unready(st);
    ck_assert_sstr_eq(st["reason"].asString(), "ShimRestarted");
    ck_assert_sstr_eq(st["message"].asString(),
                      "the slurm-k8s-shim of this job restarted and could not re-attach to the "
                      "pod's processes; they were stopped");
    const Json::Value &t = st["containerStatuses"][0]["state"]["terminated"];
    ck_assert_int_eq(t["exitCode"].asInt(), 137);
    ck_assert_sstr_eq(t["reason"].asString(), "ContainerStatusUnknown");
    ck_assert_sstr_eq(t["message"].asString(),
                      "The container could not be located when the shim restarted");
    ck_assert_sstr_eq(t["startedAt"].asString(), "2026-01-01T00:00:05Z");
    ck_assert_sstr_eq(t["finishedAt"].asString(), rfc3339(now_ms / 1000));
    ck_assert_sstr_eq(t["containerID"].asString(), "slurm-k8s://u/main/0");
    Json::Value quiet = shim::restarted_pod_status(J(kRunning), false, now_ms);
    ck_assert_sstr_eq(quiet["message"].asString(),
                      "the slurm-k8s-shim of this job restarted and could not re-attach to the "
                      "pod's processes");
}
END_TEST

int main() {
    Suite *s = suite_create("pod_loss");
    TCase *tc = tcase_create("pod_loss");
    tcase_add_test(tc, lost_pod_is_failed_and_not_ready);
    tcase_add_test(tc, lost_pod_running_init_container);
    tcase_add_loop_test(tc, lost_pod_odd_input, 0, TABLE_SIZE(kOdd));
    tcase_add_test(tc, shim_restarted_pod_is_not_ready);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
