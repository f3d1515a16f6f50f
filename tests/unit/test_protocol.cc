// The agent socket protocol: envelopes, typed bodies, framing. Negative cases
// first-class: the agent parses bytes from any local process.
#include <string>

#include "common/daemons/json.h"
#include "common/daemons/protocol.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::proto;

static RegisterRequest sample_register() {
    RegisterRequest r;
    r.job_id = 42;
    r.slurm_node = "n1";
    r.user = "k8suser";
    r.uid = 2001;
    r.gid = 2001;
    r.partition = "gpu";
    r.cluster = "local";
    r.gpus = {2, 3};
    r.cpus = 4;
    r.memory_mib = 16384;
    r.labels = {{"team", "rl"}};
    r.taints = {{"slurm-k8s/job-id", "42", "NoSchedule"}};
    r.namespaces = {"rl"};
    r.end_time = 1767225600;
    r.drain_before_s = 300;
    r.gpu_type = "a100";
    r.array_job_id = 40;
    r.array_task_id = 0;
    r.het_job_id = 41;
    r.het_offset = 2;
    return r;
}

START_TEST(register_round_trip) {
    Request req;
    req.id = 7;
    req.op = "register";
    req.body = to_json(sample_register());
    std::string line = encode(req);
    ck_assert(line.back() == '\n');
    ck_assert(line.find('\n') == line.size() - 1);
    auto back = decode_request(line.substr(0, line.size() - 1));
    ck_assert(back.ok());
    ck_assert_uint_eq(back->id, 7);
    ck_assert_sstr_eq(back->op, "register");
    auto r = register_from_json(back->body);
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    RegisterRequest want = sample_register();
    ck_assert_uint_eq(r->job_id, want.job_id);
    ck_assert_sstr_eq(r->slurm_node, "n1");
    ck_assert_int_eq(r->gpus.size(), 2);
    ck_assert_int_eq(r->gpus[1], 3);
    ck_assert_uint_eq(r->memory_mib, 16384);
    ck_assert_sstr_eq(r->labels.at("team"), "rl");
    ck_assert(r->taints[0] == want.taints[0]);
    ck_assert_int_eq(r->end_time, want.end_time);
    ck_assert_int_eq(r->drain_before_s, 300);
    ck_assert_sstr_eq(r->gpu_type, "a100");
    ck_assert_uint_eq(r->array_job_id, 40);
    ck_assert_uint_eq(r->array_task_id, 0);
    ck_assert_uint_eq(r->het_job_id, 41);
    ck_assert_uint_eq(r->het_offset, 2);
    // Absent: the agent's default (-1), and not written when unset.
    RegisterRequest plain = sample_register();
    plain.drain_before_s = -1;
    ck_assert(!to_json(plain).isMember("drain_before_s"));
    plain.array_job_id = plain.het_job_id = 0;
    ck_assert(!to_json(plain).isMember("array_task_id"));
    ck_assert(!to_json(plain).isMember("het_offset"));
    ck_assert_int_eq(register_from_json(to_json(plain))->drain_before_s, -1);
}
END_TEST

struct BadRequest {
    const char *line;
    Error code;
    const char *message_has;
};
static const BadRequest kBadRequests[] = {
    {"", Error::Parse, "invalid JSON"},
    {"not json", Error::Parse, "invalid JSON"},
    {"[1,2]", Error::Parse, "not a JSON object"},
    {"{\"op\":\"status\"}", Error::Parse, "missing 'id'"},
    {"{\"id\":1}", Error::Parse, "missing 'op'"},
    {"{\"id\":-1,\"op\":\"x\"}", Error::Parse, "'id'"},
    {"{\"id\":1,\"op\":5}", Error::Parse, "'op' must be a string"},
    {"{\"id\":1,\"op\":\"\"}", Error::Parse, "'op' is empty"},
    {"{\"id\":1,\"op\":\"x\",\"body\":[]}", Error::Parse, "'body' must be an object"},
    {"{\"v\":2,\"id\":1,\"op\":\"x\"}", Error::InvalidArgument, "protocol version 2"},
    {"{\"id\":1,\"op\":\"x\"} trailing", Error::Parse, "invalid JSON"},
};
START_TEST(bad_requests_table) {
    const auto &c = kBadRequests[_i];
    auto r = decode_request(c.line);
    ck_assert_msg(!r.ok(), "'%s' accepted", c.line);
    ck_assert_msg(r.error() == c.code, "'%s': %s", c.line, r.failure().describe().c_str());
    ck_assert_msg(r.message().find(c.message_has) != std::string::npos, "'%s': %s", c.line,
                  r.message().c_str());
}
END_TEST

struct BadRegister {
    const char *body;
    const char *message_has;
};
static const BadRegister kBadRegister[] = {
    {R"({})", "missing 'job_id'"},
    {R"({"job_id":1,"user":"u","uid":1})", "missing 'slurm_node'"},
    {R"({"job_id":1,"slurm_node":"n1","uid":1})", "missing 'user'"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u"})", "missing 'uid'"},
    {R"({"job_id":4294967296,"slurm_node":"n1","user":"u","uid":1})", "'job_id' is larger"},
    {R"({"job_id":1,"slurm_node":"n 1","user":"u","uid":1})", "invalid characters"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"gpus":[-1]})", "'gpus'"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"gpus":"0,1"})", "'gpus'"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"labels":{"bad key":"x"}})", "label"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"taints":["x:Never"]})", "effect"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"namespaces":["Bad_NS"]})", "namespace"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"drain_before_s":86401})",
     "'drain_before_s' must be 0-86400"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"array_job_id":-1})", "'array_job_id'"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"het_offset":"1"})", "'het_offset'"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"gpu_type":"a 100"})",
     "'gpu_type' 'a 100' is not a label value"},
    {R"({"job_id":1,"slurm_node":"n1","user":"u","uid":1,"drain_before_s":-2})",
     "'drain_before_s' must be 0-86400"},
};
START_TEST(bad_register_table) {
    const auto &c = kBadRegister[_i];
    auto v = json::parse(c.body);
    ck_assert(v.ok());
    auto r = register_from_json(*v);
    ck_assert_msg(!r.ok(), "'%s' accepted", c.body);
    ck_assert_msg(r.message().find(c.message_has) != std::string::npos, "'%s': %s", c.body,
                  r.message().c_str());
}
END_TEST

START_TEST(replies) {
    Reply ok;
    ok.id = 3;
    ok.body = to_json(RegisterReply{"slurm-n1-42", {}, false});
    auto back = decode_reply(encode(ok));
    ck_assert(back.ok() && back->ok);
    ck_assert_uint_eq(back->id, 3);
    ck_assert_sstr_eq(register_reply_from_json(back->body)->node_name, "slurm-n1-42");

    Reply err = error_reply(4, sk::fail(Error::Forbidden, "uid 2002 may not register nodes"));
    back = decode_reply(encode(err));
    ck_assert(back.ok());
    ck_assert(!back->ok);
    ck_assert(back->error == Error::Forbidden);
    ck_assert_sstr_eq(back->message, "uid 2002 may not register nodes");

    ck_assert(!decode_reply("{\"id\":1}").ok());
    ck_assert(!decode_reply("{\"id\":1,\"ok\":false}").ok());
    auto unknown = decode_reply("{\"id\":1,\"ok\":false,\"error\":\"martian\",\"message\":\"m\"}");
    ck_assert(unknown.ok() && unknown->error == Error::Internal);
}
END_TEST

START_TEST(other_bodies_round_trip) {
    DeregisterRequest d{42, "n2", 20, "JobCancelled"};
    auto d2 = deregister_from_json(to_json(d));
    ck_assert(d2.ok());
    ck_assert_uint_eq(d2->grace_s, 20);
    ck_assert_sstr_eq(d2->reason, "JobCancelled");
    ck_assert(
        !deregister_from_json(*json::parse(R"({"job_id":1,"slurm_node":"n1","grace_s":99999})"))
             .ok());

    NodeState s;
    s.job_id = 9;
    s.slurm_node = "n3";
    s.node_name = "slurm-n3-9";
    s.phase = "ready";
    s.ready = true;
    s.gpus = {0};
    s.pods = 2;
    auto s2 = node_state_from_json(to_json(s));
    ck_assert(s2.ok() && s2->ready && s2->pods == 2 && s2->node_name == "slurm-n3-9");

    AttachReply a;
    a.node_name = "slurm-n1-42";
    a.gpus = {2, 3};
    a.state_dir = "/var/lib/slurm-k8s/shim/42";
    auto a2 = attach_reply_from_json(to_json(a));
    ck_assert(a2.ok() && a2->gpus.size() == 2 && a2->state_dir == a.state_dir);
    ck_assert(!a2->pod_cgroups);         // absent: the shim asks nothing (an older agent)
    ck_assert(a2->image_store.empty());  // absent: no node image store
    a.pod_cgroups = true;
    ck_assert(attach_reply_from_json(to_json(a))->pod_cgroups);
    a.image_store = "/var/lib/slurm-k8s/images/view";
    a.image_store_mount_program = "/usr/bin/fuse-overlayfs";
    auto a3 = attach_reply_from_json(to_json(a));
    ck_assert(a3.ok());
    ck_assert_sstr_eq(a3->image_store, a.image_store);
    ck_assert_sstr_eq(a3->image_store_mount_program, a.image_store_mount_program);
    a.image_store_mount_program = "fuse-overlayfs";  // relative: refused
    ck_assert(!attach_reply_from_json(to_json(a)).ok());
    auto ce = cgroup_enter_from_json(to_json(CgroupEnter{"u-1", {2, 3}, "main"}));
    ck_assert(ce.ok() && ce->pod_uid == "u-1" && ce->gpus.size() == 2 && ce->gpus[1] == 3);
    ck_assert_sstr_eq(ce->container, "main");
    ck_assert(cgroup_enter_from_json(*json::parse("{\"pod_uid\":\"u\",\"container\":\"c\"}"))
                  ->gpus.empty());
    ck_assert(!cgroup_enter_from_json(*json::parse("{\"gpus\":[1],\"container\":\"c\"}")).ok());
    ck_assert(!cgroup_enter_from_json(
                   *json::parse("{\"pod_uid\":\"u\",\"gpus\":[-1],\"container\":\"c\"}"))
                   .ok());
    // The container names its directory: a DNS label, nothing else.
    for (const char *bad : {"{\"pod_uid\":\"u\"}", "{\"pod_uid\":\"u\",\"container\":\"\"}",
                            "{\"pod_uid\":\"u\",\"container\":\"../x\"}",
                            "{\"pod_uid\":\"u\",\"container\":\"memory.max\"}"})
        ck_assert_msg(!cgroup_enter_from_json(*json::parse(bad)).ok(), "%s", bad);
    ck_assert(attach_from_json(to_json(AttachRequest{5, "n1"})).ok());
    ck_assert(!attach_from_json(*json::parse("{\"job_id\":5}")).ok());
}
END_TEST

// ---- framing ----
START_TEST(linebuffer_split_chunks) {
    LineBuffer lb(64);
    const char *stream = "{\"a\":1}\n{\"b\":2}\r\n{\"c\"";
    for (const char *p = stream; *p; p++)
        ck_assert(lb.feed(p, 1).ok());  // byte by byte
    auto l1 = lb.next(), l2 = lb.next(), l3 = lb.next();
    ck_assert(l1 && *l1 == "{\"a\":1}");
    ck_assert(l2 && *l2 == "{\"b\":2}");
    ck_assert(!l3);
    ck_assert(lb.feed(":3}\n", 4).ok());
    auto l4 = lb.next();
    ck_assert(l4 && *l4 == "{\"c\":3}");
    ck_assert_uint_eq(lb.buffered(), 0);
}
END_TEST

START_TEST(linebuffer_oversize) {
    LineBuffer lb(16);
    std::string big(17, 'x');
    ck_assert(lb.feed(big.data(), big.size()).error() == Error::TooLarge);
    LineBuffer lb2(16);
    std::string two = "short\n" + std::string(20, 'y') + "\n";  // second complete line too long
    ck_assert(lb2.feed(two.data(), two.size()).error() == Error::TooLarge);
    LineBuffer lb3(16);
    std::string ok = std::string(16, 'z') + "\n";
    ck_assert(lb3.feed(ok.data(), ok.size()).ok());
}
END_TEST

// A line over the bound is dropped whole, once reported, without buffering
// it; the lines around it still come out (the attached shim's link carries
// on past an oversized message instead of reconnecting, docs/protocol.md).
START_TEST(linebuffer_drops_oversize_line_and_carries_on) {
    LineBuffer lb(16);
    std::string a = "first\n" + std::string(20, 'x');
    ck_assert(lb.feed(a.data(), a.size()).error() == Error::TooLarge);
    ck_assert_uint_eq(lb.buffered(), 6);  // "first\n": the dropped bytes are not kept
    std::string more(1000, 'x');          // the rest of the long line: discarded, reported once
    ck_assert(lb.feed(more.data(), more.size()).ok());
    ck_assert(lb.feed("xx\nsecond\n", 10).ok());
    auto l1 = lb.next(), l2 = lb.next(), l3 = lb.next();
    ck_assert(l1 && *l1 == "first");
    ck_assert(l2 && *l2 == "second");
    ck_assert(!l3);
    // Two long lines in one chunk: one failure, both dropped, the short one kept.
    std::string two = std::string(17, 'a') + "\nok\n" + std::string(30, 'b') + "\n";
    ck_assert(lb.feed(two.data(), two.size()).error() == Error::TooLarge);
    auto l4 = lb.next();
    ck_assert(l4 && *l4 == "ok");
    ck_assert(!lb.next());
    ck_assert_uint_eq(lb.buffered(), 0);
    // A raised bound applies to the line being received.
    LineBuffer lb2(16);
    std::string part(16, 'c');
    ck_assert(lb2.feed(part.data(), part.size()).ok());
    lb2.set_max(64);
    ck_assert(lb2.feed(part.data(), part.size()).ok());
    ck_assert(lb2.feed("\n", 1).ok());
    auto l5 = lb2.next();
    ck_assert(l5 && l5->size() == 32);
}
END_TEST

START_TEST(oversize_message_refused) {
    std::string big =
        "{\"id\":1,\"op\":\"x\",\"body\":{\"pad\":\"" + std::string(kMaxMessageBytes, 'a') + "\"}}";
    auto r = decode_request(big);
    ck_assert(!r.ok());
    ck_assert(r.error() == Error::TooLarge);
}
END_TEST

int main() {
    Suite *s = suite_create("protocol");
    TCase *tc = tcase_create("messages");
    tcase_add_test(tc, register_round_trip);
    tcase_add_loop_test(tc, bad_requests_table, 0, TABLE_SIZE(kBadRequests));
    tcase_add_loop_test(tc, bad_register_table, 0, TABLE_SIZE(kBadRegister));
    tcase_add_test(tc, replies);
    tcase_add_test(tc, other_bodies_round_trip);
    suite_add_tcase(s, tc);
    tc = tcase_create("framing");
    tcase_add_test(tc, linebuffer_split_chunks);
    tcase_add_test(tc, linebuffer_oversize);
    tcase_add_test(tc, linebuffer_drops_oversize_line_and_carries_on);
    tcase_add_test(tc, oversize_message_refused);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
