// Shared main() for the Check programs: forked mode (a crash fails one test,
// not the program), Check's normal summary line, exit status for automake.
#pragma once

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

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

// A new directory from a mkdtemp template ("/tmp/sk-x-XXXXXX"), removed with
// everything in it when the test's process exits (each test runs in a
// process of its own: CK_FORK), passed or failed. Nothing is followed: a
// symlink inside is removed as itself.
static inline std::vector<std::string> &sk_test_tmpdirs() {
    static std::vector<std::string> dirs;
    return dirs;
}
static inline int sk_remove_entry(const char *path, const struct stat *, int, struct FTW *) {
    remove(path);
    return 0;
}
static inline void sk_remove_test_tmpdirs() {
    for (const auto &d : sk_test_tmpdirs())
        nftw(d.c_str(), sk_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
static inline std::string sk_test_tmpdir(const char *tmpl) {
    std::string t = tmpl;
    ck_assert_msg(mkdtemp(t.data()) != nullptr, "mkdtemp %s failed", tmpl);
    if (sk_test_tmpdirs().empty()) atexit(sk_remove_test_tmpdirs);
    sk_test_tmpdirs().push_back(t);
    return t;
}
