// common/log: levels, the sink, the bounded line, level names.
#include <string>
#include <vector>

#include "common/log.h"
#include "tests/unit/check_main.h"

using namespace sk;

static std::vector<std::string> g_lines;
static void capture(log::Level l, const char *line) {
    g_lines.push_back(std::string(log::level_name(l)) + "|" + line);
}

START_TEST(log_levels_and_sink) {
    log::set_sink(capture);
    log::set_level(log::Level::Info);
    LOG_INFO("[node %s] ready", "slurm-n1-1");
    LOG_DEBUG("hidden");
    LOG_ERROR("boom %d", 3);
    ck_assert_int_eq(g_lines.size(), 2);
    ck_assert_sstr_eq(g_lines[0], "info|[node slurm-n1-1] ready");
    ck_assert_sstr_eq(g_lines[1], "error|boom 3");
    std::string big(5000, 'x');
    LOG_INFO("%s", big.c_str());
    ck_assert(g_lines.back().size() < 2100);
    log::Level lv;
    ck_assert(log::level_from_string("debug", &lv) && lv == log::Level::Debug);
    ck_assert(!log::level_from_string("loud", &lv));
    log::set_sink(nullptr);
}
END_TEST

int main() {
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, log_levels_and_sink);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
