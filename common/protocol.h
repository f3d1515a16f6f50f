// The agent socket protocol: newline-delimited JSON over a unix socket.
//
//   request: {"v":1,"id":7,"op":"register","body":{...}}\n
//   reply:   {"id":7,"ok":true,"body":{...}}\n
//            {"id":7,"ok":false,"error":"forbidden","message":"..."}\n
//
// Every request carries an id that its reply repeats. Who may send what is
// decided by the agent from SO_PEERCRED (root/SlurmUser: register, deregister,
// status, list; a job's shim: attach, then the pod stream). After a successful
// attach the connection carries agent->shim requests ("pod_run", "pod_kill",
// ...) and shim->agent notifications ("pod_status"), defined in
// common/shim_protocol.h on top of the same envelope (docs/protocol.md). A
// message over kMaxMessageBytes, or one that is not valid JSON, closes that
// connection only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <json/json.h>

#include "common/k8s_names.h"
#include "common/result.h"

namespace sk::proto {

constexpr int kVersion = 1;
constexpr size_t kMaxMessageBytes = 1 << 20;
constexpr int kMaxGpuIndex = 1023;

struct Request {
    uint64_t id = 0;
    std::string op;
    Json::Value body{Json::objectValue};
};

struct Reply {
    uint64_t id = 0;
    bool ok = true;
    Error error = Error::Internal;  // when !ok
    std::string message;            // when !ok
    Json::Value body{Json::objectValue};
};

std::string encode(const Request &r);  // one line, with '\n'
std::string encode(const Reply &r);
Result<Request> decode_request(std::string_view line);
Result<Reply> decode_reply(std::string_view line);
Reply error_reply(uint64_t id, const Failure &f);

// ---- register: one (job, slurm node) pair lent to Kubernetes ----
struct RegisterRequest {
    uint32_t job_id = 0;
    std::string slurm_node;  // SLURMD_NODENAME
    std::string user;
    uint32_t uid = 0, gid = 0;
    std::string partition;
    std::string cluster;
    std::vector<int> gpus;  // lent GPU indices (as Slurm numbers them on the node)
    uint32_t cpus = 0;      // 0: no CPU capacity advertised beyond what pods request
    uint64_t memory_mib = 0;
    std::map<std::string, std::string> labels;  // the user's --k8s-labels
    std::vector<k8s::Taint> taints;             // the job's taints (default included)
    std::vector<std::string> namespaces;        // allowed namespaces, empty = site default
    int64_t end_time = 0;                       // unix seconds, 0 = unknown
};
struct RegisterReply {
    std::string node_name;  // the virtual node's name in Kubernetes
};

// ---- deregister: the job ended on this node ----
struct DeregisterRequest {
    uint32_t job_id = 0;
    std::string slurm_node;
    uint32_t grace_s = 30;  // budget for stopping pods
    std::string reason;     // "JobEnded", "JobCancelled", "TimeLimit", "NodeFail" (checked)
};
struct DeregisterReply {
    uint32_t pods_stopped = 0;
};

// ---- status / list ----
struct JobKey {
    uint32_t job_id = 0;
    std::string slurm_node;
};
struct NodeState {
    uint32_t job_id = 0;
    std::string slurm_node, node_name, user, phase;  // phase: registering|ready|draining
    bool ready = false;
    std::vector<int> gpus;
    uint32_t pods = 0;
};

// ---- attach: a shim binds its connection to its job ----
struct AttachRequest {
    uint32_t job_id = 0;
    std::string slurm_node;
};
struct AttachReply {
    std::string node_name;
    std::vector<int> gpus;
    std::string state_dir;  // where the shim keeps its own state (owned by the job user)
};

Json::Value to_json(const RegisterRequest &r);
Json::Value to_json(const RegisterReply &r);
Json::Value to_json(const DeregisterRequest &r);
Json::Value to_json(const DeregisterReply &r);
Json::Value to_json(const JobKey &r);
Json::Value to_json(const NodeState &r);
Json::Value to_json(const AttachRequest &r);
Json::Value to_json(const AttachReply &r);

Result<RegisterRequest> register_from_json(const Json::Value &v);
Result<RegisterReply> register_reply_from_json(const Json::Value &v);
Result<DeregisterRequest> deregister_from_json(const Json::Value &v);
Result<DeregisterReply> deregister_reply_from_json(const Json::Value &v);
Result<JobKey> job_key_from_json(const Json::Value &v, std::string_view ctx);
Result<NodeState> node_state_from_json(const Json::Value &v);
Result<AttachRequest> attach_from_json(const Json::Value &v);
Result<AttachReply> attach_reply_from_json(const Json::Value &v);

// Splits a byte stream into lines; refuses a line longer than the bound.
class LineBuffer {
  public:
    explicit LineBuffer(size_t max_line = kMaxMessageBytes) : max_(max_line) {}
    // Appends bytes; fails with TooLarge when an unterminated line exceeds the bound.
    Status feed(const char *data, size_t len);
    // Next complete line without its '\n'.
    std::optional<std::string> next();
    size_t buffered() const { return buf_.size() - pos_; }

  private:
    std::string buf_;
    size_t pos_ = 0;         // start of the next unread line
    size_t line_start_ = 0;  // start of the line being received
    size_t max_;
};

}  // namespace sk::proto
