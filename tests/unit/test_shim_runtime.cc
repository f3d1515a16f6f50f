// agent/shim_runtime: the pod_status notification's optional "events" array
// (docs/protocol.md) into a snapshot.
#include <string>

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

int main(void) {
    Suite *s = suite_create("shim_runtime");
    TCase *tc = tcase_create("shim_runtime");
    tcase_add_test(tc, pod_status_events_parse);
    tcase_add_loop_test(tc, pod_status_events_bad, 0, TABLE_SIZE(kBadEvents));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
