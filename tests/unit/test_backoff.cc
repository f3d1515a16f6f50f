// common/backoff: the one back-off doubles, caps, resets and jitters within
// bounds; its nominal schedule (the shim's pull back-off, the plugin's shim
// restarts) is exact.
#include <cstdint>

#include "common/backoff.h"
#include "tests/unit/check_main.h"

using namespace sk;

START_TEST(backoff_doubles_and_caps) {
    Backoff b(100, 1000, [](uint64_t d) { return d; });
    uint64_t want[] = {100, 200, 400, 800, 1000, 1000};
    for (uint64_t w : want)
        ck_assert_uint_eq(b.next_ms(), w);
    b.reset();
    ck_assert_uint_eq(b.next_ms(), 100);
    Backoff j(100, 1000);
    for (int i = 0; i < 20; i++) {
        uint64_t d = j.next_ms();
        ck_assert(d >= 100 && d <= 1250);
    }
}
END_TEST

// A 429's or 503's Retry-After is waited out (capped), never less than the
// back-off's own delay.
START_TEST(backoff_honours_retry_after) {
    Backoff b(100, 1000, [](uint64_t d) { return d; });
    Failure f = fail(Error::Transient, "HTTP 503");
    ck_assert_uint_eq(b.next_ms(f), 100);
    f.retry_after_s = 3;
    ck_assert_uint_eq(b.next_ms(f), 3000);
    f.retry_after_s = 86400;
    ck_assert_uint_eq(b.next_ms(f), Backoff::kMaxRetryAfterMs);
    f.retry_after_s = 0;
    ck_assert_uint_eq(b.next_ms(f), 800);  // the back-off went on meanwhile
}
END_TEST

// nominal_ms(n) is the n-th delay without jitter and without counting an
// attempt; no_jitter keeps every delay exact.
START_TEST(backoff_nominal_schedule) {
    Backoff b(10000, 300000, Backoff::no_jitter);
    ck_assert_uint_eq(b.nominal_ms(0), 10000);
    ck_assert_uint_eq(b.nominal_ms(1), 10000);
    ck_assert_uint_eq(b.nominal_ms(2), 20000);
    ck_assert_uint_eq(b.nominal_ms(5), 160000);
    ck_assert_uint_eq(b.nominal_ms(6), 300000);
    ck_assert_uint_eq(b.nominal_ms(1000), 300000);
    ck_assert_uint_eq(b.attempts(), 0);
    for (unsigned n = 1; n <= 8; n++)
        ck_assert_uint_eq(b.next_ms(), b.nominal_ms(n));
}
END_TEST

int main() {
    Suite *s = suite_create("backoff");
    TCase *tc = tcase_create("backoff");
    tcase_add_test(tc, backoff_doubles_and_caps);
    tcase_add_test(tc, backoff_honours_retry_after);
    tcase_add_test(tc, backoff_nominal_schedule);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
