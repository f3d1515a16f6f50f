// The JSON form of the plugin-agent messages (common/wire.h) and of the
// envelope (common/daemons/protocol.h), written once over a JSON backend J so that
// the agent (J = sk::json::Api, jsoncpp) and the SPANK plugin
// (J = sk::jsonc::Api, json-c, common/jsonc.h) read and write the same
// format: a --disable-daemons build (login nodes) needs no jsoncpp, and the
// two sides cannot drift apart (tests/unit/test_wire.cc crosses them).
//
// J provides: Value (an owning JSON value, null by default); parse(text)
// (strict, bounded depth) and write(v) (one line); builders object(),
// set(obj, key, child), of_string/of_uint/of_int/of_bool, from_ints,
// from_strings, from_map; readers is_object(v), member(obj, key) (a copy;
// null when absent), bool_member(obj, key) (set when present and a boolean),
// and the typed field readers get_string, opt_string, get_uint, opt_uint,
// opt_int, opt_bool, opt_string_list, opt_int_list, opt_string_map, whose
// messages name the field ("register: 'gpus' must be an array of integers").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/k8s_names.h"
#include "common/result.h"
#include "common/wire.h"

namespace sk::proto {

template <class J>
struct BasicRequest {
    uint64_t id = 0;
    std::string op;
    typename J::Value body = J::object();
};

template <class J>
struct BasicReply {
    uint64_t id = 0;
    bool ok = true;
    Error error = Error::Internal;  // when !ok
    std::string message;            // when !ok
    typename J::Value body = J::object();
};

template <class J>
struct Codec {
    using Value = typename J::Value;

    // ---- envelope ----
    //   request: {"v":1,"id":7,"op":"register","body":{...}}\n
    //   reply:   {"id":7,"ok":true,"body":{...}}\n
    //            {"id":7,"ok":false,"error":"forbidden","message":"..."}\n

    static std::string encode(const BasicRequest<J> &r) {
        Value v = J::object();
        J::set(v, "v", J::of_int(kVersion));
        J::set(v, "id", J::of_uint(r.id));
        J::set(v, "op", J::of_string(r.op));
        J::set(v, "body", r.body);
        return J::write(v) + "\n";
    }

    static std::string encode(const BasicReply<J> &r) {
        Value v = J::object();
        J::set(v, "id", J::of_uint(r.id));
        J::set(v, "ok", J::of_bool(r.ok));
        if (r.ok) {
            J::set(v, "body", r.body);
        } else {
            J::set(v, "error", J::of_string(to_string(r.error)));
            J::set(v, "message", J::of_string(r.message));
        }
        return J::write(v) + "\n";
    }

    // `max`: the line's bound (kMaxMessageBytes; an attached shim's link has
    // its own, common/daemons/shim_protocol.h).
    static Result<BasicRequest<J>> decode_request(std::string_view line,
                                                  size_t max = kMaxMessageBytes) {
        auto v = parse_envelope(line, max);
        if (!v) return v.failure();
        auto ver = J::opt_uint(*v, "v", "request", kVersion, 1000);
        if (!ver) return ver.failure();
        if (*ver != static_cast<uint64_t>(kVersion))
            return fail(Error::InvalidArgument, "protocol version " + std::to_string(*ver) +
                                                    " is not supported (this side speaks " +
                                                    std::to_string(kVersion) + ")");
        BasicRequest<J> r;
        auto id = J::get_uint(*v, "id", "request", UINT64_MAX);
        if (!id) return id.failure();
        r.id = *id;
        auto op = J::get_string(*v, "op", "request");
        if (!op) return op.failure();
        if (op->empty() || op->size() > 64)
            return fail(Error::Parse, "request: 'op' is empty or too long");
        r.op = std::move(*op);
        auto body = body_of(*v);
        if (!body) return body.failure();
        r.body = std::move(*body);
        return r;
    }

    static Result<BasicReply<J>> decode_reply(std::string_view line,
                                              size_t max = kMaxMessageBytes) {
        auto v = parse_envelope(line, max);
        if (!v) return v.failure();
        BasicReply<J> r;
        auto id = J::get_uint(*v, "id", "reply", UINT64_MAX);
        if (!id) return id.failure();
        r.id = *id;
        auto ok = J::bool_member(*v, "ok");
        if (!ok) return fail(Error::Parse, "reply: 'ok' must be true or false");
        r.ok = *ok;
        if (r.ok) {
            auto body = body_of(*v);
            if (!body) return body.failure();
            r.body = std::move(*body);
            return r;
        }
        auto err = J::get_string(*v, "error", "reply");
        if (!err) return err.failure();
        if (!error_from_string(*err, &r.error)) r.error = Error::Internal;
        auto msg = J::opt_string(*v, "message", "reply", {});
        if (!msg) return msg.failure();
        r.message = std::move(*msg);
        return r;
    }

    // ---- typed bodies ----

    static Value to_json(const RegisterRequest &r) {
        Value v = J::object();
        J::set(v, "job_id", J::of_uint(r.job_id));
        J::set(v, "slurm_node", J::of_string(r.slurm_node));
        J::set(v, "user", J::of_string(r.user));
        J::set(v, "uid", J::of_uint(r.uid));
        J::set(v, "gid", J::of_uint(r.gid));
        J::set(v, "partition", J::of_string(r.partition));
        J::set(v, "cluster", J::of_string(r.cluster));
        J::set(v, "gpus", J::from_ints(r.gpus));
        J::set(v, "cpus", J::of_uint(r.cpus));
        J::set(v, "memory_mib", J::of_uint(r.memory_mib));
        J::set(v, "labels", J::from_map(r.labels));
        std::vector<std::string> taints;
        for (const auto &t : r.taints)
            taints.push_back(k8s::format_taint(t));
        J::set(v, "taints", J::from_strings(taints));
        J::set(v, "namespaces", J::from_strings(r.namespaces));
        J::set(v, "end_time", J::of_int(r.end_time));
        if (r.drain_before_s >= 0) J::set(v, "drain_before_s", J::of_int(r.drain_before_s));
        if (!r.gpu_type.empty()) J::set(v, "gpu_type", J::of_string(r.gpu_type));
        if (r.array_job_id) {
            J::set(v, "array_job_id", J::of_uint(r.array_job_id));
            J::set(v, "array_task_id", J::of_uint(r.array_task_id));
        }
        if (r.het_job_id) {
            J::set(v, "het_job_id", J::of_uint(r.het_job_id));
            J::set(v, "het_offset", J::of_uint(r.het_offset));
        }
        return v;
    }

    static Result<RegisterRequest> register_from_json(const Value &v) {
        Failure f{Error::Internal, {}};
        constexpr std::string_view ctx = "register";
        RegisterRequest r;
        uint64_t n = 0;
        if (!take(&n, J::get_uint(v, "job_id", ctx, UINT32_MAX), &f)) return f;
        r.job_id = static_cast<uint32_t>(n);
        if (!take(&r.slurm_node, J::get_string(v, "slurm_node", ctx), &f)) return f;
        if (auto st = check_node_name(r.slurm_node, ctx); !st) return st.failure();
        if (!take(&r.user, J::get_string(v, "user", ctx), &f)) return f;
        if (!take(&n, J::get_uint(v, "uid", ctx, UINT32_MAX), &f)) return f;
        r.uid = static_cast<uint32_t>(n);
        if (!take(&n, J::opt_uint(v, "gid", ctx, 0, UINT32_MAX), &f)) return f;
        r.gid = static_cast<uint32_t>(n);
        if (!take(&r.partition, J::opt_string(v, "partition", ctx, {}), &f)) return f;
        if (!take(&r.cluster, J::opt_string(v, "cluster", ctx, {}), &f)) return f;
        if (!take(&r.gpus, J::opt_int_list(v, "gpus", ctx, kMaxGpuIndex), &f)) return f;
        if (!take(&n, J::opt_uint(v, "cpus", ctx, 0, 1u << 20), &f)) return f;
        r.cpus = static_cast<uint32_t>(n);
        if (!take(&r.memory_mib, J::opt_uint(v, "memory_mib", ctx, 0, 1ull << 40), &f)) return f;
        if (!take(&r.labels, J::opt_string_map(v, "labels", ctx), &f)) return f;
        for (const auto &[k, val] : r.labels)
            if (!k8s::is_qualified_name(k) || !k8s::is_label_value(val))
                return fail(Error::InvalidArgument,
                            "register: label '" + k + "=" + val + "' is invalid");
        std::vector<std::string> taints;
        if (!take(&taints, J::opt_string_list(v, "taints", ctx), &f)) return f;
        for (const auto &t : taints) {
            auto parsed = k8s::parse_taint(t);
            if (!parsed) return fail(Error::InvalidArgument, "register: " + parsed.message());
            r.taints.push_back(*parsed);
        }
        if (!take(&r.namespaces, J::opt_string_list(v, "namespaces", ctx), &f)) return f;
        for (const auto &ns : r.namespaces)
            if (!k8s::is_dns1123_label(ns))
                return fail(Error::InvalidArgument,
                            "register: namespace '" + ns + "' is not a valid name");
        if (!take(&r.end_time, J::opt_int(v, "end_time", ctx, 0), &f)) return f;
        if (!take(&r.drain_before_s, J::opt_int(v, "drain_before_s", ctx, -1), &f)) return f;
        if (r.drain_before_s < -1 || r.drain_before_s > 86400)
            return fail(Error::InvalidArgument,
                        "register: 'drain_before_s' must be 0-86400 seconds (or absent)");
        if (!take(&r.gpu_type, J::opt_string(v, "gpu_type", ctx, {}), &f)) return f;
        if (!r.gpu_type.empty() && !k8s::is_label_value(r.gpu_type))
            return fail(Error::InvalidArgument,
                        "register: 'gpu_type' '" + r.gpu_type + "' is not a label value");
        for (auto [name, field] :
             {std::pair{"array_job_id", &r.array_job_id},
              std::pair{"array_task_id", &r.array_task_id}, std::pair{"het_job_id", &r.het_job_id},
              std::pair{"het_offset", &r.het_offset}}) {
            if (!take(&n, J::opt_uint(v, name, ctx, 0, UINT32_MAX - 1), &f)) return f;
            *field = static_cast<uint32_t>(n);
        }
        return r;
    }

    static Value to_json(const RegisterReply &r) {
        Value v = J::object();
        J::set(v, "node_name", J::of_string(r.node_name));
        if (r.has_namespaces) J::set(v, "namespaces", J::from_strings(r.namespaces));
        return v;
    }

    static Result<RegisterReply> register_reply_from_json(const Value &v) {
        Failure f{Error::Internal, {}};
        RegisterReply r;
        if (!take(&r.node_name, J::get_string(v, "node_name", "register reply"), &f)) return f;
        r.has_namespaces = !J::is_null(J::member(v, "namespaces"));
        if (!take(&r.namespaces, J::opt_string_list(v, "namespaces", "register reply"), &f))
            return f;
        return r;
    }

    static Value to_json(const DeregisterRequest &r) {
        Value v = J::object();
        J::set(v, "job_id", J::of_uint(r.job_id));
        J::set(v, "slurm_node", J::of_string(r.slurm_node));
        J::set(v, "grace_s", J::of_uint(r.grace_s));
        J::set(v, "reason", J::of_string(r.reason));
        return v;
    }

    static Result<DeregisterRequest> deregister_from_json(const Value &v) {
        Failure f{Error::Internal, {}};
        constexpr std::string_view ctx = "deregister";
        DeregisterRequest r;
        uint64_t n = 0;
        if (!take(&n, J::get_uint(v, "job_id", ctx, UINT32_MAX), &f)) return f;
        r.job_id = static_cast<uint32_t>(n);
        if (!take(&r.slurm_node, J::get_string(v, "slurm_node", ctx), &f)) return f;
        if (auto st = check_node_name(r.slurm_node, ctx); !st) return st.failure();
        if (!take(&n, J::opt_uint(v, "grace_s", ctx, 30, 3600), &f)) return f;
        r.grace_s = static_cast<uint32_t>(n);
        if (!take(&r.reason, J::opt_string(v, "reason", ctx, "JobEnded"), &f)) return f;
        // The agent passes the reason on to the job's shim, whose decoder
        // knows only these (StopReason in common/daemons/shim_protocol.h).
        static constexpr std::string_view kDrainReasons[] = {
            "JobEnded",     "JobCancelled", "TimeLimit", "NodeFail",
            "JobCompleted", "JobFailed",    "Preempted", "Requeued"};
        bool known = false;
        for (std::string_view k : kDrainReasons)
            known = known || r.reason == k;
        if (!known)
            return fail(Error::Parse,
                        "deregister: 'reason' must be one of JobEnded, JobCancelled, "
                        "TimeLimit, NodeFail, JobCompleted, JobFailed, Preempted, Requeued");
        return r;
    }

    static Value to_json(const DeregisterReply &r) {
        Value v = J::object();
        J::set(v, "pods_stopped", J::of_uint(r.pods_stopped));
        return v;
    }

    static Result<DeregisterReply> deregister_reply_from_json(const Value &v) {
        Failure f{Error::Internal, {}};
        DeregisterReply r;
        uint64_t n = 0;
        if (!take(&n, J::opt_uint(v, "pods_stopped", "deregister reply", 0, UINT32_MAX), &f))
            return f;
        r.pods_stopped = static_cast<uint32_t>(n);
        return r;
    }

    static Value to_json(const JobKey &r) {
        Value v = J::object();
        J::set(v, "job_id", J::of_uint(r.job_id));
        J::set(v, "slurm_node", J::of_string(r.slurm_node));
        return v;
    }

    static Result<JobKey> job_key_from_json(const Value &v, std::string_view ctx) {
        Failure f{Error::Internal, {}};
        JobKey r;
        uint64_t n = 0;
        if (!take(&n, J::get_uint(v, "job_id", ctx, UINT32_MAX), &f)) return f;
        r.job_id = static_cast<uint32_t>(n);
        if (!take(&r.slurm_node, J::get_string(v, "slurm_node", ctx), &f)) return f;
        if (auto st = check_node_name(r.slurm_node, ctx); !st) return st.failure();
        return r;
    }

    static Value to_json(const NodeState &r) {
        Value v = J::object();
        J::set(v, "job_id", J::of_uint(r.job_id));
        J::set(v, "slurm_node", J::of_string(r.slurm_node));
        J::set(v, "node_name", J::of_string(r.node_name));
        J::set(v, "user", J::of_string(r.user));
        J::set(v, "phase", J::of_string(r.phase));
        J::set(v, "ready", J::of_bool(r.ready));
        J::set(v, "gpus", J::from_ints(r.gpus));
        J::set(v, "pods", J::of_uint(r.pods));
        if (!r.identity.empty()) J::set(v, "identity", J::of_string(r.identity));
        return v;
    }

    static Result<NodeState> node_state_from_json(const Value &v) {
        Failure f{Error::Internal, {}};
        constexpr std::string_view ctx = "node state";
        NodeState r;
        uint64_t n = 0;
        if (!take(&n, J::get_uint(v, "job_id", ctx, UINT32_MAX), &f)) return f;
        r.job_id = static_cast<uint32_t>(n);
        if (!take(&r.slurm_node, J::get_string(v, "slurm_node", ctx), &f)) return f;
        if (!take(&r.node_name, J::opt_string(v, "node_name", ctx, {}), &f)) return f;
        if (!take(&r.user, J::opt_string(v, "user", ctx, {}), &f)) return f;
        if (!take(&r.phase, J::opt_string(v, "phase", ctx, {}), &f)) return f;
        if (!take(&r.ready, J::opt_bool(v, "ready", ctx, false), &f)) return f;
        if (!take(&r.gpus, J::opt_int_list(v, "gpus", ctx, kMaxGpuIndex), &f)) return f;
        if (!take(&n, J::opt_uint(v, "pods", ctx, 0, UINT32_MAX), &f)) return f;
        r.pods = static_cast<uint32_t>(n);
        if (!take(&r.identity, J::opt_string(v, "identity", ctx, {}), &f)) return f;
        return r;
    }

  private:
    // Moves a field reader's value into *dst, or its failure into *f.
    template <class T, class U>
    static bool take(T *dst, Result<U> r, Failure *f) {
        if (!r) {
            *f = r.failure();
            return false;
        }
        *dst = std::move(*r);
        return true;
    }

    static Result<Value> parse_envelope(std::string_view line, size_t max) {
        if (line.size() > max)
            return fail(Error::TooLarge, "message of " + std::to_string(line.size()) +
                                             " bytes exceeds the limit of " + std::to_string(max));
        auto v = J::parse(line);
        if (!v) return v.failure();
        if (!J::is_object(*v)) return fail(Error::Parse, "message is not a JSON object");
        return v;
    }

    // An absent or null body is an empty object.
    static Result<Value> body_of(const Value &v) {
        Value b = J::member(v, "body");
        if (J::is_null(b)) return J::object();
        if (!J::is_object(b)) return fail(Error::Parse, "message: 'body' must be an object");
        return b;
    }
};

}  // namespace sk::proto
