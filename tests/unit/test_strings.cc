// common/strings: numbers, sizes, durations, index lists, split/trim/join.
#include <cstring>
#include <string>
#include <vector>

#include "common/strings.h"
#include "tests/unit/check_main.h"

using namespace sk;

// ---- numbers, sizes, durations ----
struct UintCase {
    const char *in;
    bool ok;
    uint64_t want;
};
static const UintCase kUint[] = {
    {"0", true, 0},
    {"42", true, 42},
    {"18446744073709551615", true, UINT64_MAX},
    {"", false, 0},
    {"-1", false, 0},
    {"+1", false, 0},
    {" 1", false, 0},
    {"1 ", false, 0},
    {"1x", false, 0},
    {"18446744073709551616", false, 0},
    {"0x10", false, 0},
};
START_TEST(uint_table) {
    const auto &c = kUint[_i];
    auto r = parse_uint(c.in, "value");
    ck_assert_msg(r.ok() == c.ok, "'%s'", c.in);
    if (c.ok)
        ck_assert_uint_eq(*r, c.want);
    else
        ck_assert_msg(r.message().find("value") != std::string::npos, "message names the field");
    // to_uint: the same numbers, without a message.
    auto n = to_uint(c.in);
    ck_assert_msg(n.has_value() == c.ok, "to_uint '%s'", c.in);
    if (c.ok) ck_assert_uint_eq(*n, c.want);
}
END_TEST

static const UintCase kSize[] = {
    {"512", true, 512},  {"512M", true, 512}, {"16G", true, 16384}, {"1T", true, 1048576},
    {"2Gi", true, 2048}, {"4Mi", true, 4},    {"", false, 0},       {"G", false, 0},
    {"1.5G", false, 0},  {"10X", false, 0},   {"-1G", false, 0},
};
START_TEST(size_table) {
    const auto &c = kSize[_i];
    auto r = parse_size_mib(c.in, "--k8s-mem");
    ck_assert_msg(r.ok() == c.ok, "'%s'", c.in);
    if (c.ok) ck_assert_uint_eq(*r, c.want);
}
END_TEST

static const UintCase kSeconds[] = {
    {"30", true, 30}, {"30s", true, 30}, {"5m", true, 300}, {"2h", true, 7200},
    {"", false, 0},   {"s", false, 0},   {"1d", false, 0},  {"-5", false, 0},
};
START_TEST(seconds_table) {
    const auto &c = kSeconds[_i];
    auto r = parse_seconds(c.in, "timeout");
    ck_assert_msg(r.ok() == c.ok, "'%s'", c.in);
    if (c.ok) ck_assert_uint_eq(*r, c.want);
}
END_TEST

struct ListCase {
    const char *in;
    bool ok;
    const char *want;  // formatted back
};
static const ListCase kLists[] = {
    {"", true, ""},           {"0", true, "0"},         {"0,1,2", true, "0,1,2"},
    {"0-3", true, "0,1,2,3"}, {"1,3-4", true, "1,3,4"}, {"3-1", false, ""},
    {"a", false, ""},         {"1,,2", false, ""},      {"0-99999", false, ""},
};
START_TEST(index_list_table) {
    const auto &c = kLists[_i];
    auto r = parse_index_list(c.in, "SLURM_JOB_GPUS");
    ck_assert_msg(r.ok() == c.ok, "'%s'", c.in);
    if (c.ok) ck_assert_sstr_eq(format_index_list(*r), c.want);
}
END_TEST

START_TEST(hex_bytes) {
    const unsigned char b[] = {0x00, 0x0f, 0xa0, 0xff};
    // Kept in variables: the check macros read the strings after the call.
    const std::string all = hex_encode(b, sizeof b), none = hex_encode(b, 0);
    ck_assert_str_eq(all.c_str(), "000fa0ff");
    ck_assert_str_eq(none.c_str(), "");
}
END_TEST

START_TEST(split_trim_join) {
    auto v = split("a,,b", ',');
    ck_assert_int_eq(v.size(), 3);
    ck_assert_sstr_eq(v[1], "");
    ck_assert_sstr_eq(std::string(trim("  x y \t")), "x y");
    ck_assert_sstr_eq(join({"a", "b", "c"}, ", "), "a, b, c");
    ck_assert(starts_with("slurm-k8s", "slurm"));
    ck_assert(!ends_with("k8s", "slurm-k8s"));
}
END_TEST

int main() {
    Suite *s = suite_create("strings");
    TCase *tc = tcase_create("strings");
    tcase_add_loop_test(tc, uint_table, 0, TABLE_SIZE(kUint));
    tcase_add_loop_test(tc, size_table, 0, TABLE_SIZE(kSize));
    tcase_add_loop_test(tc, seconds_table, 0, TABLE_SIZE(kSeconds));
    tcase_add_loop_test(tc, index_list_table, 0, TABLE_SIZE(kLists));
    tcase_add_test(tc, split_trim_join);
    tcase_add_test(tc, hex_bytes);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
