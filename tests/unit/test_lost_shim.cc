// agent/lost_shim: a dead shim's recorded processes, the status of its lost
// pods, and the checks that a recorded process is still the same one.
#include <unistd.h>

#include <string>

#include "agent/lost_shim.h"
#include "agent/pod_status_patch.h"
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

int main() {
    Suite *s = suite_create("lost_shim");
    TCase *tc = tcase_create("lost_shim");
    tcase_add_loop_test(tc, lost_shim_records, 0, TABLE_SIZE(kRecords));
    tcase_add_test(tc, lost_shim_status);
    tcase_add_test(tc, lost_shim_process_checks);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
