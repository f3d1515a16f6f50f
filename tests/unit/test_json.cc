// common/daemons/json: the strict, bounded parser and the typed getters.
#include <string>

#include "common/daemons/json.h"
#include "tests/unit/check_main.h"

using namespace sk;

struct JsonCase {
    const char *in;
    bool ok;
};
static const JsonCase kJson[] = {
    {"{}", true},
    {"{\"a\":[1,2,{\"b\":null}]}", true},
    {"", false},
    {"{", false},
    {"{\"a\":1} x", false},        // trailing garbage
    {"{\"a\":1,\"a\":2}", false},  // duplicate key
    {"// c\n{}", false},           // comments
    {"{'a':1}", false},            // single quotes
    {"[1,]", false},
    {"{\"a\":NaN}", false},
};
START_TEST(json_strict_table) {
    const auto &c = kJson[_i];
    auto r = json::parse(c.in);
    ck_assert_msg(r.ok() == c.ok, "'%s'", c.in);
    if (!c.ok) ck_assert(r.error() == Error::Parse);
}
END_TEST

START_TEST(json_depth_bounded) {
    std::string deep(10000, '[');
    deep += std::string(10000, ']');
    auto r = json::parse(deep);
    ck_assert(!r.ok());
}
END_TEST

START_TEST(json_typed_getters) {
    auto v = json::parse(
        R"({"s":"x","n":5,"neg":-1,"b":true,"l":["a"],"i":[1,2],"m":{"k":"v"},"bad":[1,"x"]})");
    ck_assert(v.ok());
    ck_assert_sstr_eq(*json::get_string(*v, "s", "t"), "x");  // c_str() of a temporary dangled
    ck_assert(!json::get_string(*v, "n", "t").ok());
    ck_assert(!json::get_string(*v, "zz", "t").ok());
    ck_assert_sstr_eq(json::get_string(*v, "zz", "ctx").message(), "ctx: missing 'zz'");
    ck_assert_uint_eq(*json::get_uint(*v, "n", "t"), 5);
    ck_assert(!json::get_uint(*v, "neg", "t").ok());
    ck_assert(!json::get_uint(*v, "n", "t", 4).ok());
    ck_assert_int_eq(*json::opt_int(*v, "neg", "t", 0), -1);
    ck_assert(*json::opt_bool(*v, "b", "t", false));
    ck_assert_int_eq(json::opt_string_list(*v, "l", "t")->size(), 1);
    ck_assert_int_eq(json::opt_int_list(*v, "i", "t", 10)->size(), 2);
    ck_assert(!json::opt_int_list(*v, "bad", "t", 10).ok());
    ck_assert(!json::opt_int_list(*v, "i", "t", 1).ok());
    ck_assert_sstr_eq(json::opt_string_map(*v, "m", "t")->at("k"), "v");
    ck_assert_sstr_eq(json::write(*json::parse("{ \"a\" : [ 1 ] }")), "{\"a\":[1]}");
}
END_TEST

int main() {
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_add_loop_test(tc, json_strict_table, 0, TABLE_SIZE(kJson));
    tcase_add_test(tc, json_depth_bounded);
    tcase_add_test(tc, json_typed_getters);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
