// libcommon: strings, config, JSON, Kubernetes names, errors, logging.
#include <cstring>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/json.h"
#include "common/k8s_names.h"
#include "common/log.h"
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

// ---- config ----
struct TestConfig {
    std::string socket = "/run/slurm-k8s/agent.sock";
    uint64_t timeout = 5;
    bool verbose = false;
    std::string on_error = "warn";
    std::vector<std::string> namespaces;
    uint64_t max_gpus = 8;
};

static ConfigSchema schema_for(TestConfig *c) {
    ConfigSchema s;
    s.add_path("socket", &c->socket, "agent socket");
    s.add_seconds("timeout", &c->timeout, 1, 600, "socket timeout");
    s.add_bool("verbose", &c->verbose, "more logs");
    s.add_enum("on_agent_error", &c->on_error, {"fail", "warn"}, "policy");
    s.add_list("allowed_namespaces", &c->namespaces, "namespaces");
    s.add_uint("max_gpus_per_node", &c->max_gpus, 0, 64, "limit");
    return s;
}

struct ArgsCase {
    std::vector<const char *> argv;
    bool ok;
    const char *message_has;  // for failures: the message must name this
};
static const ArgsCase kArgs[] = {
    {{}, true, ""},
    {{"socket=/tmp/a.sock", "timeout=10s", "verbose=yes"}, true, ""},
    {{"on_agent_error=fail", "allowed_namespaces=a,b", "allowed_namespaces=c"}, true, ""},
    {{"sockte=/tmp/a"}, false, "unknown key 'sockte'"},
    {{"socket"}, false, "is not key=value"},
    {{"socket=relative"}, false, "absolute path"},
    {{"timeout=0"}, false, "out of range"},
    {{"timeout=soon"}, false, "timeout"},
    {{"verbose=maybe"}, false, "boolean"},
    {{"on_agent_error=drain"}, false, "not one of: fail, warn"},
    {{"timeout=5", "timeout=6"}, false, "set twice"},
    {{"allowed_namespaces=a,,b"}, false, "empty list item"},
    {{"max_gpus_per_node=65"}, false, "out of range"},
    {{"=x"}, false, "not a valid key name"},
};
START_TEST(config_args_table) {
    const auto &c = kArgs[_i];
    TestConfig cfg;
    auto kvs = parse_kv_args(static_cast<int>(c.argv.size()), c.argv.data(), "plugstack.conf");
    Status st;
    if (!kvs)
        st = kvs.failure();
    else
        st = schema_for(&cfg).apply(*kvs);
    ck_assert_msg(st.ok() == c.ok, "case %d: %s", _i, st.ok() ? "ok" : st.message().c_str());
    if (!c.ok)
        ck_assert_msg(st.message().find(c.message_has) != std::string::npos, "'%s' lacks '%s'",
                      st.message().c_str(), c.message_has);
    if (!c.ok)
        ck_assert_msg(st.message().find("plugstack.conf argument") != std::string::npos,
                      "message says where: %s", st.message().c_str());
}
END_TEST

START_TEST(config_values_applied) {
    TestConfig cfg;
    const char *argv[] = {"timeout=2m", "allowed_namespaces=rl, serving", "on_agent_error=fail"};
    auto kvs = parse_kv_args(3, argv, "plugstack.conf");
    ck_assert(kvs.ok());
    ck_assert(schema_for(&cfg).apply(*kvs).ok());
    ck_assert_uint_eq(cfg.timeout, 120);
    ck_assert_int_eq(cfg.namespaces.size(), 2);
    ck_assert_sstr_eq(cfg.namespaces[1], "serving");
    ck_assert_sstr_eq(cfg.on_error, "fail");
}
END_TEST

START_TEST(config_text) {
    const char *text =
        "# agent.conf\n"
        "\n"
        "socket = /run/a.sock\n"
        "timeout=30   # seconds\n"
        "on_agent_error = \"warn\"\n";
    auto kvs = parse_kv_text(text, "agent.conf");
    ck_assert_msg(kvs.ok(), "%s", kvs.ok() ? "" : kvs.message().c_str());
    ck_assert_int_eq(kvs->size(), 3);
    ck_assert_sstr_eq((*kvs)[1].value, "30");
    ck_assert_sstr_eq((*kvs)[1].where, "agent.conf:4");
    TestConfig cfg;
    ck_assert(schema_for(&cfg).apply(*kvs).ok());
    ck_assert_sstr_eq(cfg.socket, "/run/a.sock");

    auto bad = parse_kv_text("socket /run/a.sock\n", "agent.conf");
    ck_assert(!bad.ok());
    ck_assert(bad.message().find("agent.conf:1") != std::string::npos);
    auto unterminated = parse_kv_text("a = \"x\n", "agent.conf");
    ck_assert(!unterminated.ok());
    auto unknown = parse_kv_text("\n\nnope = 1\n", "agent.conf");
    ck_assert(unknown.ok());
    Status st = schema_for(&cfg).apply(*unknown);
    ck_assert(!st.ok());
    ck_assert_msg(st.message().find("agent.conf:3: unknown key 'nope' (known keys: socket,") == 0,
                  "%s", st.message().c_str());
}
END_TEST

// ---- JSON ----
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

// ---- Kubernetes names ----
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

// ---- errors and logging ----
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
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("strings");
    tcase_add_loop_test(tc, uint_table, 0, TABLE_SIZE(kUint));
    tcase_add_loop_test(tc, size_table, 0, TABLE_SIZE(kSize));
    tcase_add_loop_test(tc, seconds_table, 0, TABLE_SIZE(kSeconds));
    tcase_add_loop_test(tc, index_list_table, 0, TABLE_SIZE(kLists));
    tcase_add_test(tc, split_trim_join);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_loop_test(tc, config_args_table, 0, TABLE_SIZE(kArgs));
    tcase_add_test(tc, config_values_applied);
    tcase_add_test(tc, config_text);
    suite_add_tcase(s, tc);
    tc = tcase_create("json");
    tcase_add_loop_test(tc, json_strict_table, 0, TABLE_SIZE(kJson));
    tcase_add_test(tc, json_depth_bounded);
    tcase_add_test(tc, json_typed_getters);
    suite_add_tcase(s, tc);
    tc = tcase_create("k8s_names");
    tcase_add_loop_test(tc, names_table, 0, TABLE_SIZE(kNames));
    tcase_add_loop_test(tc, taint_table, 0, TABLE_SIZE(kTaints));
    tcase_add_test(tc, labels_parse);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors_and_log");
    tcase_add_test(tc, error_names_round_trip);
    tcase_add_test(tc, log_levels_and_sink);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
