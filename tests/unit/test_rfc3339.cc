// common/rfc3339: every timestamp shape the tree writes, from one formatter.
#include <string>

#include "common/rfc3339.h"
#include "tests/unit/check_main.h"

using namespace sk;

struct FormatCase {
    int64_t unix_s, nanos;
    int digits;
    bool trim;
    const char *want;
};
static const FormatCase kFormat[] = {
    {0, 0, 0, false, "1970-01-01T00:00:00Z"},
    {1795963182, 589439123, 0, false, "2026-11-29T14:39:42Z"},
    {1795963182, 589439123, 3, false, "2026-11-29T14:39:42.589Z"},  // truncated, not rounded
    {1795963182, 589439999, 6, false, "2026-11-29T14:39:42.589439Z"},
    {1795963182, 589439123, 9, false, "2026-11-29T14:39:42.589439123Z"},
    {1795963182, 500000000, 9, true, "2026-11-29T14:39:42.5Z"},
    {1795963182, 0, 9, true, "2026-11-29T14:39:42Z"},
    {1795963182, 0, 9, false, "2026-11-29T14:39:42.000000000Z"},
    {-1, 0, 0, false, "1969-12-31T23:59:59Z"},
    {-62135596800, 0, 0, false, "0001-01-01T00:00:00Z"},      // four-digit year
    {-99999999999, 5, 3, false, "0000-01-01T00:00:00.000Z"},  // clamped
    {999999999999, 0, 0, false, "9999-12-31T23:59:59Z"},      // clamped
    {0, 7, 12, false, "1970-01-01T00:00:00.000000007Z"},      // digits at most 9
    {0, -3, 3, false, "1970-01-01T00:00:00.000Z"},            // nanos out of range: 0
};
START_TEST(format_table) {
    const auto &c = kFormat[_i];
    ck_assert_sstr_eq(format_rfc3339(c.unix_s, c.nanos, c.digits, c.trim), c.want);
}
END_TEST

START_TEST(named_shapes) {
    ck_assert_sstr_eq(rfc3339(1795963182), "2026-11-29T14:39:42Z");
    ck_assert_sstr_eq(micro_time(1795963182589439LL), "2026-11-29T14:39:42.589439Z");
    ck_assert_sstr_eq(micro_time(1795963182000001LL), "2026-11-29T14:39:42.000001Z");
    ck_assert_sstr_eq(micro_time(-1), "1969-12-31T23:59:59.999999Z");
    ck_assert_sstr_eq(format_rfc3339nano(1, true), "1970-01-01T00:00:00.000000001Z");
    ck_assert_sstr_eq(format_rfc3339nano(1500000000, false), "1970-01-01T00:00:01.5Z");
    ck_assert_sstr_eq(format_rfc3339nano(-1, false), "1969-12-31T23:59:59.999999999Z");
}
END_TEST

START_TEST(parse_seconds) {
    ck_assert_int_eq(parse_rfc3339("2026-11-29T14:39:42Z"), 1795963182);
    ck_assert_int_eq(parse_rfc3339("2026-11-29T14:39:42.5Z"), 1795963182);
    ck_assert_int_eq(parse_rfc3339(rfc3339(1795963182)), 1795963182);
    ck_assert_int_eq(parse_rfc3339("2026-11-29 14:39:42"), -1);
    ck_assert_int_eq(parse_rfc3339("2026-11-29T14:39:42"), -1);
    ck_assert_int_eq(parse_rfc3339("2026-11-29T14:39:42Zx"), -1);
    ck_assert_int_eq(parse_rfc3339(""), -1);
}
END_TEST

// The shapes the agent writes: a Lease's renewTime (agent/controllers/node_builder.cc) and seconds.
START_TEST(micro_time_has_six_digits) {
    ck_assert_sstr_eq(micro_time(1795963182589439LL), "2026-11-29T14:39:42.589439Z");
    ck_assert_sstr_eq(micro_time(1795963182000001LL), "2026-11-29T14:39:42.000001Z");
    ck_assert_sstr_eq(rfc3339(1795963182), "2026-11-29T14:39:42Z");
    ck_assert_int_eq(parse_rfc3339("2026-11-29T14:39:42Z"), 1795963182);
    ck_assert_int_eq(parse_rfc3339("2026-11-29T14:39:42.5Z"), 1795963182);
    ck_assert_int_eq(parse_rfc3339("2026-11-29 14:39:42"), -1);
}
END_TEST

int main() {
    Suite *s = suite_create("rfc3339");
    TCase *tc = tcase_create("rfc3339");
    tcase_add_loop_test(tc, format_table, 0, TABLE_SIZE(kFormat));
    tcase_add_test(tc, named_shapes);
    tcase_add_test(tc, parse_seconds);
    tcase_add_test(tc, micro_time_has_six_digits);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
