// agent/core/slurm_time: Slurm's end times, in the node's local time.
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "agent/core/slurm_time.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

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

int main(void) {
    Suite *s = suite_create("slurm_time");
    TCase *tc = tcase_create("slurm_time");
    tcase_add_loop_test(tc, slurm_time, 0, TABLE_SIZE(kSlurmTimes));
    tcase_add_test(tc, slurm_time_is_local);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
