// The agent's wiring of the kubelet endpoint, events and Slurm queries: the
// log index the endpoint resolves from (common/log_paths.h, restartCount and
// running from the shim's status), the event correlator (count +
// lastTimestamp like the kubelet's), the pod_status "events" array
// (optional, docs/protocol.md), Slurm's time format, and the new config keys.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "agent/agent_config.h"
#include "agent/event_correlator.h"
#include "agent/kube_time.h"
#include "agent/log_index.h"
#include "agent/pod_status_patch.h"
#include "agent/shim_runtime.h"
#include "common/json.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

static Json::Value J(const char *text) {
    auto v = json::parse(text);
    ck_assert_msg(v.ok(), "bad test JSON: %s", text);
    return *v;
}

// ---- Slurm time ----
struct SlurmTime {
    const char *in;
    bool zero, bad;
};
static const SlurmTime kSlurmTimes[] = {
    {"N/A", true, false},
    {"Unknown\n", true, false},
    {"", true, false},
    {"NONE", true, false},
    {"2026-11-29T14:59:12\n", false, false},
    {"2026-13-29T14:59:12", false, true},
    {"2026-11-29 14:59:12", false, true},
    {"tomorrow", false, true},
    {"2026-11-29T14:59:12Z", false, true},
    {"1969-12-31T23:59:59", false, true},
};
START_TEST(slurm_time) {
    const SlurmTime &t = kSlurmTimes[_i];
    int64_t v = parse_slurm_time(t.in);
    if (t.bad)
        ck_assert_msg(v == -1, "'%s' accepted as %lld", t.in, static_cast<long long>(v));
    else if (t.zero)
        ck_assert_int_eq(v, 0);
    else
        ck_assert_int_gt(v, 1700000000);
}
END_TEST
START_TEST(slurm_time_is_local) {
    setenv("TZ", "UTC", 1);
    tzset();
    ck_assert_int_eq(parse_slurm_time("2026-11-29T14:39:42"), 1795963182);
    setenv("TZ", "Europe/Berlin", 1);
    tzset();
    ck_assert_int_eq(parse_slurm_time("2026-11-29T15:39:42"), 1795963182);
}
END_TEST

// ---- event correlator ----
static Json::Value sample_event(const char *reason, const char *msg, const char *uid = "u1") {
    Json::Value pod = J(R"({"metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}})");
    pod["metadata"]["uid"] = uid;
    return build_pod_event(pod, {"Warning", reason, msg, "spec.containers{main}"}, "slurm-n1-42",
                           1795963182000000LL);
}
START_TEST(correlator_counts_repeats) {
    EventCorrelator c(600);
    auto a1 = c.observe(sample_event("Unhealthy", "Liveness probe failed: x"), 1000);
    ck_assert(a1.create);
    ck_assert_sstr_eq(a1.body["involvedObject"]["fieldPath"].asString(), "spec.containers{main}");
    ck_assert_sstr_eq(a1.body["source"]["component"].asString(), "kubelet");
    ck_assert_int_eq(a1.body["count"].asInt(), 1);
    auto a2 = c.observe(sample_event("Unhealthy", "Liveness probe failed: x"), 1010);
    ck_assert(!a2.create);
    ck_assert_sstr_eq(a2.name, a1.body["metadata"]["name"].asString());
    ck_assert_sstr_eq(a2.ns, "ns");
    ck_assert_int_eq(a2.body["count"].asInt(), 2);
    ck_assert_sstr_eq(a2.body["lastTimestamp"].asString(), rfc3339(1010));
    ck_assert(!a2.body.isMember("firstTimestamp"));
    auto a3 = c.observe(sample_event("Unhealthy", "Liveness probe failed: x"), 1020);
    ck_assert_int_eq(a3.body["count"].asInt(), 3);
}
END_TEST
struct CorrCase {
    const char *reason, *message, *uid;
    int64_t at;
};
// Each differs from the first event in one way: a new Event every time.
static const CorrCase kCorrNew[] = {
    {"Unhealthy", "Readiness probe failed: x", "u1", 1001},  // message
    {"BackOff", "Liveness probe failed: x", "u1", 1001},     // reason
    {"Unhealthy", "Liveness probe failed: x", "u2", 1001},   // object
    {"Unhealthy", "Liveness probe failed: x", "u1", 1700},   // outside the window
};
START_TEST(correlator_new_event) {
    EventCorrelator c(600);
    ck_assert(c.observe(sample_event("Unhealthy", "Liveness probe failed: x"), 1000).create);
    const CorrCase &k = kCorrNew[_i];
    auto a = c.observe(sample_event(k.reason, k.message, k.uid), k.at);
    ck_assert(a.create);
    ck_assert_int_eq(a.body["count"].asInt(), 1);
}
END_TEST
START_TEST(correlator_forgets) {
    EventCorrelator c(600, 2);
    auto e = sample_event("Unhealthy", "m");
    ck_assert(c.observe(e, 1).create);
    c.forget(e);  // the POST failed: the next one is created again
    ck_assert(c.observe(e, 2).create);
    c.forget_object("u1");
    ck_assert_int_eq(c.size(), 0);
    ck_assert(c.observe(sample_event("A", "m"), 3).create);
    ck_assert(c.observe(sample_event("B", "m"), 4).create);
    ck_assert(c.observe(sample_event("C", "m"), 5).create);
    ck_assert_int_eq(c.size(), 2);  // bounded: A (oldest) dropped
    ck_assert(c.observe(sample_event("A", "m"), 6).create);
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

// ---- pod_status "events" (optional, docs/protocol.md) ----
START_TEST(pod_status_events_parse) {
    auto s = pod_status_from_json(J(R"({"uid":"u","namespace":"ns","name":"p","status":{},
        "events":[{"type":"Warning","reason":"Unhealthy","message":"Readiness probe failed: HTTP probe failed with statuscode: 500","container":"main"},
                  {"type":"Normal","reason":"Killing","message":"m"}]})"));
    ck_assert_msg(s.ok(), "%s", s.ok() ? "" : s.message().c_str());
    ck_assert(s->reports_events);
    ck_assert_int_eq(s->events.size(), 2);
    ck_assert_sstr_eq(s->events[0].container, "main");
    ck_assert_sstr_eq(s->events[1].container, "");
    auto old = pod_status_from_json(J(R"({"uid":"u","status":{}})"));
    ck_assert(old.ok() && !old->reports_events && old->events.empty());
}
END_TEST
static const char *kBadEvents[] = {
    R"("events":{})",
    R"("events":[1])",
    R"("events":[{"type":"Error","reason":"X","message":""}])",
    R"("events":[{"type":"Normal","reason":"","message":""}])",
    R"("events":[{"type":"Normal","message":""}])",
};
START_TEST(pod_status_events_bad) {
    std::string text = std::string(R"({"uid":"u","status":{},)") + kBadEvents[_i] + "}";
    auto s = pod_status_from_json(J(text.c_str()));
    ck_assert_msg(!s.ok(), "accepted %s", kBadEvents[_i]);
}
END_TEST

// ---- log index ----
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
    {{"ns", "p", "setup", true}, Error::NotFound, "previous terminated container"},
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

// ---- config ----
static const char kConf[] = "api_server = https://127.0.0.1:6443\napi_token_file = /t\n";
struct ConfCase {
    const char *extra, *error_has;  // error_has null = accepted
};
static const ConfCase kConfCases[] = {
    {"kubelet_cert = /c\nkubelet_key = /k\nkubelet_client_ca = /ca\n", nullptr},
    {"kubelet_insecure = true\nkubelet_port = 0\nmetrics_port = 9100\n", nullptr},
    {"job_end_command = \n", nullptr},
    {"kubelet_cert = /c\n", "set together"},
    {"kubelet_cert = /c\nkubelet_key = /k\n", "kubelet_client_ca is required"},
    {"kubelet_insecure = true\nkubelet_cert = /c\nkubelet_key = /k\nkubelet_client_ca = /ca\n",
     "exclude each other"},
    {"job_end_command = squeue -o %e\n", "must contain {job}"},
    {"metrics_port = 70000\n", "out of range"},
    {"kubelet_insecure = maybe\n", "kubelet_insecure"},
};
START_TEST(config_keys) {
    const ConfCase &k = kConfCases[_i];
    auto c = parse_agent_config(std::string(kConf) + k.extra, "agent.conf");
    if (!k.error_has) {
        ck_assert_msg(c.ok(), "%s: %s", k.extra, c.ok() ? "" : c.message().c_str());
        return;
    }
    ck_assert_msg(!c.ok(), "accepted %s", k.extra);
    ck_assert_msg(c.message().find(k.error_has) != std::string::npos, "%s", c.message().c_str());
}
END_TEST
START_TEST(config_defaults) {
    auto c = parse_agent_config(kConf, "agent.conf");
    ck_assert(c.ok());
    ck_assert_uint_eq(c->cordon_before_end_s, 60);
    ck_assert_uint_eq(c->metrics_port, 0);
    ck_assert_uint_eq(c->kubelet_port, 10250);
    ck_assert_sstr_eq(c->job_end_command, "squeue -h -j {job} -o %e");
}
END_TEST

int main(void) {
    Suite *s = suite_create("agent_wiring");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, slurm_time, 0, TABLE_SIZE(kSlurmTimes));
    tcase_add_test(tc, slurm_time_is_local);
    tcase_add_test(tc, correlator_counts_repeats);
    tcase_add_loop_test(tc, correlator_new_event, 0, TABLE_SIZE(kCorrNew));
    tcase_add_test(tc, correlator_forgets);
    tcase_add_test(tc, backoff_not_doubled);
    tcase_add_test(tc, pod_status_events_parse);
    tcase_add_loop_test(tc, pod_status_events_bad, 0, TABLE_SIZE(kBadEvents));
    tcase_add_loop_test(tc, config_keys, 0, TABLE_SIZE(kConfCases));
    tcase_add_test(tc, config_defaults);
    suite_add_tcase(s, tc);
    TCase *logs = tcase_create("log_index");
    tcase_add_unchecked_fixture(logs, setup_logs, teardown_logs);
    tcase_add_test(logs, log_index_current_and_previous);
    tcase_add_test(logs, log_index_backoff_shows_last_instance);
    tcase_add_loop_test(logs, log_index_failures, 0, TABLE_SIZE(kIdxFails));
    tcase_add_test(logs, log_index_waiting_to_start);
    tcase_add_test(logs, log_index_remove_keeps_newer_uid);
    suite_add_tcase(s, logs);
    return sk_run_suite(s);
}
