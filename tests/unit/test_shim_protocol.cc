// The agent <-> shim protocol (common/daemons/shim_protocol.h) and base64
// (common/daemons/base64.h): every message through the envelope and back, every
// malformed field refused with a message naming it, every enum's unknown
// value refused.
#include <string>

#include "common/daemons/base64.h"
#include "common/daemons/json.h"
#include "common/daemons/protocol.h"
#include "common/daemons/shim_protocol.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::proto;

static Json::Value J(const std::string &text) {
    auto v = json::parse(text);
    ck_assert_msg(v.ok(), "test JSON: %s", v.ok() ? "" : v.message().c_str());
    return *v;
}

// The body after encode() into a request line and decode_request() back.
static Json::Value through_wire(ShimOp op, const Json::Value &body) {
    Request r;
    r.id = 9;
    r.op = std::string(to_string(op));
    r.body = body;
    std::string line = encode(r);
    ck_assert(line.find('\n') == line.size() - 1);
    auto back = decode_request(line.substr(0, line.size() - 1));
    ck_assert(back.ok());
    ck_assert_sstr_eq(back->op, std::string(to_string(op)));
    return back->body;
}

static const char kPod[] = R"({"apiVersion":"v1","kind":"Pod",
    "metadata":{"name":"gen-0","namespace":"rl","uid":"0b9e6c3a-1111-2222-3333-444455556666"},
    "spec":{"containers":[{"name":"gen","image":"busybox","command":["sleep","1"]}]}})";

START_TEST(pod_run_round_trip) {
    PodRun m;
    m.pod = J(kPod);
    m.files["cfg"]["app.conf"] = "key=value\n";
    m.files["cfg"]["bin"] = std::string("\0\xff\x01", 3);
    m.files["empty"];
    Json::Value body = to_json(m);
    // The wire shape: {"pod": Pod, "files": {volume: {path: base64}}}.
    ck_assert_sstr_eq(body["files"]["cfg"]["app.conf"].asString(), "a2V5PXZhbHVlCg==");
    ck_assert(body["files"]["empty"].isObject() && body["files"]["empty"].empty());
    ck_assert(body["pod"] == m.pod);
    auto back = pod_run_from_json(through_wire(ShimOp::PodRun, body));
    ck_assert_msg(back.ok(), "%s", back.ok() ? "" : back.message().c_str());
    ck_assert_sstr_eq(back->uid, "0b9e6c3a-1111-2222-3333-444455556666");
    ck_assert_sstr_eq(back->ns, "rl");
    ck_assert_sstr_eq(back->name, "gen-0");
    ck_assert(back->files == m.files);
    ck_assert(back->pod == m.pod);
    ck_assert(to_json(*back) == body);
    // "files" may be left out.
    Json::Value no_files(Json::objectValue);
    no_files["pod"] = m.pod;
    auto bare = pod_run_from_json(no_files);
    ck_assert(bare.ok() && bare->files.empty() && bare->pull_auth.empty());
    ck_assert(!to_json(*bare).isMember("pull_auth"));
    // The pull credentials travel as they are; a wrong type or an oversized
    // document is refused.
    m.pull_auth = R"({"auths":{"reg:5000":{"auth":"dTpw"}}})";
    auto auth = pod_run_from_json(through_wire(ShimOp::PodRun, to_json(m)));
    ck_assert(auth.ok() && auth->pull_auth == m.pull_auth);
    for (const Json::Value &bad :
         {Json::Value(3), Json::Value(std::string(kMaxPullAuthBytes + 1, 'x'))}) {
        Json::Value b = to_json(m);
        b["pull_auth"] = bad;
        auto r = pod_run_from_json(b);
        ck_assert(!r.ok() && r.message().find("'pull_auth' must be a string") != std::string::npos);
    }
    // The node paths the agent allowed travel as they are; a relative path,
    // a missing root or a wrong type is refused.
    m.host_volumes = {{"models", {"/shared/m", "/shared", "Directory", true}},
                      {"data", {"/shared/d", "/", "", false}}};
    auto host = pod_run_from_json(through_wire(ShimOp::PodRun, to_json(m)));
    ck_assert(host.ok() && host->host_volumes == m.host_volumes);
    ck_assert(bare->host_volumes.empty() && !to_json(*bare).isMember("host_volumes"));
    for (const char *bad : {R"({"v":{"path":"rel","root":"/"}})", R"({"v":{"path":"/a"}})",
                            R"({"v":{"path":"/a","root":"/","read_only":"yes"}})",
                            R"({"v":{"path":"/a","root":"/","type":3}})", R"(["v"])"}) {
        Json::Value b = to_json(m);
        b["host_volumes"] = J(bad);
        auto r = pod_run_from_json(b);
        ck_assert_msg(!r.ok() && r.message().find("host_volumes") != std::string::npos,
                      "accepted %s", bad);
    }
}
END_TEST

// The agent's side makes its PodRun with make_pod_run: what the shim would
// refuse (no uid, too many volumes or files, oversized credentials) fails
// there, with the message the shim's decoding gives; a good one is the run
// the shim decodes from its message.
START_TEST(pod_run_made_as_the_shim_checks) {
    PodFiles files;
    files["cfg"]["app.conf"] = "key=value\n";
    auto ok = make_pod_run(J(kPod), files, "");
    ck_assert_msg(ok.ok(), "%s", ok.ok() ? "" : ok.message().c_str());
    ck_assert_sstr_eq(ok->uid, "0b9e6c3a-1111-2222-3333-444455556666");
    ck_assert_sstr_eq(ok->ns, "rl");
    ck_assert_sstr_eq(ok->name, "gen-0");
    auto back = pod_run_from_json(to_json(*ok));
    ck_assert(back.ok() && back->files == ok->files && back->pod == ok->pod);

    Json::Value no_uid = J(kPod);
    no_uid["metadata"].removeMember("uid");
    auto r = make_pod_run(no_uid, files, "");
    ck_assert(!r.ok() && r.error() == Error::Invalid);
    ck_assert_str_eq(r.message().c_str(), "pod_run: pod has no valid metadata.uid");

    PodFiles many;
    for (size_t i = 0; i <= kMaxVolumes; i++)
        many["v" + std::to_string(i)]["f"] = "x";
    r = make_pod_run(J(kPod), many, "");
    ck_assert(!r.ok() && r.error() == Error::Invalid);
    PodRun wire;
    wire.pod = J(kPod);
    wire.files = many;
    auto decoded = pod_run_from_json(to_json(wire));
    ck_assert(!decoded.ok());
    ck_assert_str_eq(r.message().c_str(), decoded.message().c_str());
    ck_assert_msg(r.message().find("more than 256 volumes") != std::string::npos, "%s",
                  r.message().c_str());

    PodFiles crowded;
    for (size_t i = 0; i <= kMaxFilesPerVolume; i++)
        crowded["v"]["f" + std::to_string(i)] = "";
    r = make_pod_run(J(kPod), crowded, "");
    ck_assert(!r.ok() && r.message().find("more than 4096 files") != std::string::npos);

    r = make_pod_run(J(kPod), files, std::string(kMaxPullAuthBytes + 1, 'x'));
    ck_assert(!r.ok() && r.message().find("'pull_auth' must be a string") != std::string::npos);
}
END_TEST

START_TEST(pod_kill_round_trip) {
    for (StopReason r : {StopReason::Killing, StopReason::Deleted, StopReason::Orphaned,
                         StopReason::JobEnded, StopReason::JobCancelled, StopReason::TimeLimit,
                         StopReason::NodeFail, StopReason::Shutdown}) {
        PodKill m{"u1", 7, r};
        Json::Value body = to_json(m);
        ck_assert_sstr_eq(body["reason"].asString(), std::string(to_string(r)));
        auto back = pod_kill_from_json(through_wire(ShimOp::PodKill, body));
        ck_assert(back.ok());
        ck_assert_sstr_eq(back->uid, "u1");
        ck_assert_uint_eq(back->grace_s, 7);
        ck_assert(back->reason == r);
    }
    auto dflt = pod_kill_from_json(J(R"({"uid":"u1"})"));
    ck_assert(dflt.ok() && dflt->grace_s == 30 && dflt->reason == StopReason::Killing);
}
END_TEST

START_TEST(pod_sandbox_round_trip) {
    PodSandbox m{"u1", "web-0", {"registry.site/vllm:1", "busybox"}};
    auto back = pod_sandbox_from_json(through_wire(ShimOp::PodSandbox, to_json(m)));
    ck_assert(back.ok());
    ck_assert_sstr_eq(back->uid, "u1");
    ck_assert_sstr_eq(back->hostname, "web-0");
    ck_assert(back->images == m.images);
    ck_assert(pod_sandbox_from_json(J(R"({"uid":"u1","hostname":"a"})")).ok());
    ck_assert(!pod_sandbox_from_json(J(R"({"uid":"u1","hostname":"a","images":[7]})")).ok());
    for (const char *bad :
         {R"({"uid":"u1"})", R"({"uid":"../x","hostname":"a"})", R"({"uid":"u1","hostname":""})",
          R"({"uid":"u1","hostname":"A_b"})", R"({"uid":"u1","hostname":"a b"})"})
        ck_assert_msg(!pod_sandbox_from_json(J(bad)).ok(), "accepted %s", bad);
    std::string long_name(64, 'a');
    ck_assert(!pod_sandbox_from_json(J(R"({"uid":"u1","hostname":")" + long_name + R"("})")).ok());
    auto reply = pod_sandbox_reply_from_json(to_json(PodSandboxReply{4242, ""}));
    ck_assert(reply.ok() && reply->pid == 4242 && reply->node_network.empty());
    // No sandbox, and why: the pod stays on the node's network.
    reply = pod_sandbox_reply_from_json(to_json(PodSandboxReply{0, "podman"}));
    ck_assert(reply.ok() && reply->pid == 0 && reply->node_network == "podman");
    for (const char *bad :
         {R"({})", R"({"pid":1})", R"({"pid":-3})", R"({"pid":"7"})", R"({"pid":99999999})"})
        ck_assert_msg(!pod_sandbox_reply_from_json(J(bad)).ok(), "accepted %s", bad);
    // pod_run's network: both paths, absolute, or neither.
    PodRun run;
    run.pod = J(kPod);
    run.net_ns = "/run/slurm-k8s/net/pods/u1/net";
    run.uts_ns = "/run/slurm-k8s/net/pods/u1/uts";
    Json::Value body = to_json(run);
    ck_assert_sstr_eq(body["network"]["net"].asString(), run.net_ns.c_str());
    auto r = pod_run_from_json(through_wire(ShimOp::PodRun, body));
    ck_assert(r.ok() && r->net_ns == run.net_ns && r->uts_ns == run.uts_ns);
    PodRun plain;
    plain.pod = J(kPod);
    ck_assert(!to_json(plain).isMember("network"));
    for (const char *bad : {R"({"net":"/a"})", R"({"net":"a","uts":"/b"})", R"([])"}) {
        Json::Value b = body;
        b["network"] = J(bad);
        ck_assert_msg(!pod_run_from_json(b).ok(), "accepted network %s", bad);
    }
}
END_TEST

START_TEST(pods_pause_round_trip) {
    PodsPause m{true, "Slurm job 42 is suspended"};
    auto back = pods_pause_from_json(through_wire(ShimOp::PodsPause, to_json(m)));
    ck_assert(back.ok() && back->pause && back->message == m.message);
    auto resume = pods_pause_from_json(J(R"({"pause":false})"));
    ck_assert(resume.ok() && !resume->pause && resume->message.empty());
    // A message past its bound is cut, not refused.
    m.message.assign(kMaxEventMessageBytes + 10, 'x');
    back = pods_pause_from_json(to_json(m));
    ck_assert(back.ok() && back->message.size() == kMaxEventMessageBytes);
}
END_TEST

START_TEST(pod_files_round_trip) {
    PodFilesUpdate m;
    m.uid = "u1";
    m.files["kube-api-access-x"]["token"] = std::string("tok\0en", 6);
    auto back = pod_files_update_from_json(through_wire(ShimOp::PodFiles, to_json(m)));
    ck_assert(back.ok());
    ck_assert_sstr_eq(back->uid, "u1");
    ck_assert(back->files == m.files);
}
END_TEST

START_TEST(shutdown_and_list_round_trip) {
    Shutdown s{3, StopReason::JobEnded};
    auto back = shutdown_from_json(through_wire(ShimOp::Shutdown, to_json(s)));
    ck_assert(back.ok() && back->grace_s == 3 && back->reason == StopReason::JobEnded);
    auto dflt = shutdown_from_json(J("{}"));
    ck_assert(dflt.ok() && dflt->grace_s == 30 && dflt->reason == StopReason::Shutdown);

    ck_assert(pod_list_request_from_json(through_wire(ShimOp::PodList, to_json(PodList{}))).ok());

    PodListReply list;
    PodStatus a;
    a.uid = "u1";
    a.ns = "rl";
    a.name = "gen-0";
    a.status = J(R"({"phase":"Running"})");
    list.pods.push_back(a);
    a.uid = "u2";
    a.status = J(R"({"phase":"Failed","reason":"ShimRestarted"})");
    list.pods.push_back(a);
    Json::Value body = to_json(list);
    ck_assert(!body["pods"][0].isMember("events"));  // pod_list entries carry no events
    Reply reply;
    reply.id = 4;
    reply.body = body;
    auto rep = decode_reply(encode(reply));
    ck_assert(rep.ok());
    auto l = pod_list_reply_from_json(rep->body);
    ck_assert(l.ok());
    ck_assert_int_eq(l->pods.size(), 2);
    ck_assert_sstr_eq(l->pods[1].uid, "u2");
    ck_assert_sstr_eq(l->pods[1].status["reason"].asString(), "ShimRestarted");
    ck_assert(!l->pods[0].events);
    ck_assert(to_json(*l) == body);
}
END_TEST

START_TEST(pod_status_round_trip) {
    PodStatus m;
    m.uid = "u1";
    m.ns = "rl";
    m.name = "gen-0";
    m.status = J(R"({"phase":"Running","conditions":[{"type":"Ready","status":"True"}]})");
    m.events.emplace();
    m.events->push_back({EventType::Warning, "Unhealthy", "Liveness probe failed", "main"});
    m.events->push_back({EventType::Normal, "Killing", "m", ""});
    Json::Value body = to_json(m);
    ck_assert(!body["events"][1].isMember("container"));  // "" = the pod: left out
    auto back = pod_status_from_json(through_wire(ShimOp::PodStatus, body));
    ck_assert(back.ok());
    ck_assert(back->events && back->events->size() == 2);
    ck_assert((*back->events)[0].type == EventType::Warning);
    ck_assert_sstr_eq((*back->events)[0].container, "main");
    ck_assert_sstr_eq((*back->events)[1].reason, "Killing");
    ck_assert(back->status == m.status);
    ck_assert(to_json(*back) == body);
    // An empty events array says "this shim reports its events"; none at all does not.
    m.events->clear();
    auto empty = pod_status_from_json(to_json(m));
    ck_assert(empty.ok() && empty->events && empty->events->empty());
    m.events.reset();
    auto none = pod_status_from_json(to_json(m));
    ck_assert(none.ok() && !none->events);
    // A long event message is cut, not refused.
    auto cut = pod_status_from_json(J(R"({"uid":"u","status":{},"events":[{"type":"Normal",
        "reason":"R","message":")" + std::string(5000, 'm') +
                                      R"("}]})"));
    ck_assert(cut.ok());
    ck_assert_uint_eq((*cut->events)[0].message.size(), kMaxEventMessageBytes);
}
END_TEST

START_TEST(exec_start_round_trip) {
    ExecStart m;
    m.session = "0f3a-Session-9";
    m.uid = "u1";
    m.container = "gen";
    m.command = {"sh", "-c", "echo hi; exit 3", ""};
    m.in = true;
    m.err = false;
    m.tty = true;
    auto back = exec_start_from_json(to_json(m));
    ck_assert(back.ok());
    ck_assert_sstr_eq(back->session, m.session);
    ck_assert_sstr_eq(back->uid, m.uid);
    ck_assert_sstr_eq(back->container, m.container);
    ck_assert(back->command == m.command);
    ck_assert(back->in && back->out && !back->err && back->tty);
    // Defaults: output and errors, no input, no terminal.
    auto d =
        exec_start_from_json(J(R"({"session":"s","uid":"u","container":"c","command":["x"]})"));
    ck_assert(d.ok() && !d->in && d->out && d->err && !d->tty);
    std::string at(kMaxSessionBytes, 's'), over(kMaxSessionBytes + 1, 's');
    ck_assert(exec_attach_from_json(to_json(ExecAttach{at})).ok());
    ck_assert(!exec_attach_from_json(to_json(ExecAttach{over})).ok());
    // The command's bounds: words and bytes.
    Json::Value body = to_json(m);
    body["command"] = Json::Value(Json::arrayValue);
    for (size_t i = 0; i < kMaxExecWords; i++)
        body["command"].append("w");
    ck_assert(exec_start_from_json(body).ok());
    body["command"].append("w");
    ck_assert(!exec_start_from_json(body).ok());
    body["command"] = Json::Value(Json::arrayValue);
    body["command"].append(std::string(kMaxExecCommandBytes, 'b'));
    ck_assert(exec_start_from_json(body).ok());
    body["command"][0] = std::string(kMaxExecCommandBytes + 1, 'b');
    ck_assert(!exec_start_from_json(body).ok());
}
END_TEST

START_TEST(attach_start_round_trip) {
    AttachStart m;
    m.session = "a7-Attach-0";
    m.uid = "u1";
    m.container = "gen";
    m.in = true;
    m.err = false;
    m.tty = true;
    auto back = attach_start_from_json(to_json(m));
    ck_assert(back.ok());
    ck_assert_sstr_eq(back->session, m.session);
    ck_assert_sstr_eq(back->uid, m.uid);
    ck_assert_sstr_eq(back->container, m.container);
    ck_assert(back->in && back->out && !back->err && back->tty);
    // Defaults: output and errors, no input, no terminal.
    auto d = attach_start_from_json(J(R"({"session":"s","uid":"u","container":"c"})"));
    ck_assert(d.ok() && !d->in && d->out && d->err && !d->tty);
    // The session id's and the container's bounds, as exec_start's.
    Json::Value body = to_json(m);
    body["session"] = std::string(kMaxSessionBytes, 's');
    ck_assert(attach_start_from_json(body).ok());
    body["session"] = std::string(kMaxSessionBytes + 1, 's');
    ck_assert(!attach_start_from_json(body).ok());
    body = to_json(m);
    body["container"] = std::string(kMaxObjectNameBytes, 'c');
    ck_assert(attach_start_from_json(body).ok());
    body["container"] = std::string(kMaxObjectNameBytes + 1, 'c');
    auto over = attach_start_from_json(body);
    ck_assert(!over.ok() &&
              over.message().find("'container' is longer than 253") != std::string::npos);
}
END_TEST

START_TEST(pod_stats_round_trip) {
    PodStatsReply m;
    m.node = {StatsSource::Cgroup, 123456789012ULL, 1ULL << 40};
    m.pods.push_back({"u1", "ns", "p", 1700000000000, {}});
    m.pods[0].containers.push_back({"gen", 1700000000500, UINT64_MAX, 4096});
    m.pods.push_back({"u2", "", "", 0, {}});  // not started: no containers
    auto back = pod_stats_reply_from_json(to_json(m));
    ck_assert_msg(back.ok(), "%s", back.message().c_str());
    ck_assert(back->node.source == StatsSource::Cgroup);
    ck_assert_uint_eq(back->node.cpu_ns, 123456789012ULL);
    ck_assert_uint_eq(back->node.memory_bytes, 1ULL << 40);
    ck_assert_uint_eq(back->pods.size(), 2);
    ck_assert_sstr_eq(back->pods[0].uid, "u1");
    ck_assert_sstr_eq(back->pods[0].ns, "ns");
    ck_assert_sstr_eq(back->pods[0].name, "p");
    ck_assert_int_eq(back->pods[0].start_ms, 1700000000000);
    ck_assert_uint_eq(back->pods[0].containers.size(), 1);
    const ContainerStats &c = back->pods[0].containers[0];
    ck_assert_sstr_eq(c.name, "gen");
    ck_assert_int_eq(c.start_ms, 1700000000500);
    ck_assert_uint_eq(c.cpu_ns, UINT64_MAX);
    ck_assert_uint_eq(c.memory_bytes, 4096);
    ck_assert(back->pods[1].containers.empty());
    ck_assert(!c.logs && !back->pods[0].ephemeral);  // not measured: left out
    ck_assert(!to_json(m)["pods"][0].isMember("ephemeral_storage"));
    ck_assert(!to_json(m)["pods"][0]["containers"][0].isMember("logs"));
    ck_assert(pod_stats_request_from_json(to_json(PodStatsRequest{})).ok());
    ck_assert(!pod_stats_request_from_json(J("[]")).ok());

    // The counts' bounds.
    Json::Value body = to_json(m);
    Json::Value one = body["pods"][0];
    body["pods"] = Json::Value(Json::arrayValue);
    for (size_t i = 0; i < kMaxStatsPods; i++)
        body["pods"].append(one);
    ck_assert(pod_stats_reply_from_json(body).ok());
    body["pods"].append(one);
    auto many = pod_stats_reply_from_json(body);
    ck_assert(!many.ok() && many.message().find("more than 1024 'pods'") != std::string::npos);
    Json::Value pod = one;
    pod["containers"] = Json::Value(Json::arrayValue);
    for (size_t i = 0; i <= kMaxStatsContainers; i++)
        pod["containers"].append(one["containers"][0]);
    body["pods"] = Json::Value(Json::arrayValue);
    body["pods"].append(pod);
    auto crowded = pod_stats_reply_from_json(body);
    ck_assert(!crowded.ok() &&
              crowded.message().find("has more than 256 entries") != std::string::npos);
}
END_TEST

// The disk figures (logs, ephemeral_storage) travel when measured, and a
// reply from a shim that sends none (as older shims) still parses.
START_TEST(pod_stats_disk_use) {
    PodStatsReply m;
    m.pods.push_back({"u1", "ns", "p", 1700000000000, {}, DiskUse{UINT64_MAX, 12}});
    m.pods[0].containers.push_back({"gen", 1700000000500, 1, 2, DiskUse{8192, 3}});
    Json::Value body = to_json(m);
    ck_assert_uint_eq(body["pods"][0]["ephemeral_storage"]["bytes"].asUInt64(), UINT64_MAX);
    auto back = pod_stats_reply_from_json(body);
    ck_assert_msg(back.ok(), "%s", back.message().c_str());
    ck_assert(back->pods[0].ephemeral.has_value());
    ck_assert_uint_eq(back->pods[0].ephemeral->bytes, UINT64_MAX);
    ck_assert_uint_eq(back->pods[0].ephemeral->inodes, 12);
    ck_assert(back->pods[0].containers[0].logs.has_value());
    ck_assert_uint_eq(back->pods[0].containers[0].logs->bytes, 8192);
    ck_assert_uint_eq(back->pods[0].containers[0].logs->inodes, 3);

    auto old = pod_stats_reply_from_json(
        J(R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1},"pods":[{"uid":"u",)"
          R"("start_ms":0,"containers":[{"name":"c","start_ms":1,"cpu_ns":1,)"
          R"("memory_bytes":1}]}]})"));
    ck_assert_msg(old.ok(), "%s", old.message().c_str());
    ck_assert(!old->pods[0].ephemeral && !old->pods[0].containers[0].logs);
    ck_assert(!old->pods[0].cgroup_cpu_ns && !old->pods[0].cgroup_memory_bytes);

    // The pod's own cgroup figures travel when read, and are checked.
    m.pods[0].cgroup_cpu_ns = 5000000000ULL;
    m.pods[0].cgroup_memory_bytes = 1 << 20;
    body = to_json(m);
    back = pod_stats_reply_from_json(body);
    ck_assert(back.ok() && back->pods[0].cgroup_cpu_ns == 5000000000ULL &&
              back->pods[0].cgroup_memory_bytes == (1u << 20));
    body["pods"][0]["cgroup_cpu_ns"] = -1;
    auto bad = pod_stats_reply_from_json(body);
    ck_assert(!bad.ok() && bad.message().find("cgroup_cpu_ns") != std::string::npos);
}
END_TEST

START_TEST(enum_names) {
    ck_assert_sstr_eq(std::string(to_string(ShimOp::PodRun)), "pod_run");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::PodKill)), "pod_kill");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::PodList)), "pod_list");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::Shutdown)), "shutdown");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::PodStatus)), "pod_status");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::ExecStart)), "exec_start");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::ExecAttach)), "exec_attach");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::AttachStart)), "attach_start");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::PodStats)), "pod_stats");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::PodsPause)), "pods_pause");
    ck_assert_sstr_eq(std::string(to_string(ShimOp::PodFiles)), "pod_files");
    ck_assert_sstr_eq(std::string(to_string(StatsSource::Cgroup)), "cgroup");
    ck_assert_sstr_eq(std::string(to_string(StatsSource::Pods)), "pods");
    for (ShimOp op : {ShimOp::PodRun, ShimOp::PodKill, ShimOp::PodList, ShimOp::Shutdown,
                      ShimOp::PodStatus, ShimOp::ExecStart, ShimOp::ExecAttach, ShimOp::AttachStart,
                      ShimOp::PodStats, ShimOp::PodsPause}) {
        auto back = shim_op_from_string(to_string(op), "op");
        ck_assert(back.ok() && *back == op);
    }
    for (EventType t : {EventType::Normal, EventType::Warning}) {
        auto back = event_type_from_string(to_string(t), "type");
        ck_assert(back.ok() && *back == t);
    }
    for (const char *r :
         {"Killing", "Deleted", "Orphaned", "JobEnded", "JobCancelled", "TimeLimit", "NodeFail",
          "JobCompleted", "JobFailed", "Preempted", "Requeued", "Shutdown"}) {
        auto back = stop_reason_from_string(r, "reason");
        ck_assert_msg(back.ok(), "%s", r);
        ck_assert_sstr_eq(std::string(to_string(*back)), r);
    }
    ck_assert(is_drain_reason(StopReason::TimeLimit));
    ck_assert(is_drain_reason(StopReason::Preempted));
    ck_assert(!is_drain_reason(StopReason::Deleted));
    ck_assert(!is_drain_reason(StopReason::Shutdown));
}
END_TEST

// Each enum's unknown value: refused, naming the field and the accepted values.
START_TEST(enum_unknown_values) {
    auto op = shim_op_from_string("attach", "op");
    ck_assert(!op.ok() && op.error() == Error::Parse);
    ck_assert(op.message().find("op 'attach' is not one of pod_run") != std::string::npos);
    auto r = stop_reason_from_string("TestEnd", "shutdown: 'reason'");
    ck_assert(!r.ok());
    ck_assert_msg(
        r.message().find("shutdown: 'reason' 'TestEnd' is not one of Killing") != std::string::npos,
        "%s", r.message().c_str());
    ck_assert(!stop_reason_from_string("killing", "reason").ok());  // case matters
    auto t = event_type_from_string("Error", "type");
    ck_assert(!t.ok() && t.message().find("Normal, Warning") != std::string::npos);
}
END_TEST

struct Bad {
    ShimOp op;
    const char *body;
    Error code;
    const char *message_has;
};
static const Bad kBad[] = {
    // pod_run: failures are Invalid (the shim's refusal of a pod)
    {ShimOp::PodRun, R"({})", Error::Invalid, "'pod' must be an object"},
    {ShimOp::PodRun, R"({"pod":[]})", Error::Invalid, "'pod' must be an object"},
    {ShimOp::PodRun, R"({"pod":{}})", Error::Invalid, "no valid metadata.uid"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":7}}})", Error::Invalid, "metadata.uid"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":""}}})", Error::Invalid, "metadata.uid"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":"a/b"}}})", Error::Invalid, "metadata.uid"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":".."}}})", Error::Invalid, "metadata.uid"},
    {ShimOp::PodRun, R"({"pod":{"metadata":"x"}})", Error::Invalid, "metadata.uid"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":"u","namespace":1}}})", Error::Invalid,
     "'namespace' must be a string"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":"u","name":[]}}})", Error::Invalid,
     "'name' must be a string"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":"u"}},"files":[]})", Error::Invalid,
     "'files' must be an object"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":"u"}},"files":{"v":"x"}})", Error::Invalid,
     "'files' of volume 'v' must be an object"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":"u"}},"files":{"v":null}})", Error::Invalid,
     "'files' of volume 'v' must be an object"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":"u"}},"files":{"v":{"a":1}}})", Error::Invalid,
     "file 'a' must be a base64 string"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":"u"}},"files":{"v":{"a":"eA="}}})",
     Error::Invalid, "file 'a' is not valid base64"},
    {ShimOp::PodRun, R"({"pod":{"metadata":{"uid":"u"}},"files":{"v":{"a":"e A=="}}})",
     Error::Invalid, "file 'a' is not valid base64"},
    // pod_kill
    {ShimOp::PodKill, R"({})", Error::Parse, "pod_kill: missing 'uid'"},
    {ShimOp::PodKill, R"({"uid":1})", Error::Parse, "pod_kill: 'uid' must be a string"},
    {ShimOp::PodKill, R"({"uid":""})", Error::Parse, "pod_kill: 'uid' must be 1..128"},
    {ShimOp::PodKill, R"({"uid":"u","grace_s":-1})", Error::Parse, "'grace_s' must be"},
    {ShimOp::PodKill, R"({"uid":"u","grace_s":"5"})", Error::Parse, "'grace_s' must be"},
    {ShimOp::PodKill, R"({"uid":"u","grace_s":86401})", Error::Parse, "'grace_s' is larger"},
    {ShimOp::PodKill, R"({"uid":"u","reason":5})", Error::Parse, "'reason' must be a string"},
    {ShimOp::PodKill, R"({"uid":"u","reason":"Evicted"})", Error::Parse,
     "pod_kill: 'reason' 'Evicted' is not one of"},
    // pod_list
    {ShimOp::PodList, R"([])", Error::Parse, "pod_list: the body must be an object"},
    // shutdown
    {ShimOp::Shutdown, R"({"grace_s":1.5})", Error::Parse, "shutdown: 'grace_s' must be"},
    {ShimOp::Shutdown, R"({"reason":"TestEnd"})", Error::Parse,
     "shutdown: 'reason' 'TestEnd' is not one of"},
    // pod_status
    {ShimOp::PodStatus, R"({"status":{}})", Error::Parse, "pod_status: missing 'uid'"},
    {ShimOp::PodStatus, R"({"uid":"u/1","status":{}})", Error::Parse, "pod_status: 'uid'"},
    {ShimOp::PodStatus, R"({"uid":"u"})", Error::Parse, "'status' must be an object"},
    {ShimOp::PodStatus, R"({"uid":"u","status":[]})", Error::Parse, "'status' must be an object"},
    {ShimOp::PodStatus, R"({"uid":"u","namespace":{},"status":{}})", Error::Parse,
     "'namespace' must be a string"},
    {ShimOp::PodStatus, R"({"uid":"u","name":1,"status":{}})", Error::Parse,
     "'name' must be a string"},
    {ShimOp::PodStatus, R"({"uid":"u","status":{},"events":{}})", Error::Parse,
     "'events' must be an array"},
    {ShimOp::PodStatus, R"({"uid":"u","status":{},"events":[1]})", Error::Parse,
     "an event must be an object"},
    {ShimOp::PodStatus, R"({"uid":"u","status":{},"events":[{"reason":"R"}]})", Error::Parse,
     "event: missing 'type'"},
    {ShimOp::PodStatus, R"({"uid":"u","status":{},"events":[{"type":"Error","reason":"R"}]})",
     Error::Parse, "'type' 'Error' is not one of Normal, Warning"},
    {ShimOp::PodStatus, R"({"uid":"u","status":{},"events":[{"type":"Normal"}]})", Error::Parse,
     "event: missing 'reason'"},
    {ShimOp::PodStatus, R"({"uid":"u","status":{},"events":[{"type":"Normal","reason":""}]})",
     Error::Parse, "event 'reason' is empty"},
    {ShimOp::PodStatus,
     R"({"uid":"u","status":{},"events":[{"type":"Normal","reason":"R","message":1}]})",
     Error::Parse, "event: 'message' must be a string"},
    {ShimOp::PodStatus,
     R"({"uid":"u","status":{},"events":[{"type":"Normal","reason":"R","container":[]}]})",
     Error::Parse, "event: 'container' must be a string"},
    {ShimOp::ExecStart, R"([])", Error::Parse, "exec_start: the body must be an object"},
    {ShimOp::ExecStart, R"({"uid":"u","container":"c","command":["x"]})", Error::Parse,
     "exec_start: missing 'session'"},
    {ShimOp::ExecStart, R"({"session":"a b","uid":"u","container":"c","command":["x"]})",
     Error::Parse, "'session' must be 1..64 bytes of letters, digits and '-'"},
    {ShimOp::ExecStart, R"({"session":"","uid":"u","container":"c","command":["x"]})", Error::Parse,
     "'session' must be 1..64"},
    {ShimOp::ExecStart, R"({"session":"s","uid":"../x","container":"c","command":["x"]})",
     Error::Parse, "'uid' must be 1..128 bytes without '/'"},
    {ShimOp::ExecStart, R"({"session":"s","uid":"u","command":["x"]})", Error::Parse,
     "exec_start: missing 'container'"},
    {ShimOp::ExecStart, R"({"session":"s","uid":"u","container":"","command":["x"]})", Error::Parse,
     "'container' must not be empty"},
    {ShimOp::ExecStart, R"({"session":"s","uid":"u","container":"c"})", Error::Parse,
     "'command' must have 1..1024 words"},
    {ShimOp::ExecStart, R"({"session":"s","uid":"u","container":"c","command":[]})", Error::Parse,
     "'command' must have 1..1024 words"},
    {ShimOp::ExecStart, R"({"session":"s","uid":"u","container":"c","command":[1]})", Error::Parse,
     "'command'"},
    {ShimOp::ExecStart, R"({"session":"s","uid":"u","container":"c","command":["a\u0000b"]})",
     Error::Parse, "'command' has a word with a NUL byte"},
    {ShimOp::ExecStart, R"({"session":"s","uid":"u","container":"c","command":["x"],"tty":1})",
     Error::Parse, "'tty'"},
    {ShimOp::ExecAttach, R"({})", Error::Parse, "exec_attach: missing 'session'"},
    {ShimOp::PodStats, R"([])", Error::Parse, "pod_stats reply: the body must be an object"},
    {ShimOp::PodStats, R"({"pods":[]})", Error::Parse, "'node' must be an object"},
    {ShimOp::PodStats, R"({"node":{"source":"host","cpu_ns":1,"memory_bytes":1},"pods":[]})",
     Error::Parse, "'source' 'host' is not one of cgroup, pods"},
    {ShimOp::PodStats, R"({"node":{"source":"pods","cpu_ns":-1,"memory_bytes":1},"pods":[]})",
     Error::Parse, "'cpu_ns'"},
    {ShimOp::PodStats, R"({"node":{"source":"pods","cpu_ns":1.5,"memory_bytes":1},"pods":[]})",
     Error::Parse, "'cpu_ns'"},
    {ShimOp::PodStats, R"({"node":{"source":"pods","cpu_ns":1},"pods":[]})", Error::Parse,
     "missing 'memory_bytes'"},
    {ShimOp::PodStats, R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1}})", Error::Parse,
     "'pods' must be an array"},
    {ShimOp::PodStats,
     R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1},"pods":[{"uid":"../x",)"
     R"("start_ms":0,"containers":[]}]})",
     Error::Parse, "'uid' must be 1..128 bytes without '/'"},
    {ShimOp::PodStats,
     R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1},"pods":[{"uid":"u",)"
     R"("start_ms":0}]})",
     Error::Parse, "'containers' must be an array"},
    {ShimOp::PodStats,
     R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1},"pods":[{"uid":"u",)"
     R"("start_ms":0,"containers":[{"name":"","start_ms":1,"cpu_ns":1,"memory_bytes":1}]}]})",
     Error::Parse, "'name' must not be empty"},
    {ShimOp::PodStats,
     R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1},"pods":[{"uid":"u",)"
     R"("start_ms":0,"containers":[{"name":"c","start_ms":0,"cpu_ns":1,"memory_bytes":1}]}]})",
     Error::Parse, "'start_ms' must be > 0"},
    {ShimOp::PodStats,
     R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1},"pods":[{"uid":"u",)"
     R"("start_ms":-5,"containers":[]}]})",
     Error::Parse, "'start_ms'"},
    {ShimOp::PodStats,
     R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1},"pods":[{"uid":"u",)"
     R"("start_ms":0,"containers":[],"ephemeral_storage":7}]})",
     Error::Parse, "pod_stats reply: pod: 'ephemeral_storage' must be an object"},
    {ShimOp::PodStats,
     R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1},"pods":[{"uid":"u",)"
     R"("start_ms":0,"containers":[],"ephemeral_storage":{"bytes":-1,"inodes":1}}]})",
     Error::Parse, "'ephemeral_storage': 'bytes'"},
    {ShimOp::PodStats,
     R"({"node":{"source":"pods","cpu_ns":1,"memory_bytes":1},"pods":[{"uid":"u",)"
     R"("start_ms":0,"containers":[{"name":"c","start_ms":1,"cpu_ns":1,"memory_bytes":1,)"
     R"("logs":{"bytes":1}}]}]})",
     Error::Parse, "'logs': missing 'inodes'"},
    {ShimOp::ExecAttach, R"({"session":"x/y"})", Error::Parse, "exec_attach: 'session' must be"},
    {ShimOp::AttachStart, R"([])", Error::Parse, "attach_start: the body must be an object"},
    {ShimOp::AttachStart, R"({"uid":"u","container":"c"})", Error::Parse,
     "attach_start: missing 'session'"},
    {ShimOp::AttachStart, R"({"session":"a b","uid":"u","container":"c"})", Error::Parse,
     "'session' must be 1..64 bytes of letters, digits and '-'"},
    {ShimOp::AttachStart, R"({"session":"s","container":"c"})", Error::Parse,
     "attach_start: missing 'uid'"},
    {ShimOp::AttachStart, R"({"session":"s","uid":".x","container":"c"})", Error::Parse,
     "'uid' must be 1..128 bytes without '/'"},
    {ShimOp::AttachStart, R"({"session":"s","uid":"u"})", Error::Parse,
     "attach_start: missing 'container'"},
    {ShimOp::AttachStart, R"({"session":"s","uid":"u","container":""})", Error::Parse,
     "attach_start: 'container' must not be empty"},
    {ShimOp::AttachStart, R"({"session":"s","uid":"u","container":7})", Error::Parse,
     "'container' must be a string"},
    {ShimOp::AttachStart, R"({"session":"s","uid":"u","container":"c","stdin":"yes"})",
     Error::Parse, "'stdin'"},
    {ShimOp::AttachStart, R"({"session":"s","uid":"u","container":"c","stdout":0})", Error::Parse,
     "'stdout'"},
    {ShimOp::AttachStart, R"({"session":"s","uid":"u","container":"c","stderr":"no"})",
     Error::Parse, "'stderr'"},
    {ShimOp::AttachStart, R"({"session":"s","uid":"u","container":"c","tty":1})", Error::Parse,
     "'tty'"},
    {ShimOp::PodsPause, R"({})", Error::Parse, "pods_pause: 'pause' must be true or false"},
    {ShimOp::PodsPause, R"({"pause":"yes"})", Error::Parse,
     "pods_pause: 'pause' must be true or false"},
    {ShimOp::PodsPause, R"({"pause":true,"message":7})", Error::Parse, "message"},
    {ShimOp::PodFiles, R"({"files":{}})", Error::Parse, "uid"},
    {ShimOp::PodFiles, R"({"uid":"u","files":{"v":{"token":"%%%"}}})", Error::Parse,
     "is not valid base64"},
    {ShimOp::PodFiles, R"({"uid":"u","files":[]})", Error::Parse,
     "pod_files: 'files' must be an object"},
    {ShimOp::ImagePull, R"({})", Error::Parse, "image"},
    {ShimOp::ImagePull, R"({"image":"busybox"})", Error::Parse, "has no registry"},
    {ShimOp::ImagePull, R"({"image":"-x/y"})", Error::Parse, "starts with '-'"},
    {ShimOp::ImagePull, R"({"image":"r.io/a b"})", Error::Parse, "a character other than"},
    {ShimOp::ImagePull, R"({"image":"r.io/../etc"})", Error::Parse, "'..'"},
    {ShimOp::ImagePullCancel, R"({"id":"7"})", Error::Parse, "'id'"},
    {ShimOp::PodSandbox, R"({"hostname":"a"})", Error::Parse, "pod_sandbox: missing 'uid'"},
    {ShimOp::PodSandbox, R"({"uid":"u","hostname":"a_b"})", Error::Parse,
     "'hostname' must be 1 to 63 lower-case letters"},
};

static Status decode_as(ShimOp op, const Json::Value &body) {
    switch (op) {
        case ShimOp::PodRun: {
            auto r = pod_run_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::PodKill: {
            auto r = pod_kill_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::PodList: {
            auto r = pod_list_request_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::Shutdown: {
            auto r = shutdown_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::PodStatus: {
            auto r = pod_status_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::ExecStart: {
            auto r = exec_start_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::ExecAttach: {
            auto r = exec_attach_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::ImagePull: {
            auto r = image_pull_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::ImagePullCancel: {
            auto r = image_pull_cancel_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::PodSandbox: {
            auto r = pod_sandbox_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::AttachStart: {
            auto r = attach_start_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::PodsPause: {
            auto r = pods_pause_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::PodFiles: {
            auto r = pod_files_update_from_json(body);
            return r ? Status() : r.failure();
        }
        case ShimOp::PodStats: {  // the reply: the agent decodes what the shim sends
            auto r = pod_stats_reply_from_json(body);
            return r ? Status() : r.failure();
        }
    }
    return fail(Error::Internal, "unreachable");
}

START_TEST(malformed_fields_table) {
    const auto &c = kBad[_i];
    auto st = decode_as(c.op, J(c.body));
    ck_assert_msg(!st.ok(), "%s %s accepted", std::string(to_string(c.op)).c_str(), c.body);
    ck_assert_msg(st.error() == c.code, "%s: %s", c.body, st.failure().describe().c_str());
    ck_assert_msg(st.message().find(c.message_has) != std::string::npos, "%s: '%s' lacks '%s'",
                  c.body, st.message().c_str(), c.message_has);
}
END_TEST

// Bounds: each one refused one past the limit, accepted at it.
START_TEST(size_limits) {
    std::string at(kMaxUidBytes, 'u'), over(kMaxUidBytes + 1, 'u');
    ck_assert(pod_kill_from_json(J(R"({"uid":")" + at + "\"}")).ok());
    ck_assert(!pod_kill_from_json(J(R"({"uid":")" + over + "\"}")).ok());
    std::string name(kMaxObjectNameBytes + 1, 'n');
    auto st = pod_status_from_json(J(R"({"uid":"u","name":")" + name + R"(","status":{}})"));
    ck_assert(!st.ok() && st.message().find("'name' is longer than 253") != std::string::npos);
    auto run =
        pod_run_from_json(J(R"({"pod":{"metadata":{"uid":"u","namespace":")" + name + R"("}}})"));
    ck_assert(!run.ok() && run.message().find("'namespace' is longer") != std::string::npos);
    std::string reason(kMaxEventReasonBytes + 1, 'R');
    auto ev = pod_status_from_json(
        J(R"({"uid":"u","status":{},"events":[{"type":"Normal","reason":")" + reason + "\"}]}"));
    ck_assert(!ev.ok() && ev.message().find("'reason' is longer") != std::string::npos);

    Json::Value events(Json::arrayValue);
    Json::Value one = J(R"({"type":"Normal","reason":"R"})");
    for (size_t i = 0; i < kMaxEvents; i++)
        events.append(one);
    Json::Value body = J(R"({"uid":"u","status":{}})");
    body["events"] = events;
    ck_assert(pod_status_from_json(body).ok());
    body["events"].append(one);
    auto many = pod_status_from_json(body);
    ck_assert(!many.ok() && many.message().find("more than 256 'events'") != std::string::npos);

    Json::Value files(Json::objectValue);
    for (size_t i = 0; i <= kMaxVolumes; i++)
        files["v" + std::to_string(i)] = Json::Value(Json::objectValue);
    auto vols = pod_files_from_json(files);
    ck_assert(!vols.ok() && vols.message().find("more than 256 volumes") != std::string::npos);
    Json::Value one_volume(Json::objectValue);
    one_volume["v"][std::string(kMaxFilePathBytes + 1, 'p')] = "eA==";
    auto path = pod_files_from_json(one_volume);
    ck_assert(!path.ok() && path.message().find("a path is longer") != std::string::npos);
    Json::Value crowded(Json::objectValue);
    for (size_t i = 0; i <= kMaxFilesPerVolume; i++)
        crowded["v"]["f" + std::to_string(i)] = "";
    auto nfiles = pod_files_from_json(crowded);
    ck_assert(!nfiles.ok() && nfiles.message().find("more than 4096 files") != std::string::npos);
}
END_TEST

// deregister refuses a reason the shim protocol cannot carry to the shim.
START_TEST(deregister_reason_checked) {
    // Every drain reason of the shim protocol, and only those.
    for (const char *r : {"JobEnded", "JobCancelled", "TimeLimit", "NodeFail", "JobCompleted",
                          "JobFailed", "Preempted", "Requeued"}) {
        DeregisterRequest d{42, "n1", 5, r};
        ck_assert_msg(deregister_from_json(to_json(d)).ok(), "%s", r);
        auto sr = stop_reason_from_string(r, "reason");
        ck_assert_msg(sr.ok() && is_drain_reason(*sr), "%s", r);
    }
    for (const char *r : {"", "Killing", "Deleted", "Shutdown", "Whatever"}) {
        DeregisterRequest d{42, "n1", 5, r};
        auto back = deregister_from_json(to_json(d));
        ck_assert_msg(!back.ok(), "'%s' accepted", r);
        ck_assert(back.message().find("deregister: 'reason' must be one of") != std::string::npos);
    }
}
END_TEST

// ---- base64 ----

START_TEST(base64_vectors) {
    // RFC 4648 section 10.
    static const char *kVectors[][2] = {{"", ""},
                                        {"f", "Zg=="},
                                        {"fo", "Zm8="},
                                        {"foo", "Zm9v"},
                                        {"foob", "Zm9vYg=="},
                                        {"fooba", "Zm9vYmE="},
                                        {"foobar", "Zm9vYmFy"}};
    for (const auto &v : kVectors) {
        ck_assert_sstr_eq(base64_encode(v[0]), v[1]);
        auto d = base64_decode(v[1]);
        ck_assert(d.ok());
        ck_assert_sstr_eq(*d, v[0]);
    }
    std::string all;
    for (int i = 0; i < 256; i++)
        all += static_cast<char>(i);
    auto d = base64_decode(base64_encode(all));
    ck_assert(d.ok() && *d == all);
}
END_TEST

static const char *kBadBase64[] = {
    "Zg",        // no padding
    "Zg=",       // short padding
    "Z===",      // three '='
    "====",      // only padding
    "Zg==Zg==",  // padding inside
    "Z=g=",      // '=' before data
    "Zm9v\n",    // whitespace
    "Zm 9",      // space
    "Zm9-",      // URL-safe alphabet
    "Zm9_",      // URL-safe alphabet
    "Zh==",      // non-zero unused bits ("Zg==" is canonical)
    "Zm9=",      // non-zero unused bits ("Zm8=" is canonical)
    "Zm9v\x80",  // not ASCII
};
START_TEST(base64_refused) {
    auto d = base64_decode(kBadBase64[_i]);
    ck_assert_msg(!d.ok(), "'%s' accepted", kBadBase64[_i]);
    ck_assert(d.error() == Error::Invalid);
    ck_assert(std::string_view(kBadBase64[_i]).find('\0') == std::string_view::npos);
    ck_assert(!base64_decode(std::string("Zg=\0", 4)).ok());
}
END_TEST

START_TEST(base64_round_trip) {
    for (std::string s : {"", "a", "ab", "abc", "abcd", "\x01\xff\x10"}) {
        auto d = base64_decode(base64_encode(s));
        ck_assert(d.ok());
        ck_assert_sstr_eq(*d, s);
    }
    ck_assert(!base64_decode("a").ok());
    ck_assert(!base64_decode("a$==").ok());
}
END_TEST

// The attached link's frame limits (common/daemons/shim_protocol.h): a pod_run of
// up to kMaxPodRunBytes, far over the socket's kMaxMessageBytes, goes
// through the envelope with the link's bound, and the link's bound is
// enforced on both decoders.
START_TEST(link_frame_limits) {
    static_assert(kMaxPodRunBytes >= 3 * kMaxMessageBytes + 4 * kMaxMessageBytes,
                  "a 3 MiB pod with several MiB of volume data fits one pod_run");
    static_assert(kMaxShimMessageBytes > kMaxPodRunBytes + 4096,
                  "a pod_run within its limit fits the link with its envelope");
    PodRun m;
    m.uid = "u1";
    m.pod["metadata"]["uid"] = "u1";
    m.pod["spec"]["containers"][0]["name"] = "main";
    m.pod["spec"]["containers"][0]["env"][0]["name"] = "BIG";
    m.pod["spec"]["containers"][0]["env"][0]["value"] = std::string(kMaxMessageBytes * 3, 'e');
    m.files["v"]["f"] = std::string(kMaxMessageBytes * 2, 'f');
    Request r;
    r.id = 5;
    r.op = "pod_run";
    r.body = to_json(m);
    std::string line = encode(r);
    line.pop_back();
    ck_assert(line.size() > 5 * kMaxMessageBytes && line.size() <= kMaxPodRunBytes);
    ck_assert(decode_request(line).error() == Error::TooLarge);  // the socket's bound
    auto back = decode_request(line, kMaxShimMessageBytes);
    ck_assert(back.ok());
    auto m2 = pod_run_from_json(back->body);
    ck_assert(m2.ok());
    ck_assert(m2->files == m.files && m2->pod == m.pod);
    std::string over = "{\"id\":1,\"ok\":true,\"body\":{\"pad\":\"" +
                       std::string(kMaxShimMessageBytes, 'a') + "\"}}";
    ck_assert(decode_reply(over, kMaxShimMessageBytes).error() == Error::TooLarge);
    ck_assert(decode_request(over, kMaxShimMessageBytes).error() == Error::TooLarge);
}
END_TEST

int main() {
    Suite *s = suite_create("shim_protocol");
    TCase *tc = tcase_create("messages");
    tcase_add_test(tc, pod_run_round_trip);
    tcase_add_test(tc, pod_run_made_as_the_shim_checks);
    tcase_add_test(tc, pod_kill_round_trip);
    tcase_add_test(tc, pod_sandbox_round_trip);
    tcase_add_test(tc, shutdown_and_list_round_trip);
    tcase_add_test(tc, pods_pause_round_trip);
    tcase_add_test(tc, pod_files_round_trip);
    tcase_add_test(tc, pod_status_round_trip);
    tcase_add_test(tc, exec_start_round_trip);
    tcase_add_test(tc, attach_start_round_trip);
    tcase_add_test(tc, pod_stats_round_trip);
    tcase_add_test(tc, pod_stats_disk_use);
    tcase_add_test(tc, enum_names);
    tcase_add_test(tc, enum_unknown_values);
    tcase_add_loop_test(tc, malformed_fields_table, 0, TABLE_SIZE(kBad));
    tcase_add_test(tc, size_limits);
    tcase_add_test(tc, link_frame_limits);
    tcase_add_test(tc, deregister_reason_checked);
    suite_add_tcase(s, tc);
    tc = tcase_create("base64");
    tcase_add_test(tc, base64_vectors);
    tcase_add_loop_test(tc, base64_refused, 0, TABLE_SIZE(kBadBase64));
    tcase_add_test(tc, base64_round_trip);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
