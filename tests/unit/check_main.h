// Shared main() for the Check programs: forked mode (a crash fails one test,
// not the program), Check's normal summary line, exit status for automake.
#pragma once

#include <check.h>
#include <stdlib.h>

#include <string>

// Check's deprecated fail() macro would shadow sk::fail().
#undef fail

static inline int sk_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

// Table-driven tests: TABLE_SIZE(t) for tcase_add_loop_test.
#define TABLE_SIZE(t) static_cast<int>(sizeof(t) / sizeof((t)[0]))

// String equality for std::string expressions: binds temporaries first (a
// c_str() of a temporary would dangle inside ck_assert_str_eq).
#define ck_assert_sstr_eq(a, b)                                                                  \
    do {                                                                                         \
        /* copies, not references: (a) may be a reference into a temporary */                    \
        const std::string sk_a_ = (a); /* NOLINT(performance-unnecessary-copy-initialization) */ \
        const std::string sk_b_ = (b); /* NOLINT(performance-unnecessary-copy-initialization) */ \
        ck_assert_str_eq(sk_a_.c_str(), sk_b_.c_str());                                          \
    } while (0)
