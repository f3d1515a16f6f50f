// agent/kubelet/log_index: the log files the kubelet endpoint resolves a container
// to (common/daemons/log_paths.h, restartCount and running from the shim's status).
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "agent/kubelet/log_index.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

static std::string g_dir;
static void write_file(const std::string &path, const std::string &text) {
    std::ofstream(path) << text;
}
static void setup_logs() {
    char tmpl[] = "/tmp/sk-logidx-XXXXXX";
    g_dir = mkdtemp(tmpl);
    mkdir((g_dir + "/pods").c_str(), 0755);
    mkdir((g_dir + "/pods/u1").c_str(), 0755);
    mkdir((g_dir + "/pods/u1/main").c_str(), 0755);
    write_file(g_dir + "/pods/u1/main/0.log", "2026-01-01T00:00:00.000000000Z stdout F zero\n");
    write_file(g_dir + "/pods/u1/main/2.log", "2026-01-01T00:00:00.000000000Z stdout F two\n");
}
static void teardown_logs() {
    std::string cmd = "rm -rf '" + g_dir + "'";
    // NOLINTNEXTLINE(cert-env33-c): rm -rf of the test's own mkdtemp directory
    if (system(cmd.c_str()) != 0) fprintf(stderr, "cannot remove %s\n", g_dir.c_str());
}
static void sample_index(LogIndex &idx, const char *main_state, int restarts) {
    std::string st = std::string(R"({"initContainerStatuses":[{"name":"setup","restartCount":0,
        "state":{"terminated":{"exitCode":0}}}],"containerStatuses":[{"name":"main","restartCount":)") +
                     std::to_string(restarts) + R"(,"state":)" + main_state + "}]}";
    idx.update("ns", "p", "u1", g_dir, J(st.c_str()));
}
START_TEST(log_index_current_and_previous) {
    LogIndex idx;
    sample_index(idx, R"({"running":{}})", 2);
    auto r = idx.resolve({"ns", "p", "main", false});
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert(r->running);
    ck_assert_sstr_eq(r->paths_oldest_first.back(), g_dir + "/pods/u1/main/2.log");
    ck_assert_sstr_eq(r->paths_oldest_first.front(), g_dir + "/pods/u1/main/2.log.1");
    auto p = idx.resolve({"ns", "p", "main", true});
    ck_assert(p.ok() && !p->running);
    ck_assert_sstr_eq(p->paths_oldest_first.back(), g_dir + "/pods/u1/main/0.log");
    auto i = idx.resolve({"ns", "p", "setup", false});
    ck_assert(i.ok() && !i->running);
}
END_TEST
START_TEST(log_index_backoff_shows_last_instance) {
    // restartCount 3 while waiting: 3.log does not exist yet -> 2.log.
    LogIndex idx;
    sample_index(idx, R"({"waiting":{"reason":"CrashLoopBackOff"}})", 3);
    auto r = idx.resolve({"ns", "p", "main", false});
    ck_assert(r.ok() && !r->running);
    ck_assert_sstr_eq(r->paths_oldest_first.back(), g_dir + "/pods/u1/main/2.log");
}
END_TEST
struct IdxFail {
    ContainerLogRef ref;
    Error code;
    const char *has;
};
static const IdxFail kIdxFails[] = {
    {{"ns", "other", "main", false}, Error::NotFound, "pod \"other\""},
    {{"ns2", "p", "main", false}, Error::NotFound, "not running on this node"},
    {{"ns", "p", "nope", false}, Error::InvalidArgument, "is not valid for pod p"},
    // the kubelet's 400 and words (kubectl: Error from server (BadRequest): ...)
    {{"ns", "p", "setup", true},
     Error::InvalidArgument,
     "previous terminated container \"setup\" in pod \"p\" not found"},
};
START_TEST(log_index_failures) {
    LogIndex idx;
    sample_index(idx, R"({"running":{}})", 2);
    auto r = idx.resolve(kIdxFails[_i].ref);
    ck_assert(!r.ok());
    ck_assert_int_eq(static_cast<int>(r.error()), static_cast<int>(kIdxFails[_i].code));
    ck_assert_msg(r.message().find(kIdxFails[_i].has) != std::string::npos, "%s",
                  r.message().c_str());
}
END_TEST
START_TEST(log_index_waiting_to_start) {
    LogIndex idx;
    idx.update("ns", "q", "u9", g_dir, J(R"({"containerStatuses":[{"name":"main","restartCount":0,
        "state":{"waiting":{"reason":"ContainerCreating"}}}]})"));
    auto r = idx.resolve({"ns", "q", "main", false});
    ck_assert(!r.ok() && r.error() == Error::InvalidArgument);
    ck_assert_msg(r.message().find("is waiting to start: ContainerCreating") != std::string::npos,
                  "%s", r.message().c_str());
}
END_TEST
START_TEST(log_index_remove_keeps_newer_uid) {
    LogIndex idx;
    sample_index(idx, R"({"running":{}})", 0);
    idx.update("ns", "p", "u2", g_dir, J(R"({"containerStatuses":[]})"));
    idx.remove("ns", "p", "u1");  // the old pod's delete arrives late
    ck_assert_int_eq(idx.size(), 1);
    idx.remove("ns", "p", "u2");
    ck_assert_int_eq(idx.size(), 0);
}
END_TEST

// exec_check (the kubelet endpoint's /exec, /attach, /portForward before the
// upgrade): a running container, one not running, an unknown container, and
// a per-node endpoint (state_dir) that must not admit another job's pod.
START_TEST(log_index_exec_check) {
    LogIndex idx;
    sample_index(idx, R"({"running":{}})", 0);
    ck_assert(idx.exec_check("ns", "p", "main").ok());
    ck_assert(idx.exec_check("ns", "p", "").ok());  // port-forward: the pod alone
    ck_assert_int_eq(static_cast<int>(idx.exec_check("ns", "p", "nope").error()),
                     static_cast<int>(Error::NotFound));
    ck_assert_int_eq(static_cast<int>(idx.exec_check("ns", "p", "setup").error()),
                     static_cast<int>(Error::InvalidArgument));  // terminated
    ck_assert_int_eq(static_cast<int>(idx.exec_check("ns", "other", "main").error()),
                     static_cast<int>(Error::NotFound));
    ck_assert(idx.exec_check("ns", "p", "main", g_dir).ok());
    Status other = idx.exec_check("ns", "p", "main", g_dir + "-another-job");
    ck_assert_int_eq(static_cast<int>(other.error()), static_cast<int>(Error::NotFound));
    ck_assert_msg(other.message().find("not running on this node") != std::string::npos, "%s",
                  other.message().c_str());
    ck_assert_int_eq(static_cast<int>(idx.exec_check("ns", "p", "", g_dir + "-x").error()),
                     static_cast<int>(Error::NotFound));
}
END_TEST

int main(void) {
    Suite *s = suite_create("log_index");
    TCase *logs = tcase_create("log_index");
    tcase_add_unchecked_fixture(logs, setup_logs, teardown_logs);
    tcase_add_test(logs, log_index_current_and_previous);
    tcase_add_test(logs, log_index_backoff_shows_last_instance);
    tcase_add_loop_test(logs, log_index_failures, 0, TABLE_SIZE(kIdxFails));
    tcase_add_test(logs, log_index_waiting_to_start);
    tcase_add_test(logs, log_index_remove_keeps_newer_uid);
    tcase_add_test(logs, log_index_exec_check);
    suite_add_tcase(s, logs);
    return sk_run_suite(s);
}
