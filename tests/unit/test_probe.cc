// k8s-shim/probe: the readiness, liveness and startup probe state machines
// with an injected clock.
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

int main() {
    Suite *s = suite_create("probe");
    TCase *tc = tcase_create("probe");
    tcase_add_test(tc, readiness_thresholds_and_timing);
    tcase_add_test(tc, liveness_starts_healthy_and_fails);
    tcase_add_test(tc, startup_unknown_until_success_or_failure);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
