// common/k8s_names: DNS-1123 names, qualified names, label values, taints
// and label lists.
#include <string>

#include "common/k8s_names.h"
#include "tests/unit/check_main.h"

using namespace sk;

struct NameCase {
    const char *in;
    bool label, subdomain, qualified, value;
};
static const NameCase kNames[] = {
    {"a", true, true, true, true},
    {"slurm-n1-42", true, true, true, true},
    {"a.b", false, true, true, true},
    {"A", false, false, true, true},
    {"-a", false, false, false, false},
    {"a-", false, false, false, false},
    {"", false, false, false, true},
    {"slurm-k8s/job-id", false, false, true, false},
    {"a/b/c", false, false, false, false},
    {"under_score", false, false, true, true},
    {"Bad.Prefix/x", false, false, false, false},
    {"0123456789012345678901234567890123456789012345678901234567890123", false, false, false,
     false},
};
START_TEST(names_table) {
    const auto &c = kNames[_i];
    ck_assert_msg(k8s::is_dns1123_label(c.in) == c.label, "label '%s'", c.in);
    ck_assert_msg(k8s::is_dns1123_subdomain(c.in) == c.subdomain, "subdomain '%s'", c.in);
    ck_assert_msg(k8s::is_qualified_name(c.in) == c.qualified, "qualified '%s'", c.in);
    ck_assert_msg(k8s::is_label_value(c.in) == c.value, "value '%s'", c.in);
}
END_TEST

struct TaintCase {
    const char *in;
    bool ok;
    const char *formatted;
};
static const TaintCase kTaints[] = {
    {"dedicated=rl:NoSchedule", true, "dedicated=rl:NoSchedule"},
    {"gpu:NoExecute", true, "gpu:NoExecute"},
    {"example.com/x=y:PreferNoSchedule", true, "example.com/x=y:PreferNoSchedule"},
    {"dedicated=rl", false, ""},
    {"dedicated=rl:Sometimes", false, ""},
    {"=v:NoSchedule", false, ""},
    {"k=bad value:NoSchedule", false, ""},
};
START_TEST(taint_table) {
    const auto &c = kTaints[_i];
    auto t = k8s::parse_taint(c.in);
    ck_assert_msg(t.ok() == c.ok, "'%s'", c.in);
    if (c.ok)
        ck_assert_sstr_eq(k8s::format_taint(*t), c.formatted);
    else
        ck_assert(t.message().find(c.in) != std::string::npos ||
                  t.message().find("taint") != std::string::npos);
}
END_TEST

START_TEST(labels_parse) {
    auto l = k8s::parse_labels("team=rl,example.com/tier=gold,empty=");
    ck_assert(l.ok());
    ck_assert_int_eq(l->size(), 3);
    ck_assert_sstr_eq(l->at("example.com/tier"), "gold");
    ck_assert(!k8s::parse_labels("team").ok());
    ck_assert(!k8s::parse_labels("team=a,team=b").ok());
    ck_assert(!k8s::parse_labels("te am=x").ok());
    ck_assert(k8s::parse_labels("t=-bad").message().find("label value '-bad'") !=
              std::string::npos);
}
END_TEST

int main() {
    Suite *s = suite_create("k8s_names");
    TCase *tc = tcase_create("k8s_names");
    tcase_add_loop_test(tc, names_table, 0, TABLE_SIZE(kNames));
    tcase_add_loop_test(tc, taint_table, 0, TABLE_SIZE(kTaints));
    tcase_add_test(tc, labels_parse);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
