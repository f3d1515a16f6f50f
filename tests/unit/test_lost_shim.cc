// agent/controllers/lost_shim: a dead shim's recorded processes, the status of its lost
// pods, and the checks that a recorded process is still the same one.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "agent/controllers/lost_shim.h"
#include "agent/controllers/pod_status_patch.h"
#include "common/daemons/supervisor.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

// A dead shim's state.json: only unfinished pods' well-formed records name
// processes to stop (negative rows: anything else names none).
static const struct {
    const char *state;
    size_t n;
} kRecords[] = {
    {R"({"finished":false,"processes":{"a":{"pid":1234,"start_ticks":99},"b":{"pid":77,"start_ticks":5}}})",
     2},
    // a container's preStop hook and exec probe check, recorded beside it
    {R"({"finished":false,"processes":{"a":{"pid":1234,"start_ticks":99},"a:preStop:1300":{"pid":1300,"start_ticks":120},"a:probe:1301":{"pid":1301,"start_ticks":121}}})",
     3},
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

// A recorded container is added only while its process is the one that
// started then: not a reused pid, a zombie, pid 0/1 or a missing process.
START_TEST(recorded_containers_verified) {
    RecordedContainers c;
    unsigned long long me = proc_start_ticks(getpid());
    ck_assert(c.add(getpid(), me));
    ck_assert(!c.add(getpid(), me + 1));
    ck_assert(!c.add(1, proc_start_ticks(1)));
    ck_assert(!c.add(0x3ffffff, 1));
    ck_assert(!c.add(getpid(), 0));
    pid_t z = fork();
    if (z == 0) _exit(0);
    ProcStat st;
    for (int i = 0; i < 3000 && !(read_proc_stat(z, &st) && st.state == 'Z'); i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, nullptr);
    }
    ck_assert(read_proc_stat(z, &st) && st.state == 'Z');
    ck_assert(!c.add(z, st.start_ticks));  // a zombie
    ck_assert(waitpid(z, nullptr, 0) == z);
    ck_assert_uint_eq(c.size(), 1);
}
END_TEST

// Waits (30 s at most) for the child p to end; its wait status.
static int reap_within_30s(pid_t p) {
    int ws = -1;
    for (int i = 0; i < 3000; i++) {
        if (waitpid(p, &ws, WNOHANG) == p) return ws;
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, nullptr);
    }
    return -1;
}

// A child of its own process group; as a supervisor (named kSupervisorComm)
// it reports each signal it takes on `report` and never exits by itself;
// otherwise it just waits.
static pid_t group_leader(bool supervisor, int report) {
    pid_t c = fork();
    if (c == 0) {
        setpgid(0, 0);
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, nullptr);
        if (supervisor) prctl(PR_SET_NAME, kSupervisorComm);
        for (;;) {
            int sig = sigwaitinfo(&all, nullptr);
            if (sig > 0) (void)!write(report, &sig, sizeof sig);
        }
    }
    setpgid(c, c);
    return c;
}

// stop(): a supervisor is sent SIGCONT and supervisor_kill_signal(), and
// its group SIGKILL only once the wait is over (it did not exit); stop()
// itself returns without waiting. Another process's group gets SIGKILL at
// once.
START_TEST(recorded_containers_stop) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t sup = group_leader(true, fds[1]);
    pid_t other = group_leader(false, fds[1]);
    close(fds[1]);
    ProcStat st;
    for (int i = 0; i < 3000; i++) {  // the name is set once the child runs
        auto comm = read_proc_file(sup, "comm");
        if (comm && *comm == std::string(kSupervisorComm) + "\n") break;
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, nullptr);
    }
    RecordedContainers c;
    ck_assert(c.add(sup, proc_start_ticks(sup)));
    ck_assert(c.add(other, proc_start_ticks(other)));
    ck_assert(c.stop(nullptr, 3000));
    ck_assert(read_proc_stat(sup, &st) && st.state != 'Z');  // the wait is in the background
    int ws = reap_within_30s(other);
    ck_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    int got[2] = {0, 0};
    for (int &g : got)
        ck_assert_int_eq(read(fds[0], &g, sizeof g), sizeof g);
    ck_assert_int_eq(got[0], SIGCONT);
    ck_assert_int_eq(got[1], supervisor_kill_signal());
    ws = reap_within_30s(sup);
    ck_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    close(fds[0]);
}
END_TEST

int main() {
    Suite *s = suite_create("lost_shim");
    TCase *tc = tcase_create("lost_shim");
    tcase_add_loop_test(tc, lost_shim_records, 0, TABLE_SIZE(kRecords));
    tcase_add_test(tc, lost_shim_status);
    tcase_add_test(tc, lost_shim_process_checks);
    tcase_add_test(tc, recorded_containers_verified);
    tcase_add_test(tc, recorded_containers_stop);
    tcase_set_timeout(tc, 60);  // the stop's wait, on a loaded machine
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
