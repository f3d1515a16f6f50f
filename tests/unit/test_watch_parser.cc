// agent/kube/watch_parser: the watch stream split at every byte, ERROR events,
// malformed lines and the line bound.
#include <string>
#include <string_view>
#include <vector>

#include "agent/kube/watch_parser.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

START_TEST(watch_split_chunks) {
    std::string stream =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}}"
        "\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":"
        "\"9\"}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"10\"}"
        "}}\n";
    // Every split point gives the same three events.
    for (size_t cut = 0; cut <= stream.size(); cut++) {
        WatchParser p;
        auto a = p.feed(std::string_view(stream).substr(0, cut));
        ck_assert(a.ok());
        auto b = p.feed(std::string_view(stream).substr(cut));
        ck_assert(b.ok());
        std::vector<WatchEvent> all = *a;
        all.insert(all.end(), b->begin(), b->end());
        ck_assert_int_eq(all.size(), 3);
        ck_assert(all[0].type == WatchType::Added);
        ck_assert(all[1].type == WatchType::Bookmark);
        ck_assert_sstr_eq(all[1].resource_version, "9");
        ck_assert(all[2].type == WatchType::Deleted);
        ck_assert_sstr_eq(all[2].resource_version, "10");
        ck_assert_int_eq(p.buffered(), 0);
    }
}
END_TEST

START_TEST(watch_error_410) {
    WatchParser p;
    auto e = p.feed(
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
        "\"Failure\",\"message\":\"too old resource version: 1 (812)\",\"reason\":\"Expired\","
        "\"code\":410}}\n");
    ck_assert(e.ok());
    ck_assert_int_eq(e->size(), 1);
    ck_assert((*e)[0].type == WatchType::Error);
    ck_assert_int_eq((*e)[0].error_code, 410);
    ck_assert_sstr_eq((*e)[0].error_message, "too old resource version: 1 (812)");
}
END_TEST

static const char *kBadWatchLines[] = {
    "not json\n",
    "[1]\n",
    "{\"type\":\"ADDED\"}\n",
    "{\"type\":\"WHAT\",\"object\":{}}\n",
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}}\n",  // no resourceVersion
};
START_TEST(watch_bad_lines) {
    WatchParser p;
    auto e = p.feed(kBadWatchLines[_i]);
    ck_assert_msg(!e.ok(), "accepted %s", kBadWatchLines[_i]);
}
END_TEST

START_TEST(watch_line_bound) {
    WatchParser p(100);
    auto e = p.feed(std::string(101, 'x'));
    ck_assert(!e.ok());
    ck_assert(e.error() == Error::TooLarge);
}
END_TEST

int main() {
    Suite *s = suite_create("watch_parser");
    TCase *tc = tcase_create("watch_parser");
    tcase_add_test(tc, watch_split_chunks);
    tcase_add_test(tc, watch_error_410);
    tcase_add_loop_test(tc, watch_bad_lines, 0, TABLE_SIZE(kBadWatchLines));
    tcase_add_test(tc, watch_line_bound);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
