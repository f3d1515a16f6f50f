#include "common/protocol.h"

#include "common/json.h"
#include "common/shim_protocol.h"
#include "common/strings.h"

namespace sk::proto {

using json::opt_int;
using json::opt_int_list;
using json::opt_string;
using json::opt_string_list;
using json::opt_string_map;
using json::opt_uint;

std::string encode(const Request &r) {
    Json::Value v(Json::objectValue);
    v["v"] = kVersion;
    v["id"] = Json::UInt64(r.id);
    v["op"] = r.op;
    v["body"] = r.body;
    return json::write(v) + "\n";
}

std::string encode(const Reply &r) {
    Json::Value v(Json::objectValue);
    v["id"] = Json::UInt64(r.id);
    v["ok"] = r.ok;
    if (r.ok) {
        v["body"] = r.body;
    } else {
        v["error"] = std::string(to_string(r.error));
        v["message"] = r.message;
    }
    return json::write(v) + "\n";
}

Reply error_reply(uint64_t id, const Failure &f) {
    Reply r;
    r.id = id;
    r.ok = false;
    r.error = f.code;
    r.message = f.message;
    return r;
}

static Result<Json::Value> parse_envelope(std::string_view line) {
    if (line.size() > kMaxMessageBytes)
        return fail(Error::TooLarge, "message of " + std::to_string(line.size()) +
                                         " bytes exceeds the limit of " +
                                         std::to_string(kMaxMessageBytes));
    auto v = json::parse(line);
    if (!v) return v.failure();
    if (!v->isObject()) return fail(Error::Parse, "message is not a JSON object");
    return v;
}

static Result<Json::Value> body_of(const Json::Value &v) {
    if (!v.isMember("body") || v["body"].isNull()) return Json::Value(Json::objectValue);
    if (!v["body"].isObject()) return fail(Error::Parse, "message: 'body' must be an object");
    return v["body"];
}

Result<Request> decode_request(std::string_view line) {
    auto v = parse_envelope(line);
    if (!v) return v.failure();
    auto ver = opt_uint(*v, "v", "request", kVersion, 1000);
    if (!ver) return ver.failure();
    if (*ver != kVersion)
        return fail(Error::InvalidArgument, "protocol version " + std::to_string(*ver) +
                                                " is not supported (this side speaks " +
                                                std::to_string(kVersion) + ")");
    Request r;
    auto id = json::get_uint(*v, "id", "request");
    if (!id) return id.failure();
    r.id = *id;
    auto op = json::get_string(*v, "op", "request");
    if (!op) return op.failure();
    if (op->empty() || op->size() > 64)
        return fail(Error::Parse, "request: 'op' is empty or too long");
    r.op = *op;
    auto body = body_of(*v);
    if (!body) return body.failure();
    r.body = std::move(*body);
    return r;
}

Result<Reply> decode_reply(std::string_view line) {
    auto v = parse_envelope(line);
    if (!v) return v.failure();
    Reply r;
    auto id = json::get_uint(*v, "id", "reply");
    if (!id) return id.failure();
    r.id = *id;
    if (!v->isMember("ok") || !(*v)["ok"].isBool())
        return fail(Error::Parse, "reply: 'ok' must be true or false");
    r.ok = (*v)["ok"].asBool();
    if (r.ok) {
        auto body = body_of(*v);
        if (!body) return body.failure();
        r.body = std::move(*body);
        return r;
    }
    auto err = json::get_string(*v, "error", "reply");
    if (!err) return err.failure();
    if (!error_from_string(*err, &r.error)) r.error = Error::Internal;
    auto msg = opt_string(*v, "message", "reply");
    if (!msg) return msg.failure();
    r.message = *msg;
    return r;
}

// ---- typed bodies ----

#define TRY_ASSIGN(dst, expr)         \
    do {                              \
        auto _r = (expr);             \
        if (!_r) return _r.failure(); \
        (dst) = std::move(*_r);       \
    } while (0)

static Status check_node_name(const std::string &n, std::string_view ctx) {
    if (n.empty() || n.size() > 128)
        return fail(Error::Parse, std::string(ctx) + ": 'slurm_node' must be 1..128 characters");
    for (char c : n)
        if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
            return fail(Error::Parse, std::string(ctx) + ": 'slurm_node' has invalid characters");
    return {};
}

Json::Value to_json(const RegisterRequest &r) {
    Json::Value v(Json::objectValue);
    v["job_id"] = r.job_id;
    v["slurm_node"] = r.slurm_node;
    v["user"] = r.user;
    v["uid"] = r.uid;
    v["gid"] = r.gid;
    v["partition"] = r.partition;
    v["cluster"] = r.cluster;
    v["gpus"] = json::from_ints(r.gpus);
    v["cpus"] = r.cpus;
    v["memory_mib"] = Json::UInt64(r.memory_mib);
    v["labels"] = json::from_map(r.labels);
    Json::Value taints(Json::arrayValue);
    for (const auto &t : r.taints)
        taints.append(k8s::format_taint(t));
    v["taints"] = taints;
    v["namespaces"] = json::from_strings(r.namespaces);
    v["end_time"] = Json::Int64(r.end_time);
    return v;
}

Result<RegisterRequest> register_from_json(const Json::Value &v) {
    constexpr std::string_view ctx = "register";
    RegisterRequest r;
    uint64_t n;
    TRY_ASSIGN(n, json::get_uint(v, "job_id", ctx, UINT32_MAX));
    r.job_id = static_cast<uint32_t>(n);
    TRY_ASSIGN(r.slurm_node, json::get_string(v, "slurm_node", ctx));
    if (auto st = check_node_name(r.slurm_node, ctx); !st) return st.failure();
    TRY_ASSIGN(r.user, json::get_string(v, "user", ctx));
    TRY_ASSIGN(n, json::get_uint(v, "uid", ctx, UINT32_MAX));
    r.uid = static_cast<uint32_t>(n);
    TRY_ASSIGN(n, opt_uint(v, "gid", ctx, 0, UINT32_MAX));
    r.gid = static_cast<uint32_t>(n);
    TRY_ASSIGN(r.partition, opt_string(v, "partition", ctx));
    TRY_ASSIGN(r.cluster, opt_string(v, "cluster", ctx));
    TRY_ASSIGN(r.gpus, opt_int_list(v, "gpus", ctx, kMaxGpuIndex));
    TRY_ASSIGN(n, opt_uint(v, "cpus", ctx, 0, 1u << 20));
    r.cpus = static_cast<uint32_t>(n);
    TRY_ASSIGN(r.memory_mib, opt_uint(v, "memory_mib", ctx, 0, 1ull << 40));
    TRY_ASSIGN(r.labels, opt_string_map(v, "labels", ctx));
    for (const auto &[k, val] : r.labels)
        if (!k8s::is_qualified_name(k) || !k8s::is_label_value(val))
            return fail(Error::InvalidArgument,
                        "register: label '" + k + "=" + val + "' is invalid");
    std::vector<std::string> taints;
    TRY_ASSIGN(taints, opt_string_list(v, "taints", ctx));
    for (const auto &t : taints) {
        auto parsed = k8s::parse_taint(t);
        if (!parsed) return fail(Error::InvalidArgument, "register: " + parsed.message());
        r.taints.push_back(*parsed);
    }
    TRY_ASSIGN(r.namespaces, opt_string_list(v, "namespaces", ctx));
    for (const auto &ns : r.namespaces)
        if (!k8s::is_dns1123_label(ns))
            return fail(Error::InvalidArgument,
                        "register: namespace '" + ns + "' is not a valid name");
    TRY_ASSIGN(r.end_time, opt_int(v, "end_time", ctx, 0));
    return r;
}

Json::Value to_json(const RegisterReply &r) {
    Json::Value v(Json::objectValue);
    v["node_name"] = r.node_name;
    return v;
}

Result<RegisterReply> register_reply_from_json(const Json::Value &v) {
    RegisterReply r;
    TRY_ASSIGN(r.node_name, json::get_string(v, "node_name", "register reply"));
    return r;
}

Json::Value to_json(const DeregisterRequest &r) {
    Json::Value v(Json::objectValue);
    v["job_id"] = r.job_id;
    v["slurm_node"] = r.slurm_node;
    v["grace_s"] = r.grace_s;
    v["reason"] = r.reason;
    return v;
}

Result<DeregisterRequest> deregister_from_json(const Json::Value &v) {
    constexpr std::string_view ctx = "deregister";
    DeregisterRequest r;
    uint64_t n;
    TRY_ASSIGN(n, json::get_uint(v, "job_id", ctx, UINT32_MAX));
    r.job_id = static_cast<uint32_t>(n);
    TRY_ASSIGN(r.slurm_node, json::get_string(v, "slurm_node", ctx));
    if (auto st = check_node_name(r.slurm_node, ctx); !st) return st.failure();
    TRY_ASSIGN(n, opt_uint(v, "grace_s", ctx, 30, 3600));
    r.grace_s = static_cast<uint32_t>(n);
    TRY_ASSIGN(r.reason, opt_string(v, "reason", ctx, "JobEnded"));
    // The agent passes the reason on to the job's shim (common/shim_protocol.h).
    auto why = stop_reason_from_string(r.reason, "deregister: 'reason'");
    if (!why || !is_drain_reason(*why))
        return fail(Error::Parse,
                    "deregister: 'reason' must be one of JobEnded, JobCancelled, "
                    "TimeLimit, NodeFail");
    return r;
}

Json::Value to_json(const DeregisterReply &r) {
    Json::Value v(Json::objectValue);
    v["pods_stopped"] = r.pods_stopped;
    return v;
}

Result<DeregisterReply> deregister_reply_from_json(const Json::Value &v) {
    DeregisterReply r;
    uint64_t n;
    TRY_ASSIGN(n, opt_uint(v, "pods_stopped", "deregister reply", 0, UINT32_MAX));
    r.pods_stopped = static_cast<uint32_t>(n);
    return r;
}

Json::Value to_json(const JobKey &r) {
    Json::Value v(Json::objectValue);
    v["job_id"] = r.job_id;
    v["slurm_node"] = r.slurm_node;
    return v;
}

Result<JobKey> job_key_from_json(const Json::Value &v, std::string_view ctx) {
    JobKey r;
    uint64_t n;
    TRY_ASSIGN(n, json::get_uint(v, "job_id", ctx, UINT32_MAX));
    r.job_id = static_cast<uint32_t>(n);
    TRY_ASSIGN(r.slurm_node, json::get_string(v, "slurm_node", ctx));
    if (auto st = check_node_name(r.slurm_node, ctx); !st) return st.failure();
    return r;
}

Json::Value to_json(const NodeState &r) {
    Json::Value v(Json::objectValue);
    v["job_id"] = r.job_id;
    v["slurm_node"] = r.slurm_node;
    v["node_name"] = r.node_name;
    v["user"] = r.user;
    v["phase"] = r.phase;
    v["ready"] = r.ready;
    v["gpus"] = json::from_ints(r.gpus);
    v["pods"] = r.pods;
    return v;
}

Result<NodeState> node_state_from_json(const Json::Value &v) {
    constexpr std::string_view ctx = "node state";
    NodeState r;
    uint64_t n;
    TRY_ASSIGN(n, json::get_uint(v, "job_id", ctx, UINT32_MAX));
    r.job_id = static_cast<uint32_t>(n);
    TRY_ASSIGN(r.slurm_node, json::get_string(v, "slurm_node", ctx));
    TRY_ASSIGN(r.node_name, opt_string(v, "node_name", ctx));
    TRY_ASSIGN(r.user, opt_string(v, "user", ctx));
    TRY_ASSIGN(r.phase, opt_string(v, "phase", ctx));
    TRY_ASSIGN(r.ready, json::opt_bool(v, "ready", ctx, false));
    TRY_ASSIGN(r.gpus, opt_int_list(v, "gpus", ctx, kMaxGpuIndex));
    TRY_ASSIGN(n, opt_uint(v, "pods", ctx, 0, UINT32_MAX));
    r.pods = static_cast<uint32_t>(n);
    return r;
}

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
    return v;
}

Result<AttachReply> attach_reply_from_json(const Json::Value &v) {
    constexpr std::string_view ctx = "attach reply";
    AttachReply r;
    TRY_ASSIGN(r.node_name, json::get_string(v, "node_name", ctx));
    TRY_ASSIGN(r.gpus, opt_int_list(v, "gpus", ctx, kMaxGpuIndex));
    TRY_ASSIGN(r.state_dir, opt_string(v, "state_dir", ctx));
    return r;
}

// ---- framing ----

Status LineBuffer::feed(const char *data, size_t len) {
    if (pos_ > 0 && (pos_ == buf_.size() || pos_ > 65536)) {
        buf_.erase(0, pos_);
        line_start_ -= pos_;
        pos_ = 0;
    }
    size_t scan = buf_.size();
    buf_.append(data, len);
    for (size_t nl = buf_.find('\n', scan); nl != std::string::npos; nl = buf_.find('\n', nl + 1)) {
        if (nl - line_start_ > max_)
            return fail(Error::TooLarge, "message exceeds " + std::to_string(max_) + " bytes");
        line_start_ = nl + 1;
    }
    if (buf_.size() - line_start_ > max_)
        return fail(Error::TooLarge, "message exceeds " + std::to_string(max_) + " bytes");
    return {};
}

std::optional<std::string> LineBuffer::next() {
    size_t nl = buf_.find('\n', pos_);
    if (nl == std::string::npos) return std::nullopt;
    std::string line = buf_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
}

}  // namespace sk::proto
