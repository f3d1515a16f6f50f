// cli/: argument parsing, output a user reads, failure messages and exit codes.
#include <string>
#include <vector>

#include "cli/cli.h"
#include "common/daemons/json.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::cli;
using Cmd = Options::Command;

struct ArgCase {
    std::vector<std::string> args;
    bool ok;
    Cmd cmd;
    const char *socket;
    bool json;
    uint64_t timeout;
    uint32_t job;
    const char *err;  // failure message must contain
};
static const ArgCase kArgs[] = {
    {{"status"}, true, Cmd::Status, kDefaultSocket, false, 0, 0, ""},
    {{"list", "--json"}, true, Cmd::List, kDefaultSocket, true, 0, 0, ""},
    {{"--socket", "/tmp/a.sock", "list"}, true, Cmd::List, "/tmp/a.sock", false, 0, 0, ""},
    {{"--socket=/tmp/b.sock", "status"}, true, Cmd::Status, "/tmp/b.sock", false, 0, 0, ""},
    {{"wait", "42"}, true, Cmd::Wait, kDefaultSocket, false, 0, 42, ""},
    {{"wait", "42", "--timeout", "90s"}, true, Cmd::Wait, kDefaultSocket, false, 90, 42, ""},
    {{"wait", "--timeout=5m", "7"}, true, Cmd::Wait, kDefaultSocket, false, 300, 7, ""},
    {{"--help"}, true, Cmd::Help, kDefaultSocket, false, 0, 0, ""},
    {{"list", "-h"}, true, Cmd::Help, kDefaultSocket, false, 0, 0, ""},
    {{"--version"}, true, Cmd::Version, kDefaultSocket, false, 0, 0, ""},
    {{}, false, Cmd::Help, "", false, 0, 0, "no command given"},
    {{"stauts"}, false, Cmd::Help, "", false, 0, 0, "unknown command 'stauts'"},
    {{"list", "--jsn"}, false, Cmd::Help, "", false, 0, 0, "unknown option '--jsn'"},
    {{"list", "extra"}, false, Cmd::Help, "", false, 0, 0, "unexpected argument 'extra'"},
    {{"wait"}, false, Cmd::Help, "", false, 0, 0, "wait needs exactly one JOBID"},
    {{"wait", "1", "2"}, false, Cmd::Help, "", false, 0, 0, "wait needs exactly one JOBID"},
    {{"wait", "abc"}, false, Cmd::Help, "", false, 0, 0, "'abc' is not a job id"},
    {{"wait", "0"}, false, Cmd::Help, "", false, 0, 0, "'0' is not a job id"},
    {{"wait", "1", "--timeout", "soon"}, false, Cmd::Help, "", false, 0, 0, "--timeout: 'soon'"},
    {{"wait", "1", "--timeout", "0"}, false, Cmd::Help, "", false, 0, 0, "--timeout"},
    {{"list", "--socket"}, false, Cmd::Help, "", false, 0, 0, "--socket needs a value"},
    {{"--socket=", "list"}, false, Cmd::Help, "", false, 0, 0, "--socket needs a path"},
};
START_TEST(args_table) {
    const auto &c = kArgs[_i];
    auto r = parse_args(c.args);
    ck_assert_msg(r.ok() == c.ok, "case %d: %s", _i, r.ok() ? "ok" : r.message().c_str());
    if (!c.ok) {
        ck_assert_msg(r.message().find(c.err) != std::string::npos, "'%s'", r.message().c_str());
        ck_assert(r.message().find("slurm-k8s --help") != std::string::npos);
        return;
    }
    ck_assert(r->command == c.cmd);
    if (c.cmd == Cmd::Help || c.cmd == Cmd::Version) return;
    ck_assert_sstr_eq(r->socket, c.socket);
    ck_assert_int_eq(r->json, c.json);
    ck_assert_uint_eq(r->timeout_s, c.timeout);
    ck_assert_uint_eq(r->job_id, c.job);
}
END_TEST

static std::vector<proto::NodeState> two_nodes() {
    proto::NodeState a;
    a.job_id = 42;
    a.slurm_node = "n1";
    a.node_name = "slurm-n1-42";
    a.user = "alice";
    a.phase = "ready";
    a.ready = true;
    a.gpus = {2, 3};
    a.pods = 5;
    a.identity = "system:node:slurm-n1-42, certificate until 2026-12-05T10:00:00Z";
    proto::NodeState b;
    b.job_id = 1234567;
    b.slurm_node = "n1";
    b.node_name = "slurm-n1-1234567";
    b.user = "bob";
    b.phase = "registering";
    b.gpus = {};
    return {a, b};
}

START_TEST(list_table_output) {
    ck_assert_sstr_eq(format_list(two_nodes()),
                      "JOB      USER   NODE              PHASE        READY  GPUS  PODS\n"
                      "42       alice  slurm-n1-42       ready        True   2,3   5\n"
                      "1234567  bob    slurm-n1-1234567  registering  False  -     0\n");
    ck_assert_sstr_eq(format_list({}), "no virtual nodes on this node\n");
}
END_TEST

START_TEST(status_output) {
    ck_assert_sstr_eq(format_status("/run/slurm-k8s/agent.sock", "0.1.0", two_nodes()),
                      "agent:   reachable at /run/slurm-k8s/agent.sock\n"
                      "version: 0.1.0\n"
                      "jobs:    2 on this node (1 Ready)\n"
                      "  job 42 (alice): slurm-n1-42 ready, GPUs 2,3, 5 pods\n"
                      "    identity system:node:slurm-n1-42, certificate until "
                      "2026-12-05T10:00:00Z\n"
                      "  job 1234567 (bob): slurm-n1-1234567 registering, GPUs -, 0 pods\n");
    ck_assert(format_status("/s", "", {}).find("version: unknown\n") != std::string::npos);
    ck_assert(format_status("/s", "", {}).find("api:") == std::string::npos);
    Json::Value ok;
    ok["state"] = "ok";
    ok["source"] = "token file /etc/slurm-k8s/token";
    ok["expires"] = "2026-12-02T16:00:00Z";
    ck_assert_sstr_eq(format_status("/s", "1", {}, ok).c_str(),
                      "agent:   reachable at /s\nversion: 1\napi:     credential accepted (token "
                      "file /etc/slurm-k8s/token, expires 2026-12-02T16:00:00Z)\njobs:    0 on "
                      "this node (0 Ready)\n");
    Json::Value refused;
    refused["state"] = "refused";
    refused["since"] = "2026-12-02T15:01:02Z";
    refused["message"] = "401 Unauthorized with the credential from token file /t";
    ck_assert(format_status("/s", "1", {}, refused)
                  .find("api:     credential REFUSED since 2026-12-02T15:01:02Z: 401 Unauthorized "
                        "with the credential from token file /t\n") != std::string::npos);
}
END_TEST

START_TEST(list_reply_round_trip_and_wait) {
    Json::Value body(Json::objectValue);
    body["nodes"] = Json::Value(Json::arrayValue);
    for (const auto &n : two_nodes())
        body["nodes"].append(proto::to_json(n));
    auto nodes = nodes_from_list_reply(body);
    ck_assert_msg(nodes.ok(), "%s", nodes.ok() ? "" : nodes.message().c_str());
    ck_assert_int_eq(nodes->size(), 2);
    ck_assert(job_ready(*nodes, 42));
    ck_assert(!job_ready(*nodes, 1234567));  // registering
    ck_assert(!job_ready(*nodes, 7));        // not on this node
    auto bad = nodes_from_list_reply(Json::Value(Json::objectValue));
    ck_assert(!bad.ok());
    ck_assert(bad.message().find("'nodes'") != std::string::npos);
    ck_assert_sstr_eq(format_json(Json::Value(Json::objectValue)), "{}\n");
}
END_TEST

struct FailCase {
    Error code;
    const char *msg;
    int exit;
    const char *want;
};
static const FailCase kFails[] = {
    {Error::Unavailable,
     "agent socket /run/slurm-k8s/agent.sock: No such file or directory (is slurm-k8s-agent "
     "running on this node?)",
     kExitUnreachable,
     "slurm-k8s: cannot reach the agent: agent socket /run/slurm-k8s/agent.sock: No such file or "
     "directory (is slurm-k8s-agent running on this node?)"},
    {Error::Unavailable, "agent closed the connection without a reply", kExitUnreachable,
     "slurm-k8s: cannot reach the agent at /run/slurm-k8s/agent.sock: agent closed the "
     "connection without a reply"},
    {Error::Timeout, "list: no answer within the timeout", kExitFailed,
     "slurm-k8s: the agent at /run/slurm-k8s/agent.sock did not answer in time: list: no answer "
     "within the timeout"},
    {Error::Forbidden, "only root may list", kExitFailed,
     "slurm-k8s: forbidden: only root may list"},
};
START_TEST(failure_messages) {
    const auto &c = kFails[_i];
    Failure f{c.code, c.msg};
    ck_assert_sstr_eq(describe_failure(kDefaultSocket, f), c.want);
    ck_assert_int_eq(exit_code_for(f), c.exit);
}
END_TEST

// Root talks to the admin socket, any other user to the agent socket.
START_TEST(socket_by_uid) {
    auto o = parse_args({"status"});
    ck_assert(o.ok());
    ck_assert_sstr_eq(socket_to_use(*o, 0), "/run/slurm-k8s/admin/agent.sock");
    ck_assert_sstr_eq(socket_to_use(*o, 1000), "/run/slurm-k8s/agent.sock");
    o = parse_args({"--socket", "/tmp/a/b.sock", "list"});
    ck_assert_sstr_eq(socket_to_use(*o, 0), "/tmp/a/admin/b.sock");
    ck_assert_sstr_eq(socket_to_use(*o, 64030), "/tmp/a/b.sock");
    o = parse_args({"--admin-socket=/r/x.sock", "list"});
    ck_assert_sstr_eq(socket_to_use(*o, 0), "/r/x.sock");
    ck_assert_sstr_eq(socket_to_use(*o, 5), "/run/slurm-k8s/agent.sock");
    auto bad = parse_args({"--admin-socket=", "list"});
    ck_assert(!bad.ok() && bad.message().find("--admin-socket needs a path") != std::string::npos);
}
END_TEST

START_TEST(help_mentions_every_command_and_option) {
    std::string h = help_text();
    for (const char *w : {"status", "list", "wait JOBID", "--socket", "--admin-socket", "--json",
                          "--timeout", "EXIT STATUS", "/run/slurm-k8s/agent.sock"})
        ck_assert_msg(h.find(w) != std::string::npos, "help lacks %s", w);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_add_loop_test(tc, args_table, 0, TABLE_SIZE(kArgs));
    tcase_add_test(tc, list_table_output);
    tcase_add_test(tc, status_output);
    tcase_add_test(tc, list_reply_round_trip_and_wait);
    tcase_add_loop_test(tc, failure_messages, 0, TABLE_SIZE(kFails));
    tcase_add_test(tc, socket_by_uid);
    tcase_add_test(tc, help_mentions_every_command_and_option);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
