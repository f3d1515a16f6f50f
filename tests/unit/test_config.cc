// common/config: key=value arguments and files through a typed schema.
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/unit/check_main.h"

using namespace sk;

struct TestConfig {
    std::string socket = "/run/slurm-k8s/agent.sock";
    uint64_t timeout = 5;
    bool verbose = false;
    std::string on_error = "warn";
    std::vector<std::string> namespaces;
    uint64_t max_gpus = 8;
    int nice = -5;
};

static ConfigSchema schema_for(TestConfig *c) {
    ConfigSchema s;
    s.add_path("socket", &c->socket, "agent socket");
    s.add_seconds("timeout", &c->timeout, 1, 600, "socket timeout");
    s.add_bool("verbose", &c->verbose, "more logs");
    s.add_enum("on_agent_error", &c->on_error, {"fail", "warn"}, "policy");
    s.add_list("allowed_namespaces", &c->namespaces, "namespaces");
    s.add_uint("max_gpus_per_node", &c->max_gpus, 0, 64, "limit");
    s.add_nice("nice", &c->nice, "CPU nice value");
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
    {{"nice=-20"}, true, ""},
    {{"nice=19"}, true, ""},
    {{"nice=0"}, true, ""},
    {{"nice=20"}, false, "is not a nice value (allowed -20..19)"},
    {{"nice=-21"}, false, "is not a nice value"},
    {{"nice=--5"}, false, "is not a nice value"},
    {{"nice=high"}, false, "is not a nice value"},
    {{"nice="}, false, "is not a nice value"},
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
    const char *argv[] = {"timeout=2m", "allowed_namespaces=rl, serving", "on_agent_error=fail",
                          "nice=-12"};
    auto kvs = parse_kv_args(4, argv, "plugstack.conf");
    ck_assert(kvs.ok());
    ck_assert(schema_for(&cfg).apply(*kvs).ok());
    ck_assert_uint_eq(cfg.timeout, 120);
    ck_assert_int_eq(cfg.namespaces.size(), 2);
    ck_assert_sstr_eq(cfg.namespaces[1], "serving");
    ck_assert_sstr_eq(cfg.on_error, "fail");
    ck_assert_int_eq(cfg.nice, -12);
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

int main() {
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_loop_test(tc, config_args_table, 0, TABLE_SIZE(kArgs));
    tcase_add_test(tc, config_values_applied);
    tcase_add_test(tc, config_text);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
