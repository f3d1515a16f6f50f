// k8s-shim/pod_runner: a PodRunner on a real loop, whose teardown leaves no
// handle (uv_loop_close() == 0).
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "k8s-shim/container.h"
#include "k8s-shim/pod_runner.h"
#include "k8s-shim/spawn.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

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
    c.pre_stop = ProbeSpec{};
    c.pre_stop->exec = {"/bin/sh", "-c", "sleep 0.1"};
    plan.containers.push_back(c);

    RunnerEnv env;
    env.clock.loop = &loop;
    env.clock.origin = uv_now(&loop);
    env.pod_dir = dir + "/pod";
    env.supervisor = SK_SHIM_BIN;
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
    // NOLINTNEXTLINE(cert-env33-c): rm -rf of the test's own mkdtemp directory
    ck_assert_int_eq(system(rm.c_str()), 0);
}
END_TEST

// A start that failed (one "cannot start" line, exit 128) is the kubelet's
// StartError, its line the message; anything else is the command's own end.
START_TEST(start_failure_told_apart) {
    ck_assert_sstr_eq(start_failure(128, "cannot start '/bin/x': No such file or directory\n"),
                      "cannot start '/bin/x': No such file or directory");
    ck_assert_sstr_eq(start_failure(1, "cannot start '/bin/x': nope\n"), "");    // not 128
    ck_assert_sstr_eq(start_failure(128, "output\ncannot start 'x': y\n"), "");  // it ran
    ck_assert_sstr_eq(start_failure(128, "bye\n"), "");                          // its own 128
    ck_assert_sstr_eq(start_failure(128, ""), "");
}
END_TEST

int main() {
    Suite *s = suite_create("pod_runner");
    TCase *tr = tcase_create("runner");
    tcase_set_timeout(tr, 30);
    tcase_add_loop_test(tr, runner_on_loop_leaves_no_handle, 0, TABLE_SIZE(kRunnerEnds));
    tcase_add_test(tr, start_failure_told_apart);
    suite_add_tcase(s, tr);
    return sk_run_suite(s);
}
