#include "common/daemons/protocol.h"

#include "common/daemons/json.h"
#include "common/k8s_names.h"

namespace sk::proto {

using json::opt_int_list;
using json::opt_string;
using AgentCodec = Codec<json::Api>;

std::string encode(const Request &r) {
    return AgentCodec::encode(r);
}
std::string encode(const Reply &r) {
    return AgentCodec::encode(r);
}
Result<Request> decode_request(std::string_view line, size_t max) {
    return AgentCodec::decode_request(line, max);
}
Result<Reply> decode_reply(std::string_view line, size_t max) {
    return AgentCodec::decode_reply(line, max);
}

Reply error_reply(uint64_t id, const Failure &f) {
    Reply r;
    r.id = id;
    r.ok = false;
    r.error = f.code;
    r.message = f.message;
    return r;
}

// ---- the plugin's bodies: common/wire_codec.h ----

Json::Value to_json(const RegisterRequest &r) {
    return AgentCodec::to_json(r);
}
Json::Value to_json(const RegisterReply &r) {
    return AgentCodec::to_json(r);
}
Json::Value to_json(const DeregisterRequest &r) {
    return AgentCodec::to_json(r);
}
Json::Value to_json(const DeregisterReply &r) {
    return AgentCodec::to_json(r);
}
Json::Value to_json(const JobKey &r) {
    return AgentCodec::to_json(r);
}
Json::Value to_json(const NodeState &r) {
    return AgentCodec::to_json(r);
}

Result<RegisterRequest> register_from_json(const Json::Value &v) {
    return AgentCodec::register_from_json(v);
}
Result<RegisterReply> register_reply_from_json(const Json::Value &v) {
    return AgentCodec::register_reply_from_json(v);
}
Result<DeregisterRequest> deregister_from_json(const Json::Value &v) {
    return AgentCodec::deregister_from_json(v);
}
Result<DeregisterReply> deregister_reply_from_json(const Json::Value &v) {
    return AgentCodec::deregister_reply_from_json(v);
}
Result<JobKey> job_key_from_json(const Json::Value &v, std::string_view ctx) {
    return AgentCodec::job_key_from_json(v, ctx);
}
Result<NodeState> node_state_from_json(const Json::Value &v) {
    return AgentCodec::node_state_from_json(v);
}

// ---- attach: the shim's side only ----

Json::Value to_json(const AttachRequest &r) {
    Json::Value v(Json::objectValue);
    v["job_id"] = r.job_id;
    v["slurm_node"] = r.slurm_node;
    return v;
}

Result<AttachRequest> attach_from_json(const Json::Value &v) {
    auto k = job_key_from_json(v, "attach");
    if (!k) return k.failure();
    return AttachRequest{k->job_id, k->slurm_node};
}

Json::Value to_json(const AttachReply &r) {
    Json::Value v(Json::objectValue);
    v["node_name"] = r.node_name;
    v["gpus"] = json::from_ints(r.gpus);
    v["state_dir"] = r.state_dir;
    if (r.pod_cgroups) v["pod_cgroups"] = true;
    if (!r.image_store.empty()) {
        v["image_store"] = r.image_store;
        v["image_store_mount_program"] = r.image_store_mount_program;
    }
    return v;
}

Json::Value to_json(const CgroupEnter &r) {
    Json::Value v(Json::objectValue);
    v["pod_uid"] = r.pod_uid;
    v["gpus"] = json::from_ints(r.gpus);
    v["container"] = r.container;
    return v;
}

Result<CgroupEnter> cgroup_enter_from_json(const Json::Value &v) {
    constexpr std::string_view ctx = "cgroup_enter";
    CgroupEnter r;
    SK_TRY_ASSIGN(r.pod_uid, json::get_string(v, "pod_uid", ctx));
    SK_TRY_ASSIGN(r.gpus, opt_int_list(v, "gpus", ctx, kMaxGpuIndex));
    SK_TRY_ASSIGN(r.container, json::get_string(v, "container", ctx));
    if (!k8s::is_dns1123_label(r.container))
        return fail(Error::InvalidArgument,
                    "cgroup_enter: container '" + r.container.substr(0, 80) +
                        "' is no container name (a DNS label: a-z, 0-9, '-', at most 63)");
    return r;
}

Result<AttachReply> attach_reply_from_json(const Json::Value &v) {
    constexpr std::string_view ctx = "attach reply";
    AttachReply r;
    SK_TRY_ASSIGN(r.node_name, json::get_string(v, "node_name", ctx));
    SK_TRY_ASSIGN(r.gpus, opt_int_list(v, "gpus", ctx, kMaxGpuIndex));
    SK_TRY_ASSIGN(r.state_dir, opt_string(v, "state_dir", ctx));
    SK_TRY_ASSIGN(r.pod_cgroups, json::opt_bool(v, "pod_cgroups", ctx, false));
    SK_TRY_ASSIGN(r.image_store, opt_string(v, "image_store", ctx));
    SK_TRY_ASSIGN(r.image_store_mount_program, opt_string(v, "image_store_mount_program", ctx));
    if (!r.image_store.empty() && (r.image_store[0] != '/' || r.image_store_mount_program.empty() ||
                                   r.image_store_mount_program[0] != '/'))
        return fail(Error::InvalidArgument,
                    "attach reply: 'image_store' and 'image_store_mount_program' must be "
                    "absolute paths");
    return r;
}

}  // namespace sk::proto
