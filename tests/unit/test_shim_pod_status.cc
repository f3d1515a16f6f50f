// k8s-shim/pod_status: pod status building with an injected clock, checked
// against what a real kubelet v1.28 reported (reference kubelet-objects
// 04-crashloop, 05-readiness, 07-init-containers, 03-*).
#include <string>
#include <vector>

#include "k8s-shim/pod_status.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

static PodPlan plan_of(const std::vector<std::string> &init, const std::vector<std::string> &app,
                       RestartPolicy rp = RestartPolicy::Always) {
    PodPlan p;
    p.uid = "u1";
    p.ns = "kref";
    p.name = "p";
    p.restart_policy = rp;
    for (auto &n : init) {
        ContainerPlan c;
        c.name = n;
        c.image = "localhost/busybox:1.35";
        c.init = true;
        p.init_containers.push_back(c);
    }
    for (auto &n : app) {
        ContainerPlan c;
        c.name = n;
        c.image = "localhost/busybox:1.35";
        p.containers.push_back(c);
    }
    return p;
}

static void set_running(ContainerRun *c, bool ready = true) {
    c->state = CState::Running;
    c->started_ms = 1000;
    c->started = true;
    c->ready = ready;
    c->ever_started = true;
    c->container_id = "slurm-k8s://u1/x/0";
}

static Termination term(int code, const char *reason) {
    Termination t;
    t.exit_code = code;
    t.reason = reason;
    t.started_ms = 1000;
    t.finished_ms = 2000;
    t.container_id = "slurm-k8s://u1/x/0";
    return t;
}

static void set_terminated(ContainerRun *c, int code, const char *reason) {
    c->state = CState::Terminated;
    c->terminated = term(code, reason);
    c->started = c->ready = false;
    c->ever_started = true;
}

static std::string cond(const Json::Value &s, const char *type, const char *field) {
    for (const auto &c : s["conditions"])
        if (c["type"].asString() == type) return c.isMember(field) ? c[field].asString() : "<none>";
    return "<none>";
}

START_TEST(status_init_sequence_07) {
    PodPlan plan = plan_of({"init"}, {"app-a", "app-b"});
    PodRun run;
    run.start_ms = 1'764'428'402'000;
    run.init.resize(1);
    run.app.resize(2);
    Json::Value s = build_pod_status(plan, run, Json::Value(), run.start_ms);
    ck_assert_sstr_eq(s["phase"].asString(), "Pending");
    ck_assert_sstr_eq(cond(s, "Initialized", "status"), "False");
    ck_assert_sstr_eq(cond(s, "Initialized", "reason"), "ContainersNotInitialized");
    ck_assert_sstr_eq(cond(s, "Initialized", "message"),
                      "containers with incomplete status: [init]");
    ck_assert_sstr_eq(cond(s, "Ready", "message"), "containers with unready status: [app-a app-b]");
    ck_assert_sstr_eq(s["initContainerStatuses"][0]["state"]["waiting"]["reason"].asString(),
                      "PodInitializing");
    ck_assert_sstr_eq(s["containerStatuses"][1]["state"]["waiting"]["reason"].asString(),
                      "PodInitializing");
    ck_assert_sstr_eq(s["containerStatuses"][0]["imageID"].asString(), "");
    ck_assert(!s["containerStatuses"][0]["started"].asBool());
    ck_assert_sstr_eq(s["startTime"].asString(), "2025-11-29T15:00:02Z");
    ck_assert_int_eq(s["conditions"].size(), 3);  // PodScheduled is the agent's

    set_running(&run.init[0]);
    run.init[0].ready = false;
    s = build_pod_status(plan, run, s, run.start_ms + 1000);
    ck_assert(s["initContainerStatuses"][0]["started"].asBool());
    ck_assert(!s["initContainerStatuses"][0]["ready"].asBool());

    set_terminated(&run.init[0], 0, "Completed");
    Json::Value prev = s;
    s = build_pod_status(plan, run, prev, run.start_ms + 7000);
    ck_assert_sstr_eq(s["phase"].asString(), "Pending");
    ck_assert_sstr_eq(cond(s, "Initialized", "status"), "True");
    ck_assert_sstr_eq(cond(s, "Initialized", "reason"), "<none>");
    ck_assert(s["initContainerStatuses"][0]["ready"].asBool());  // completed init is ready
    // Ready did not change: its transition time is kept.
    ck_assert_sstr_eq(cond(s, "Ready", "lastTransitionTime"),
                      cond(prev, "Ready", "lastTransitionTime"));
    ck_assert_sstr_eq(s["containerStatuses"][0]["state"]["waiting"]["reason"].asString(),
                      "ContainerCreating");

    set_running(&run.app[0]);
    set_running(&run.app[1]);
    s = build_pod_status(plan, run, s, run.start_ms + 8000);
    ck_assert_sstr_eq(s["phase"].asString(), "Running");
    ck_assert_sstr_eq(cond(s, "Ready", "status"), "True");
    ck_assert_sstr_eq(cond(s, "ContainersReady", "status"), "True");

    // Deleted: both exit 0 on SIGTERM -> Succeeded, PodCompleted everywhere.
    run.stopping = true;
    set_terminated(&run.app[0], 0, "Completed");
    set_terminated(&run.app[1], 0, "Completed");
    s = build_pod_status(plan, run, s, run.start_ms + 9000);
    ck_assert_sstr_eq(s["phase"].asString(), "Succeeded");
    ck_assert_sstr_eq(cond(s, "Initialized", "reason"), "PodCompleted");
    ck_assert_sstr_eq(cond(s, "Initialized", "status"), "True");
    ck_assert_sstr_eq(cond(s, "Ready", "reason"), "PodCompleted");
    ck_assert_sstr_eq(cond(s, "ContainersReady", "status"), "False");
    ck_assert(pod_finished(plan, run));
}
END_TEST

// A sidecar (restartPolicy Always init container): the pod's initialization
// goes past it once it started and stays done when it restarts; it is not
// "ready" for having exited 0; its readiness is the pod's.
START_TEST(status_with_sidecar) {
    PodPlan plan = plan_of({"proxy", "setup"}, {"main"});
    plan.init_containers[0].sidecar = true;
    PodRun run;
    run.init.resize(2);
    run.app.resize(1);
    set_running(&run.init[0], false);
    Json::Value s = build_pod_status(plan, run, Json::Value(), 1000);
    ck_assert_sstr_eq(s["phase"].asString(), "Pending");
    ck_assert_sstr_eq(cond(s, "Initialized", "message"),
                      "containers with incomplete status: [proxy setup]");
    run.init[0].init_passed = true;
    set_running(&run.init[1]);
    set_terminated(&run.init[1], 0, "Completed");
    set_running(&run.app[0]);
    s = build_pod_status(plan, run, s, 2000);
    ck_assert_sstr_eq(s["phase"].asString(), "Running");
    ck_assert_sstr_eq(cond(s, "Initialized", "status"), "True");
    ck_assert_sstr_eq(cond(s, "Ready", "status"), "False");  // the sidecar is not ready
    ck_assert_sstr_eq(cond(s, "Ready", "message"), "containers with unready status: [proxy]");
    run.init[0].ready = true;
    s = build_pod_status(plan, run, s, 3000);
    ck_assert_sstr_eq(cond(s, "Ready", "status"), "True");
    // It exits 0 and waits to restart: not ready, still initialized.
    set_terminated(&run.init[0], 0, "Completed");
    s = build_pod_status(plan, run, s, 4000);
    ck_assert(!s["initContainerStatuses"][0]["ready"].asBool());
    ck_assert_sstr_eq(cond(s, "Initialized", "status"), "True");
    ck_assert(!pod_finished(plan, run));
}
END_TEST

START_TEST(status_crashloop_04) {
    PodPlan plan = plan_of({}, {"main"});
    PodRun run;
    run.app.resize(1);
    auto &c = run.app[0];
    set_running(&c);
    set_terminated(&c, 1, "Error");
    Json::Value s = build_pod_status(plan, run, Json::Value(), 5000);
    ck_assert_sstr_eq(s["phase"].asString(), "Running");  // Always: it will restart
    ck_assert_sstr_eq(cond(s, "Ready", "reason"), "ContainersNotReady");
    ck_assert_int_eq(s["containerStatuses"][0]["state"]["terminated"]["exitCode"].asInt(), 1);
    ck_assert_sstr_eq(s["containerStatuses"][0]["state"]["terminated"]["finishedAt"].asString(),
                      "1970-01-01T00:00:02Z");
    // Back-off: waiting CrashLoopBackOff with lastState.terminated.
    c.last = c.terminated;
    c.terminated.reset();
    c.state = CState::Waiting;
    c.restart_count = 1;
    c.waiting_reason = "CrashLoopBackOff";
    c.waiting_message = "back-off 10s restarting failed container=main pod=p_kref(u1)";
    s = build_pod_status(plan, run, s, 6000);
    ck_assert_sstr_eq(s["phase"].asString(), "Running");
    const Json::Value &cs = s["containerStatuses"][0];
    ck_assert_sstr_eq(cs["state"]["waiting"]["reason"].asString(), "CrashLoopBackOff");
    ck_assert_sstr_eq(cs["lastState"]["terminated"]["reason"].asString(), "Error");
    ck_assert_int_eq(cs["restartCount"].asInt(), 1);
    ck_assert(!cs["ready"].asBool());
    ck_assert(!pod_finished(plan, run));
    // Deleted while in back-off (the runner turns waiting into the last
    // termination): Failed with PodFailed.
    run.stopping = true;
    c.state = CState::Terminated;
    c.terminated = c.last;
    c.last.reset();
    s = build_pod_status(plan, run, s, 7000);
    ck_assert_sstr_eq(s["phase"].asString(), "Failed");
    ck_assert_sstr_eq(cond(s, "Ready", "reason"), "PodFailed");
    ck_assert_sstr_eq(cond(s, "Initialized", "status"), "True");
}
END_TEST

struct PhaseCase {
    RestartPolicy rp;
    int code_a, code_b;  // -1 = still running
    const char *phase;
};
static const PhaseCase kPhases[] = {
    {RestartPolicy::Never, 0, 0, "Succeeded"},   {RestartPolicy::Never, 0, 3, "Failed"},
    {RestartPolicy::Never, 3, -1, "Running"},    {RestartPolicy::OnFailure, 0, 0, "Succeeded"},
    {RestartPolicy::OnFailure, 1, 0, "Running"}, {RestartPolicy::Always, 0, 0, "Running"},
    {RestartPolicy::Always, -1, -1, "Running"},
};
START_TEST(phase_table) {
    const auto &c = kPhases[_i];
    PodPlan plan = plan_of({}, {"a", "b"}, c.rp);
    PodRun run;
    run.app.resize(2);
    int codes[] = {c.code_a, c.code_b};
    for (int i = 0; i < 2; i++) {
        set_running(&run.app[i]);
        if (codes[i] >= 0) set_terminated(&run.app[i], codes[i], codes[i] ? "Error" : "Completed");
    }
    ck_assert_sstr_eq(pod_phase(plan, run), c.phase);
}
END_TEST

// The path of the first null in V ("" if none). A container status the
// shim sends has none (a condition's lastProbeTime is null, as a kubelet
// writes it): a real API server drops a null pointer field on decoding,
// the test API server keeps what it is sent, and a null where an object is
// expected breaks readers ("terminated": null read as a termination).
static std::string first_null(const Json::Value &v, const std::string &at = "") {
    if (v.isNull()) return at.empty() ? "." : at;
    if (v.isObject())
        for (const auto &k : v.getMemberNames()) {
            std::string p = first_null(v[k], at + "." + k);
            if (!p.empty()) return p;
        }
    if (v.isArray())
        for (Json::ArrayIndex i = 0; i < v.size(); i++) {
            std::string p = first_null(v[i], at + "[" + std::to_string(i) + "]");
            if (!p.empty()) return p;
        }
    return "";
}

START_TEST(readiness_unready_running_05) {
    PodPlan plan = plan_of({}, {"main"});
    PodRun run;
    run.app.resize(1);
    set_running(&run.app[0], false);
    const Json::Value s = build_pod_status(plan, run, Json::Value(), 1000);
    const Json::Value &cs = s["containerStatuses"];
    ck_assert_msg(first_null(cs).empty(), "a null in containerStatuses at %s",
                  first_null(cs).c_str());
    ck_assert_sstr_eq(s["phase"].asString(), "Running");
    ck_assert(s["containerStatuses"][0]["started"].asBool());
    ck_assert(!s["containerStatuses"][0]["ready"].asBool());
    ck_assert_sstr_eq(cond(s, "Ready", "status"), "False");
    ck_assert_sstr_eq(cond(s, "Ready", "message"), "containers with unready status: [main]");
    ck_assert_sstr_eq(s["containerStatuses"][0]["state"]["running"]["startedAt"].asString(),
                      "1970-01-01T00:00:01Z");
}
END_TEST

START_TEST(refused_status_and_never_init_failure) {
    Json::Value s = refused_pod_status("PodRefused", "privileged is not allowed", 0);
    ck_assert_sstr_eq(s["phase"].asString(), "Failed");
    ck_assert_sstr_eq(s["reason"].asString(), "PodRefused");
    ck_assert_sstr_eq(s["message"].asString(), "privileged is not allowed");
    PodPlan plan = plan_of({"init"}, {"app"}, RestartPolicy::Never);
    PodRun run;
    run.init.resize(1);
    run.app.resize(1);
    set_terminated(&run.init[0], 2, "Error");
    ck_assert_sstr_eq(pod_phase(plan, run), "Failed");
    ck_assert(pod_finished(plan, run));
    ck_assert_sstr_eq(container_id("u", "c", 3), "slurm-k8s://u/c/3");
}
END_TEST

// The kubelet's bounds: 4 KiB a container, 12 KiB the pod's containers
// together, each cut evenly to its share keeping its end; a log's tail as a
// message: its last 80 lines, at most 2 KiB.
START_TEST(termination_messages_capped_pod_wide) {
    PodPlan plan = plan_of({}, {"a", "b", "c", "d", "e"}, RestartPolicy::Never);
    PodRun run;
    run.app.resize(5);
    for (int i = 0; i < 5; i++) {
        set_terminated(&run.app[i], 1, "Error");
        run.app[i].terminated->message = std::string(4000, 'x') + "END" + std::to_string(i);
    }
    run.app[4].terminated->message = "short";
    Json::Value s = build_pod_status(plan, run, Json::Value(), 3000);
    size_t total = 0;
    for (int i = 0; i < 5; i++) {
        std::string m = s["containerStatuses"][i]["state"]["terminated"]["message"].asString();
        total += m.size();
        if (i < 4) {
            ck_assert_uint_eq(m.size(), kMaxPodTerminationMessageBytes / 5);
            ck_assert_msg(m.substr(m.size() - 4) == "END" + std::to_string(i), "%s",
                          m.substr(m.size() - 8).c_str());
        } else {
            ck_assert_sstr_eq(m, "short");  // under its share: whole
        }
    }
    ck_assert_uint_le(total, kMaxPodTerminationMessageBytes);
    // Under the pod's bound: untouched.
    run.app.resize(2);
    plan = plan_of({}, {"a", "b"}, RestartPolicy::Never);
    s = build_pod_status(plan, run, Json::Value(), 3000);
    ck_assert_uint_eq(s["containerStatuses"][0]["state"]["terminated"]["message"].asString().size(),
                      4004);
    // A multi-byte character is not cut in half.
    Json::Value st(Json::objectValue);
    for (int i = 0; i < 4; i++) {
        Json::Value cs(Json::objectValue);
        cs["state"]["terminated"]["message"] = std::string(3070, 'y') + "\xc3\xa9\xc3\xa9";
        st["containerStatuses"].append(cs);
    }
    cap_termination_messages(&st);
    std::string m = st["containerStatuses"][0]["state"]["terminated"]["message"].asString();
    ck_assert_uint_le(m.size(), kMaxPodTerminationMessageBytes / 4);
    ck_assert((static_cast<unsigned char>(m[0]) & 0xC0) != 0x80);

    std::string log;
    for (int i = 1; i <= 100; i++)
        log += "line " + std::to_string(i) + "\n";
    std::string t = termination_message_from_log(log);
    ck_assert_msg(t.rfind("line 21\n", 0) == 0, "%s", t.substr(0, 20).c_str());
    ck_assert(t.size() >= 8 && t.substr(t.size() - 9) == "line 100\n");
    ck_assert_uint_le(termination_message_from_log(std::string(5000, 'z')).size(),
                      kMaxTerminationMessageLogBytes);
    ck_assert_sstr_eq(termination_message_from_log("last words\n"), "last words\n");
}
END_TEST

int main() {
    Suite *s = suite_create("shim_pod_status");
    TCase *tc = tcase_create("status");
    tcase_add_test(tc, status_init_sequence_07);
    tcase_add_test(tc, status_crashloop_04);
    tcase_add_test(tc, status_with_sidecar);
    tcase_add_loop_test(tc, phase_table, 0, TABLE_SIZE(kPhases));
    tcase_add_test(tc, readiness_unready_running_05);
    tcase_add_test(tc, refused_status_and_never_init_failure);
    tcase_add_test(tc, termination_messages_capped_pod_wide);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
