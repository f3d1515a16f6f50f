// The plugin-agent messages and the socket framing, free of any JSON library:
// the SPANK plugin (built by --disable-daemons without jsoncpp) and the agent
// share these types. Their JSON form is defined once, in
// common/wire_codec.h, for both JSON backends (common/daemons/json.h for the agent
// and the CLI, common/jsonc.h for the plugin). The envelope and who may send
// what: common/daemons/protocol.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/k8s_names.h"
#include "common/result.h"

namespace sk::proto {

constexpr int kVersion = 1;
constexpr size_t kMaxMessageBytes = 1 << 20;
constexpr int kMaxGpuIndex = 1023;

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
    // --k8s-drain-before: pods stopped this long before end_time; -1 = the
    // agent's drain_before_end.
    int64_t drain_before_s = -1;
    // The Slurm GPU type (gres.conf Type=) all lent GPUs share, "" when
    // untyped or mixed: the Node's nvidia.com/gpu.product label.
    std::string gpu_type;
    // A job array's task (array_job_id != 0) or a heterogeneous job's
    // component (het_job_id != 0): the ids a user selects the whole array or
    // het job by (Node labels slurm-k8s/array-*, slurm-k8s/het-*).
    uint32_t array_job_id = 0, array_task_id = 0;
    uint32_t het_job_id = 0, het_offset = 0;
};
struct RegisterReply {
    std::string node_name;  // the virtual node's name in Kubernetes
    // The namespaces whose pods may run there: the job's own list, else the
    // site's default (agent.conf allowed_namespaces); ["*"] = any, [] = none.
    // has_namespaces: the agent said (an older agent's reply has no list).
    std::vector<std::string> namespaces;
    bool has_namespaces = false;
};

// ---- deregister: the job ended on this node ----
struct DeregisterRequest {
    uint32_t job_id = 0;
    std::string slurm_node;
    uint32_t grace_s = 30;  // budget for stopping pods
    std::string reason;     // a drain StopReason (common/daemons/shim_protocol.h), checked
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
    // node_identity = bootstrap: "system:node:<node>, certificate until
    // <RFC 3339>" (or what is wrong with it); impersonate: "system:node:<node>,
    // impersonated with the agent's credential"; "" = the agent's own identity.
    std::string identity;
};

// A Slurm node name as a message may carry it: 1..128 of [A-Za-z0-9._-].
// `ctx` prefixes the message.
Status check_node_name(const std::string &n, std::string_view ctx);

// Splits a byte stream into lines; refuses a line longer than the bound.
// A line over the bound is dropped whole: feed() fails with TooLarge once
// for it (when it crosses the bound), its bytes are discarded up to and
// including its '\n' without being buffered, and the lines before and after
// it are delivered as usual. A caller may therefore close the stream on
// TooLarge (an unauthenticated peer) or carry on with the next line (an
// attached shim's link, docs/protocol.md), and memory stays within the bound.
class LineBuffer {
  public:
    explicit LineBuffer(size_t max_line = kMaxMessageBytes) : max_(max_line) {}
    // Appends bytes; fails with TooLarge when a line exceeds the bound.
    Status feed(const char *data, size_t len);
    // Next complete line without its '\n'.
    std::optional<std::string> next();
    size_t buffered() const { return buf_.size() - pos_; }
    // The bytes after the last line next() returned (the start of whatever
    // follows the lines on the stream), which the buffer forgets.
    std::string take_rest();
    // Changes the bound for the lines still to come (the line being received
    // included).
    void set_max(size_t max_line) { max_ = max_line; }
    size_t max() const { return max_; }

  private:
    std::string buf_;
    size_t pos_ = 0;         // start of the next unread line
    size_t line_start_ = 0;  // start of the line being received
    size_t max_;
    bool skipping_ = false;  // inside a dropped line, until its '\n'
};

}  // namespace sk::proto
