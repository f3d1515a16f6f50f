// k8s-shim/probe: the readiness, liveness and startup probe state machines
// with an injected clock.
#include "k8s-shim/http_check.h"
#include "k8s-shim/probe.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

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

START_TEST(resume_after_suspension) {
    // Liveness (period 20 s, initialDelay 0): one period after the resume,
    // healthy, its failure count forgotten; readiness at once, not ready until
    // it passes; a startup probe with a longer initialDelay waits that.
    ProbeState live(ProbeKind::Liveness, spec(0, 20, 1, 1));
    live.arm(0);
    ck_assert(!live.record(true, 0));
    live.resume(50000);
    ck_assert_int_eq(live.due_ms(), 70000);
    ck_assert(live.outcome() == Outcome::Success);
    ck_assert_int_eq(live.failures(), 0);
    ProbeState ready(ProbeKind::Readiness, spec(5, 2, 1, 1));
    ready.arm(0);
    ck_assert(ready.record(true, 5000));
    ready.resume(50000);
    ck_assert_int_eq(ready.due_ms(), 50000);
    ck_assert(ready.outcome() == Outcome::Unknown);
    ProbeState start(ProbeKind::Startup, spec(30, 10, 1, 3));
    start.resume(1000);
    ck_assert_int_eq(start.due_ms(), 31000);
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

// The grpc health check's wire: the request for a service (the empty
// message for the server), the answer's status, a body that is no answer.
START_TEST(grpc_health_wire) {
    ck_assert(grpc_health_request("") == std::string("\0\0\0\0\0", 5));
    ck_assert(grpc_health_request("api") == std::string("\0\0\0\0\x05\x0a\x03"
                                                        "api",
                                                        10));
    std::string longname(200, 's');  // a two-byte length
    std::string r = grpc_health_request(longname);
    ck_assert_uint_eq(r.size(), 5 + 3 + 200);
    ck_assert(r.substr(5, 3) == std::string("\x0a\xc8\x01", 3));
    ck_assert_int_eq(grpc_health_status(std::string("\0\0\0\0\x02\x08\x01", 7)), 1);
    ck_assert_int_eq(grpc_health_status(std::string("\0\0\0\0\x02\x08\x02", 7)), 2);
    ck_assert_int_eq(grpc_health_status(std::string("\0\0\0\0\0", 5)), 0);  // UNKNOWN: default
    ck_assert_int_eq(grpc_health_status(std::string("\0\0\0\0\x09\x08\x01", 7)), -1);  // short
    ck_assert_int_eq(grpc_health_status(std::string("\x01\0\0\0\x02\x08\x01", 7)),
                     -1);  // compressed
    ck_assert_int_eq(grpc_health_status(""), -1);
    ck_assert_str_eq(grpc_status_name(2), "NOT_SERVING");
}
END_TEST

int main() {
    Suite *s = suite_create("probe");
    TCase *tc = tcase_create("probe");
    tcase_add_test(tc, readiness_thresholds_and_timing);
    tcase_add_test(tc, liveness_starts_healthy_and_fails);
    tcase_add_test(tc, startup_unknown_until_success_or_failure);
    tcase_add_test(tc, resume_after_suspension);
    tcase_add_test(tc, grpc_health_wire);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
