// agent/shim_runtime: the pod_status notification's optional "events" array
// (docs/protocol.md) into a snapshot; agent/agent.h: job_alive_command's
// result into what Slurm says of a job.
#include <string>

#include "agent/agent.h"
#include "uv/command_runner.h"
#include "agent/shim_runtime.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

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

// job_alive_command's result -> what Slurm says: Gone only when it says so.
START_TEST(job_state_from_command) {
    auto st = [](bool ran, int code, const char *out, const char *err) {
        CommandResult r;
        r.ran = ran;
        r.exit_code = code;
        r.output = out;
        r.errors = err;
        return job_state_of(r);
    };
    ck_assert(st(true, 0, "RUNNING\n", "") == JobState::Alive);
    ck_assert(st(true, 0, "", "") == JobState::Alive);
    ck_assert(st(true, 0, "COMPLETED\n", "") == JobState::Gone);
    // An array's id or a het leader's: one line per task or component.
    ck_assert(st(true, 0, "RUNNING\nRUNNING\n", "") == JobState::Alive);
    ck_assert(st(true, 0, "COMPLETED\nRUNNING\n", "") == JobState::Alive);
    ck_assert(st(true, 0, "COMPLETED\nCANCELLED\n", "") == JobState::Gone);
    // Suspended (scontrol suspend): alive, told apart while no part runs.
    ck_assert(st(true, 0, "SUSPENDED\n", "") == JobState::Suspended);
    ck_assert(st(true, 0, "COMPLETED\nSUSPENDED\n", "") == JobState::Suspended);
    ck_assert(st(true, 0, "SUSPENDED\nRUNNING\n", "") == JobState::Alive);
    // Waiting to run again (requeued, or requeued by Slurm after a node
    // failure): no allocation, so no node of it is alive.
    ck_assert(st(true, 0, "PENDING\n", "") == JobState::Gone);
    ck_assert(st(true, 0, "REQUEUED\n", "") == JobState::Gone);
    ck_assert(st(true, 0, "REQUEUE_HOLD\n", "") == JobState::Gone);
    ck_assert(st(true, 0, "PENDING\nRUNNING\n", "") == JobState::Alive);  // an array's tasks
    ck_assert(st(true, 1, "", "slurm_load_jobs error: Invalid job id specified\n") ==
              JobState::Gone);
    ck_assert(st(true, 1, "", "") == JobState::Gone);  // the command's own "no" (test -e)
    ck_assert(st(true, 1, "",
                 "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n") ==
              JobState::Unknown);
    ck_assert(st(true, 127, "", "") == JobState::Unknown);  // not found
    ck_assert(st(true, 137, "", "") == JobState::Unknown);  // killed
    ck_assert(st(false, -1, "", "") == JobState::Unknown);  // timed out, not spawned
}
END_TEST

// How an ended job's state (job_alive_command's output) names its pods'
// final status when the garbage collection removes them.
struct EndReasonCase {
    const char *output, *want;
};
static const EndReasonCase kEndReasons[] = {
    {"COMPLETED\n", "JobCompleted"},
    {"FAILED\n", "JobFailed"},
    {"OUT_OF_MEMORY\n", "JobFailed"},
    {"CANCELLED\n", "JobCancelled"},
    {"CANCELLED by 0\n", "JobCancelled"},
    {"TIMEOUT\n", "TimeLimit"},
    {"NODE_FAIL\n", "NodeFail"},
    {"PREEMPTED\n", "Preempted"},
    {"BOOT_FAIL\n", "JobEnded"},
    {"DEADLINE\n", "JobEnded"},
    {"PENDING\n", "Requeued"},  // requeued: waits for a new allocation
    {"REQUEUED\n", "Requeued"},
    {"REQUEUE_HOLD\n", "Requeued"},
    {"SPECIAL_EXIT\n", "Requeued"},
    {"", "JobEnded"},                   // Slurm forgot the job
    {"\n  NODE_FAIL  \n", "NodeFail"},  // blank lines, spaces
    {"garbage\nCOMPLETED\n", "JobCompleted"},
    {"COMPLETEDX\n", "JobEnded"},  // a whole word only
};
START_TEST(end_reason_from_state) {
    const EndReasonCase &c = kEndReasons[_i];
    std::string got = end_reason_of(c.output);
    ck_assert_msg(got == c.want, "'%s': %s, want %s", c.output, got.c_str(), c.want);
}
END_TEST

int main(void) {
    Suite *s = suite_create("shim_runtime");
    TCase *tc = tcase_create("shim_runtime");
    tcase_add_test(tc, pod_status_events_parse);
    tcase_add_loop_test(tc, pod_status_events_bad, 0, TABLE_SIZE(kBadEvents));
    tcase_add_test(tc, job_state_from_command);
    tcase_add_loop_test(tc, end_reason_from_state, 0, TABLE_SIZE(kEndReasons));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
