// The agent socket protocol: newline-delimited JSON over a unix socket.
//
//   request: {"v":1,"id":7,"op":"register","body":{...}}\n
//   reply:   {"id":7,"ok":true,"body":{...}}\n
//            {"id":7,"ok":false,"error":"forbidden","message":"..."}\n
//
// Every request carries an id (from 1) that its reply repeats; an error reply
// of id 0 is the agent's word about the connection (refused, idle, an
// unreadable line) just before it closes it (docs/protocol.md). Who may send what is
// decided by the agent from SO_PEERCRED (root/SlurmUser: register, deregister,
// status, list; a job's shim: attach, then the pod stream). After a successful
// attach the connection carries agent->shim requests ("pod_run", "pod_kill",
// ...) and shim->agent notifications ("pod_status"), defined by the agent and
// shim on top of the same envelope. A message over kMaxMessageBytes, or one
// that is not valid JSON, closes that connection only; an attached shim's
// link has a larger bound and drops an oversized line instead
// (common/daemons/shim_protocol.h: kMaxShimMessageBytes).
//
// The plugin's messages (register, deregister, status, list) and the framing
// are in common/wire.h, free of jsoncpp; their JSON form and the envelope's
// are defined once in common/wire_codec.h, which this header instantiates
// over jsoncpp (the plugin instantiates it over json-c, common/plugin_wire.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <json/json.h>

#include "common/daemons/json.h"
#include "common/result.h"
#include "common/wire.h"
#include "common/wire_codec.h"

namespace sk::proto {

using Request = BasicRequest<json::Api>;
using Reply = BasicReply<json::Api>;

std::string encode(const Request &r);  // one line, with '\n'
std::string encode(const Reply &r);
// `max`: the line's bound; an attached shim's link passes kMaxShimMessageBytes
// (common/daemons/shim_protocol.h).
Result<Request> decode_request(std::string_view line, size_t max = kMaxMessageBytes);
Result<Reply> decode_reply(std::string_view line, size_t max = kMaxMessageBytes);
Reply error_reply(uint64_t id, const Failure &f);

// ---- attach: a shim binds its connection to its job ----
struct AttachRequest {
    uint32_t job_id = 0;
    std::string slurm_node;
};
struct AttachReply {
    std::string node_name;
    std::vector<int> gpus;
    std::string state_dir;  // where the shim keeps its own state (owned by the job user)
    // The agent places each container in its pod's own cgroup when the
    // container's supervisor asks (op cgroup_enter, common/cgroup/pod_cgroup.h):
    // the shim then tells every supervisor to ask (k8s-shim/supervise.h).
    bool pod_cgroups = false;
    // The node's image store (agent/images/image_store.h): the read-only
    // view of it the shim's podman reads as an additional image store, and
    // where it asks the agent to pull public images (image_pull); "" = none.
    std::string image_store;
    std::string image_store_mount_program;  // fuse-overlayfs, which reads it
};
// ---- cgroup_enter: a container's supervisor, on a connection of its own,
// asks to be moved into its pod's cgroup before it starts the command ----
struct CgroupEnter {
    std::string pod_uid;
    std::vector<int> gpus;  // the pod's GPUs (node indices): the others are denied
    // The container (its name in the pod's spec) whose supervisor asks: its
    // own cgroup below the pod's, with its own limits (common/cgroup/pod_cgroup.h).
    std::string container;
};

Json::Value to_json(const RegisterRequest &r);
Json::Value to_json(const RegisterReply &r);
Json::Value to_json(const DeregisterRequest &r);
Json::Value to_json(const DeregisterReply &r);
Json::Value to_json(const JobKey &r);
Json::Value to_json(const NodeState &r);
Json::Value to_json(const AttachRequest &r);
Json::Value to_json(const AttachReply &r);
Json::Value to_json(const CgroupEnter &r);

Result<RegisterRequest> register_from_json(const Json::Value &v);
Result<RegisterReply> register_reply_from_json(const Json::Value &v);
Result<DeregisterRequest> deregister_from_json(const Json::Value &v);
Result<DeregisterReply> deregister_reply_from_json(const Json::Value &v);
Result<JobKey> job_key_from_json(const Json::Value &v, std::string_view ctx);
Result<NodeState> node_state_from_json(const Json::Value &v);
Result<AttachRequest> attach_from_json(const Json::Value &v);
Result<AttachReply> attach_reply_from_json(const Json::Value &v);
Result<CgroupEnter> cgroup_enter_from_json(const Json::Value &v);

}  // namespace sk::proto
