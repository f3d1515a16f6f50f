// The plugin's and the agent's sides of the agent socket agree: the one codec
// (common/wire_codec.h) over json-c (the plugin, common/plugin_wire.h) and over
// jsoncpp (the agent, common/daemons/protocol.h). Every message the plugin sends
// or receives crosses both ways, and a table of bad bodies is refused by both
// with the same message.
#include <string>

#include "common/daemons/protocol.h"
#include "common/jsonc.h"
#include "common/plugin_wire.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::proto;

namespace {

// One line without its '\n'.
std::string_view unframed(const std::string &line) {
    ck_assert(!line.empty() && line.back() == '\n');
    return std::string_view(line).substr(0, line.size() - 1);
}

RegisterRequest sample_register() {
    RegisterRequest r;
    r.job_id = 4294967295u;
    r.slurm_node = "gpu-n1.rack_2";
    r.user = "al\u00efce \"q\" \\ \t";
    r.uid = 1001;
    r.gid = 1002;
    r.partition = "gpu";
    r.cluster = "c1";
    r.gpus = {0, 3, 1023};
    r.cpus = 64;
    r.memory_mib = 1ull << 40;
    r.labels = {{"team", "rl"}, {"example.com/tier", "a-b_c.d"}};
    r.taints = {k8s::Taint{"slurm.k8s/job", "42", "NoSchedule"}};
    r.namespaces = {"default", "rl-team"};
    r.end_time = -1;
    return r;
}

// Plugin -> agent: the plugin's encoding of a request, decoded by the agent.
Request agent_reads(const std::string &op, const jsonc::Value &body) {
    BasicRequest<jsonc::Api> req;
    req.id = 77;
    req.op = op;
    req.body = body;
    auto r = decode_request(unframed(PluginCodec::encode(req)));
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert(r->id == 77 && r->op == op);
    return *r;
}

// Agent -> plugin: the agent's encoding of an ok reply, decoded by the plugin.
BasicReply<jsonc::Api> plugin_reads(const Json::Value &body) {
    Reply rep;
    rep.id = 78;
    rep.body = body;
    auto r = PluginCodec::decode_reply(unframed(encode(rep)));
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert(r->id == 78 && r->ok);
    return *r;
}

}  // namespace

START_TEST(register_plugin_to_agent) {
    RegisterRequest in = sample_register();
    Request req = agent_reads("register", PluginCodec::to_json(in));
    auto out = register_from_json(req.body);
    ck_assert_msg(out.ok(), "%s", out.ok() ? "" : out.message().c_str());
    ck_assert(to_json(*out) == to_json(in));
    ck_assert_int_eq(out->end_time, -1);
    ck_assert_sstr_eq(out->user, in.user);
    // And back: the agent's encoding read by the plugin's decoder.
    auto again = PluginCodec::register_from_json(plugin_reads(to_json(in)).body);
    ck_assert(again.ok());
    ck_assert(to_json(*again) == to_json(in));
}
END_TEST

START_TEST(register_reply_agent_to_plugin) {
    auto r = PluginCodec::register_reply_from_json(
        plugin_reads(to_json(RegisterReply{"slurm-gpu-n1-42", {}, false})).body);
    ck_assert(r.ok());
    ck_assert_sstr_eq(r->node_name, "slurm-gpu-n1-42");
    ck_assert(!r->has_namespaces);  // an agent that does not say
    RegisterReply none{"slurm-n1-42", {}, true};
    auto n = PluginCodec::register_reply_from_json(plugin_reads(to_json(none)).body);
    ck_assert(n.ok() && n->has_namespaces && n->namespaces.empty());  // the site allows none
    RegisterReply some{"slurm-n1-42", {"rl", "serving"}, true};
    auto s = PluginCodec::register_reply_from_json(plugin_reads(to_json(some)).body);
    ck_assert(s.ok() && s->has_namespaces && s->namespaces == some.namespaces);
}
END_TEST

START_TEST(deregister_both_ways) {
    DeregisterRequest d{9, "n1", 3600, "TimeLimit"};
    auto out = deregister_from_json(agent_reads("deregister", PluginCodec::to_json(d)).body);
    ck_assert(out.ok());
    ck_assert(to_json(*out) == to_json(d));
    auto rep = PluginCodec::deregister_reply_from_json(
        plugin_reads(to_json(DeregisterReply{4294967295u})).body);
    ck_assert(rep.ok());
    ck_assert_uint_eq(rep->pods_stopped, 4294967295u);
}
END_TEST

START_TEST(status_both_ways) {
    JobKey k{12, "n-3"};
    auto key = job_key_from_json(agent_reads("status", PluginCodec::to_json(k)).body, "status");
    ck_assert(key.ok());
    ck_assert(to_json(*key) == to_json(k));
    NodeState st{12, "n-3", "slurm-n-3-12", "bob", "ready", true, {1, 2}, 7, ""};
    auto got = PluginCodec::node_state_from_json(plugin_reads(to_json(st)).body);
    ck_assert(got.ok());
    ck_assert(to_json(*got) == to_json(st));
    ck_assert(got->ready);
    ck_assert(got->identity.empty());
    st.identity = "system:node:slurm-n-3-12, certificate until 2026-12-05T10:00:00Z";
    got = PluginCodec::node_state_from_json(plugin_reads(to_json(st)).body);
    ck_assert(got.ok());
    ck_assert_sstr_eq(got->identity, st.identity);
    ck_assert(to_json(*got) == to_json(st));
}
END_TEST

START_TEST(error_reply_agent_to_plugin) {
    Reply rep = error_reply(5, fail(Error::Forbidden, "peer uid 1000 may not register"));
    auto r = PluginCodec::decode_reply(unframed(encode(rep)));
    ck_assert(r.ok());
    ck_assert(!r->ok && r->id == 5);
    ck_assert(r->error == Error::Forbidden);
    ck_assert_sstr_eq(r->message, "peer uid 1000 may not register");
}
END_TEST

// Bodies both decoders refuse, with the same message.
struct BadBody {
    const char *op;  // which decoder
    const char *json;
};
const BadBody kBad[] = {
    {"register", "{}"},
    {"register", R"({"job_id":-1,"slurm_node":"n1","user":"u","uid":1})"},
    {"register", R"({"job_id":4294967296,"slurm_node":"n1","user":"u","uid":1})"},
    {"register", R"({"job_id":1.5,"slurm_node":"n1","user":"u","uid":1})"},
    {"register", R"({"job_id":1,"slurm_node":"n 1","user":"u","uid":1})"},
    {"register", R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"gpus":[1024]})"},
    {"register", R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"gpus":"0"})"},
    {"register", R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"labels":{"a":1}})"},
    {"register", R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"namespaces":["A"]})"},
    {"register", R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"taints":["x"]})"},
    {"register", R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"end_time":"0"})"},
    {"deregister", R"({"job_id":1,"slurm_node":"n1","grace_s":3601})"},
    {"register reply", R"({"node_name":7})"},
    {"node state", R"({"job_id":1,"slurm_node":"n1","ready":"yes"})"},
};

START_TEST(bad_bodies_refused_alike) {
    const BadBody &c = kBad[_i];
    auto a = json::parse(c.json);
    auto p = jsonc::parse(c.json);
    ck_assert(a.ok() && p.ok());
    std::string op = c.op;
    Failure fa{Error::Internal, {}}, fp{Error::Internal, {}};
    bool aok = true, pok = true;
    auto note = [](auto r, bool *ok, Failure *f) {
        *ok = r.ok();
        if (!r) *f = r.failure();
    };
    if (op == "register") {
        note(register_from_json(*a), &aok, &fa);
        note(PluginCodec::register_from_json(*p), &pok, &fp);
    } else if (op == "deregister") {
        note(deregister_from_json(*a), &aok, &fa);
        note(PluginCodec::deregister_from_json(*p), &pok, &fp);
    } else if (op == "register reply") {
        note(register_reply_from_json(*a), &aok, &fa);
        note(PluginCodec::register_reply_from_json(*p), &pok, &fp);
    } else {
        note(node_state_from_json(*a), &aok, &fa);
        note(PluginCodec::node_state_from_json(*p), &pok, &fp);
    }
    ck_assert_msg(!aok && !pok, "case %d: accepted", _i);
    ck_assert(fa.code == fp.code);
    ck_assert_sstr_eq(fa.message, fp.message);
}
END_TEST

// Texts both parsers refuse (the plugin's parser is as strict as the agent's,
// repeated keys aside: common/jsonc.h).
const char *const kBadText[] = {
    "",        "{",     "[1,]", "{\"a\":1,}", "{\"a\":1} x",     "// c\n{}",
    "{'a':1}", "\"s\"", "1",    "nul",        "{\"a\":\"\\x\"}",
};

START_TEST(bad_text_refused_alike) {
    ck_assert_msg(!json::parse(kBadText[_i]).ok(), "jsoncpp accepted case %d", _i);
    ck_assert_msg(!jsonc::parse(kBadText[_i]).ok(), "json-c accepted case %d", _i);
}
END_TEST

START_TEST(plugin_parser_bounds) {
    std::string deep(jsonc::kMaxDepth + 1, '[');
    deep += std::string(jsonc::kMaxDepth + 1, ']');
    ck_assert(!jsonc::parse(deep).ok());
    ck_assert(jsonc::parse("{\"a\":[1]} \r\n").ok());
    ck_assert(!jsonc::parse(std::string("{\"a\":\"\xff\"}")).ok());  // not UTF-8
}
END_TEST

int main() {
    Suite *s = suite_create("wire");
    TCase *tc = tcase_create("plugin and agent agree");
    tcase_add_test(tc, register_plugin_to_agent);
    tcase_add_test(tc, register_reply_agent_to_plugin);
    tcase_add_test(tc, deregister_both_ways);
    tcase_add_test(tc, status_both_ways);
    tcase_add_test(tc, error_reply_agent_to_plugin);
    tcase_add_loop_test(tc, bad_bodies_refused_alike, 0, TABLE_SIZE(kBad));
    tcase_add_loop_test(tc, bad_text_refused_alike, 0, TABLE_SIZE(kBadText));
    tcase_add_test(tc, plugin_parser_bounds);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
