// The shim's pure core with an injected clock: crash back-off schedule,
// probe state machines, GPU allocator persistence, and pod status building
// checked against what a real kubelet v1.28 reported (reference
// kubelet-objects 04-crashloop, 05-readiness, 07-init-containers, 03-*);
// and a PodRunner on a real loop, whose teardown leaves no handle
// (uv_loop_close() == 0).
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

#include <fstream>
#include <sstream>
#include <string>

#include "k8s-shim/backoff.h"
#include "k8s-shim/gpu_alloc.h"
#include "k8s-shim/pod_status.h"
#include "k8s-shim/pod_runner.h"
#include "k8s-shim/probe.h"
#include "k8s-shim/spawn.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

// ---- back-off ----

START_TEST(backoff_schedule_as_recorded) {
    // A container that crashes 1 s after each start (04-crashloop): restarts
    // after 0, 10s, 20s, 40s, 1m20s, 2m40s, then capped at 5m.
    CrashBackoff b;
    int64_t now = 0;
    const int64_t want[] = {0, 10'000, 20'000, 40'000, 80'000, 160'000, 300'000, 300'000};
    for (int64_t w : want) {
        b.on_start(now);
        now += 1000;  // runs 1 s
        int64_t d = b.on_exit(now);
        ck_assert_int_eq(d, w);
        now += d;
    }
}
END_TEST

START_TEST(backoff_resets_after_ten_minutes_running) {
    CrashBackoff b;
    b.on_start(0);
    ck_assert_int_eq(b.on_exit(1000), 0);
    b.on_start(1000);
    ck_assert_int_eq(b.on_exit(2000), 10'000);
    b.on_start(12'000);
    // Ran for 10 minutes: the schedule starts over.
    ck_assert_int_eq(b.on_exit(12'000 + 600'000), 0);
    b.on_start(612'000);
    ck_assert_int_eq(b.on_exit(613'000), 10'000);
}
END_TEST

struct Dur {
    int64_t ms;
    const char *s;
};
static const Dur kDur[] = {{0, "0s"},         {10'000, "10s"},    {80'000, "1m20s"},
                           {300'000, "5m0s"}, {160'000, "2m40s"}, {3'600'000, "1h0m0s"}};
START_TEST(go_duration_table) {
    ck_assert_sstr_eq(go_duration(kDur[_i].ms), kDur[_i].s);
}
END_TEST

// ---- probes ----

static ProbeSpec spec(int delay, int period, int succ, int fail) {
    ProbeSpec s;
    s.initial_delay_s = delay;
    s.period_s = period;
    s.success_threshold = succ;
    s.failure_threshold = fail;
    return s;
}

START_TEST(readiness_thresholds_and_timing) {
    ProbeState p(ProbeKind::Readiness, spec(5, 2, 2, 3));
    p.arm(1000);
    ck_assert_int_eq(p.due_ms(), 6000);  // initialDelaySeconds
    ck_assert(p.outcome() == Outcome::Unknown);
    ck_assert(!p.record(true, 6000));    // 1 of 2 successes
    ck_assert_int_eq(p.due_ms(), 8000);  // periodSeconds
    ck_assert(p.record(true, 8000));
    ck_assert(p.outcome() == Outcome::Success);
    ck_assert(!p.record(false, 10000));
    ck_assert(!p.record(false, 12000));
    ck_assert(p.outcome() == Outcome::Success);
    ck_assert(p.record(false, 14000));  // third consecutive failure
    ck_assert(p.outcome() == Outcome::Failure);
    ck_assert(!p.record(true, 16000));  // a success alone is not enough (threshold 2)
    ck_assert(p.record(true, 18000));
    ck_assert(p.outcome() == Outcome::Success);
}
END_TEST

START_TEST(liveness_starts_healthy_and_fails) {
    // 06-liveness: period 3 s, failureThreshold 2.
    ProbeState p(ProbeKind::Liveness, spec(0, 3, 1, 2));
    p.arm(0);
    ck_assert(p.outcome() == Outcome::Success);
    ck_assert_int_eq(p.due_ms(), 0);
    ck_assert(!p.record(false, 0));
    ck_assert_int_eq(p.due_ms(), 3000);
    ck_assert(p.record(false, 3000));
    ck_assert(p.outcome() == Outcome::Failure);
    // A restart re-arms it healthy.
    p.arm(5000);
    ck_assert(p.outcome() == Outcome::Success);
    ck_assert_int_eq(p.failures(), 0);
}
END_TEST

START_TEST(startup_unknown_until_success_or_failure) {
    ProbeState p(ProbeKind::Startup, spec(0, 1, 1, 3));
    p.arm(0);
    ck_assert(!p.record(false, 0));
    ck_assert(!p.record(false, 1000));
    ck_assert(p.outcome() == Outcome::Unknown);
    ck_assert(p.record(false, 2000));
    ck_assert(p.outcome() == Outcome::Failure);
    p.arm(3000);
    ck_assert(p.record(true, 3000));
    ck_assert(p.outcome() == Outcome::Success);
}
END_TEST

// ---- GPUs ----

START_TEST(gpu_allocator_disjoint_refuse_restore) {
    GpuAllocator a({2, 3, 5, 7});
    auto x = a.allocate("a", 2);
    ck_assert(x.ok());
    auto y = a.allocate("b", 1);
    ck_assert(y.ok());
    ck_assert_int_eq((*x)[0], 2);
    ck_assert_int_eq((*x)[1], 3);
    ck_assert_int_eq((*y)[0], 5);
    ck_assert_int_eq((*a.allocate("a", 2))[1], 3);  // idempotent per uid
    auto z = a.allocate("c", 2);
    ck_assert(!z.ok());
    ck_assert(z.error() == Error::Refused);
    ck_assert_msg(
        z.message().find("asks for 2 nvidia.com/gpu but only 1 of the 4") != std::string::npos,
        "%s", z.message().c_str());
    // Restart: a new allocator restored from the persisted JSON gives nothing twice.
    GpuAllocator b({2, 3, 5});  // the loan shrank: 7 gone
    ck_assert(b.restore(a.to_json()).ok());
    ck_assert_int_eq(b.free_gpus().size(), 0);
    ck_assert(!b.allocate("c", 1).ok());
    b.release("a");
    auto w = b.allocate("c", 2);
    ck_assert(w.ok());
    ck_assert_int_eq((*w)[0], 2);
    ck_assert(!b.restore(Json::Value(5)).ok());
}
END_TEST

// ---- status ----

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

START_TEST(readiness_unready_running_05) {
    PodPlan plan = plan_of({}, {"main"});
    PodRun run;
    run.app.resize(1);
    set_running(&run.app[0], false);
    Json::Value s = build_pod_status(plan, run, Json::Value(), 1000);
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

// ---- a PodRunner on a real loop ----
// One container with an exec readiness probe and a preStop hook. It either
// exits by itself, is stopped (preStop, then SIGTERM), or its runner is
// destroyed while it runs. Freed once idle() (or at once), the runner leaves
// nothing on the loop: no callback after it went, uv_loop_close() == 0.
enum class RunnerEnd { Exits, Killed, DestroyedRunning };
static const RunnerEnd kRunnerEnds[] = {RunnerEnd::Exits, RunnerEnd::Killed,
                                        RunnerEnd::DestroyedRunning};

// Runs the loop until done() or 10 s.
template <typename F>
static bool run_until(uv_loop_t *loop, F done) {
    uint64_t end = uv_now(loop) + 10000;
    Timer tick(loop);  // keeps uv_run from blocking for good
    tick.start(
        10, [] {}, 10);
    while (!done() && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
    return done();
}

START_TEST(runner_on_loop_leaves_no_handle) {
    RunnerEnd how = kRunnerEnds[_i];
    char tmpl[] = "/tmp/sk_test_runner_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    std::string dir = tmpl;
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);

    PodPlan plan;
    plan.uid = "u1";
    plan.ns = "default";
    plan.name = "p";
    plan.restart_policy = RestartPolicy::Never;
    plan.grace_s = 5;
    ContainerPlan c;
    c.name = "c";
    c.argv = {"/bin/sh", "-c",
              how == RunnerEnd::Exits ? "echo out; echo err >&2; sleep 0.3"
                                      : "trap 'echo term; exit 0' TERM; echo out; "
                                        "while :; do sleep 0.05; done"};
    c.env = {{"PATH", "/bin:/usr/bin"}};
    ProbeSpec rp;
    rp.exec = {"/bin/true"};
    rp.period_s = 1;
    c.readiness = rp;
    c.pre_stop = {"/bin/sh", "-c", "sleep 0.1"};
    plan.containers.push_back(c);

    RunnerEnv env;
    env.clock.loop = &loop;
    env.clock.origin = uv_now(&loop);
    env.pod_dir = dir + "/pod";
    int changes = 0, finished = 0;
    env.on_change = [&changes] { changes++; };
    env.on_finished = [&finished] { finished++; };
    auto runner = std::make_unique<PodRunner>(std::move(env), plan);
    ck_assert(runner->start().ok());
    ck_assert(run_until(&loop, [&] { return runner->run().app[0].ready; }));
    ck_assert(!runner->idle());
    int pid = runner->process_record()["c"]["pid"].asInt();
    ck_assert_int_gt(pid, 1);

    if (how == RunnerEnd::DestroyedRunning) {
        runner.reset();  // handles close with it; the group is stopped by hand
        signal_group(pid, SIGKILL);
        int before = changes;
        uv_run(&loop, UV_RUN_NOWAIT);
        ck_assert_int_eq(changes, before);  // no callback reached the gone runner
        ck_assert_int_eq(finished, 0);
    } else {
        if (how == RunnerEnd::Killed) runner->kill(5, "Killing");
        ck_assert(run_until(&loop, [&] { return runner->idle(); }));
        ck_assert_int_eq(finished, 1);
        Json::Value st = runner->status();
        ck_assert_sstr_eq(st["phase"].asString(), "Succeeded");
        std::ifstream f(dir + "/pod/c/0.log");
        std::stringstream ss;
        ss << f.rdbuf();
        ck_assert(ss.str().find("stdout F out") != std::string::npos);
        if (how == RunnerEnd::Exits) ck_assert(ss.str().find("stderr F err") != std::string::npos);
        if (how == RunnerEnd::Killed)
            ck_assert(ss.str().find("stdout F term") != std::string::npos);
        runner.reset();
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    std::string rm = "rm -rf " + dir;
    ck_assert_int_eq(system(rm.c_str()), 0);
}
END_TEST

int main() {
    Suite *s = suite_create("shim_core");
    TCase *tb = tcase_create("backoff");
    tcase_add_test(tb, backoff_schedule_as_recorded);
    tcase_add_test(tb, backoff_resets_after_ten_minutes_running);
    tcase_add_loop_test(tb, go_duration_table, 0, TABLE_SIZE(kDur));
    suite_add_tcase(s, tb);
    TCase *tp = tcase_create("probe");
    tcase_add_test(tp, readiness_thresholds_and_timing);
    tcase_add_test(tp, liveness_starts_healthy_and_fails);
    tcase_add_test(tp, startup_unknown_until_success_or_failure);
    suite_add_tcase(s, tp);
    TCase *tg = tcase_create("gpu");
    tcase_add_test(tg, gpu_allocator_disjoint_refuse_restore);
    suite_add_tcase(s, tg);
    TCase *ts = tcase_create("status");
    tcase_add_test(ts, status_init_sequence_07);
    tcase_add_test(ts, status_crashloop_04);
    tcase_add_loop_test(ts, phase_table, 0, TABLE_SIZE(kPhases));
    tcase_add_test(ts, readiness_unready_running_05);
    tcase_add_test(ts, refused_status_and_never_init_failure);
    suite_add_tcase(s, ts);
    TCase *tr = tcase_create("runner");
    tcase_set_timeout(tr, 30);
    tcase_add_loop_test(tr, runner_on_loop_leaves_no_handle, 0, TABLE_SIZE(kRunnerEnds));
    suite_add_tcase(s, tr);
    return sk_run_suite(s);
}
