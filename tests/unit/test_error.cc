// common/error and common/result: error names both ways, a failure's
// description.
#include <string>

#include "common/error.h"
#include "common/result.h"
#include "tests/unit/check_main.h"

using namespace sk;

START_TEST(error_names_round_trip) {
    for (int i = 0; i <= static_cast<int>(Error::Internal); i++) {
        Error e = static_cast<Error>(i), back;
        ck_assert(error_from_string(to_string(e), &back));
        ck_assert(back == e);
    }
    Error e;
    ck_assert(!error_from_string("nonsense", &e));
    ck_assert_sstr_eq(fail(Error::NotFound, "node x").describe(), "not_found: node x");
}
END_TEST

int main() {
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("error");
    tcase_add_test(tc, error_names_round_trip);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
