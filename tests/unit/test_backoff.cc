// agent/backoff: the API retry back-off doubles, caps, resets and jitters
// within bounds.
#include <cstdint>

#include "agent/backoff.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

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

int main() {
    Suite *s = suite_create("backoff");
    TCase *tc = tcase_create("backoff");
    tcase_add_test(tc, backoff_doubles_and_caps);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
