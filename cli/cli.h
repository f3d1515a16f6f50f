// The `slurm-k8s` command: admin/user view of this node's agent. Pure part:
// argument parsing, output formatting, help text; main.cc does the socket I/O.
//   slurm-k8s [--socket PATH] [--json] [--timeout S] status
//   slurm-k8s [--socket PATH] [--json] list
//   slurm-k8s [--socket PATH] wait JOBID [--timeout S]
// Exit status: 0 ok; 1 the agent failed or the wait timed out; 2 usage error;
// 3 the agent is not reachable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/daemons/protocol.h"
#include "common/result.h"

namespace sk::cli {

constexpr const char *kDefaultSocket = "/run/slurm-k8s/agent.sock";
enum ExitCode { kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitUnreachable = 3 };

struct Options {
    enum class Command { Help, Version, Status, List, Wait } command = Command::Help;
    std::string socket = kDefaultSocket;
    std::string admin_socket;  // "" = admin_socket_for(socket) (common/agent_call.h)
    bool json = false;
    uint64_t timeout_s = 0;  // wait: 0 = the default (300 s); other commands: socket bound
    uint32_t job_id = 0;     // wait
};

// argv without the program name. InvalidArgument with a message that names
// the bad word and says `slurm-k8s --help`.
Result<Options> parse_args(const std::vector<std::string> &args);
// The socket a caller of effective uid `euid` talks to: root's is the admin
// socket, which no other user's connections can crowd; anyone else's the
// agent socket.
std::string socket_to_use(const Options &o, uint32_t euid);
std::string help_text();

// `list` reply body {"nodes":[NodeState...]} (and optional "version").
Result<std::vector<proto::NodeState>> nodes_from_list_reply(const Json::Value &body);
// A table: JOB USER NODE PHASE READY GPUS PODS, or "no virtual nodes on this node".
std::string format_list(const std::vector<proto::NodeState> &nodes);
// api: the list reply's "api" object (agent/kube/api_auth.h status()); null = no line.
std::string format_status(const std::string &socket, const std::string &agent_version,
                          const std::vector<proto::NodeState> &nodes,
                          const Json::Value &api = Json::Value());
// JSON output: the reply as is, one line.
std::string format_json(const Json::Value &v);

// wait: true when this node's virtual node for the job is Ready.
bool job_ready(const std::vector<proto::NodeState> &nodes, uint32_t job_id);

// Message and exit code for a failed call ("cannot reach the agent at ...").
std::string describe_failure(const std::string &socket, const Failure &f);
int exit_code_for(const Failure &f);

}  // namespace sk::cli
