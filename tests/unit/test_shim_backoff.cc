// k8s-shim/backoff: the crash back-off schedule as a real kubelet v1.28
// recorded it (reference kubelet-objects 04-crashloop), its reset, and Go's
// duration format.
#include <cstdint>
#include <string>

#include "k8s-shim/backoff.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

START_TEST(backoff_schedule_as_recorded) {
    // A container that crashes 1 s after each start (04-crashloop): restarts
    // after 0, 10s, 20s, 40s, 1m20s, 2m40s, then capped at 5m.
    CrashBackoff b;
    int64_t now = 0;
    const int64_t want[] = {0, 10'000, 20'000, 40'000, 80'000, 160'000, 300'000, 300'000};
    for (int64_t w : want) {
        b.on_start(now);
        now += 1000;  // runs 1 s
        int64_t d = b.on_exit(now);
        ck_assert_int_eq(d, w);
        now += d;
    }
}
END_TEST

START_TEST(backoff_resets_after_ten_minutes_running) {
    CrashBackoff b;
    b.on_start(0);
    ck_assert_int_eq(b.on_exit(1000), 0);
    b.on_start(1000);
    ck_assert_int_eq(b.on_exit(2000), 10'000);
    b.on_start(12'000);
    // Ran for 10 minutes: the schedule starts over.
    ck_assert_int_eq(b.on_exit(12'000 + 600'000), 0);
    b.on_start(612'000);
    ck_assert_int_eq(b.on_exit(613'000), 10'000);
}
END_TEST

struct Dur {
    int64_t ms;
    const char *s;
};
static const Dur kDur[] = {{0, "0s"},         {10'000, "10s"},    {80'000, "1m20s"},
                           {300'000, "5m0s"}, {160'000, "2m40s"}, {3'600'000, "1h0m0s"}};
START_TEST(go_duration_table) {
    ck_assert_sstr_eq(go_duration(kDur[_i].ms), kDur[_i].s);
}
END_TEST

int main() {
    Suite *s = suite_create("shim_backoff");
    TCase *tc = tcase_create("backoff");
    tcase_add_test(tc, backoff_schedule_as_recorded);
    tcase_add_test(tc, backoff_resets_after_ten_minutes_running);
    tcase_add_loop_test(tc, go_duration_table, 0, TABLE_SIZE(kDur));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
