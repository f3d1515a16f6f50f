// agent/controllers/event_correlator: repeats counted with lastTimestamp like the
// kubelet's, what makes a new Event, forgetting, the bound.
#include <string>

#include "agent/controllers/event_correlator.h"
#include "agent/controllers/pod_status_patch.h"
#include "common/rfc3339.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

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

int main(void) {
    Suite *s = suite_create("event_correlator");
    TCase *tc = tcase_create("event_correlator");
    tcase_add_test(tc, correlator_counts_repeats);
    tcase_add_loop_test(tc, correlator_new_event, 0, TABLE_SIZE(kCorrNew));
    tcase_add_test(tc, correlator_forgets);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
