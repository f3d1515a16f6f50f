#include "common/daemons/shim_protocol.h"

#include <array>
#include <utility>

#include "common/daemons/base64.h"
#include "common/daemons/image_ref.h"
#include "common/daemons/json.h"

namespace sk::proto {

namespace {

template <typename E, size_t N>
using Names = std::array<std::pair<E, std::string_view>, N>;

constexpr Names<ShimOp, 14> kOps{{
    {ShimOp::PodRun, "pod_run"},
    {ShimOp::PodKill, "pod_kill"},
    {ShimOp::PodList, "pod_list"},
    {ShimOp::Shutdown, "shutdown"},
    {ShimOp::PodStatus, "pod_status"},
    {ShimOp::ExecStart, "exec_start"},
    {ShimOp::ExecAttach, "exec_attach"},
    {ShimOp::AttachStart, "attach_start"},
    {ShimOp::PodStats, "pod_stats"},
    {ShimOp::PodsPause, "pods_pause"},
    {ShimOp::PodFiles, "pod_files"},
    {ShimOp::ImagePull, "image_pull"},
    {ShimOp::ImagePullCancel, "image_pull_cancel"},
    {ShimOp::PodSandbox, "pod_sandbox"},
}};

constexpr Names<StatsSource, 2> kStatsSources{{
    {StatsSource::Cgroup, "cgroup"},
    {StatsSource::Pods, "pods"},
}};

constexpr Names<StopReason, 12> kReasons{{
    {StopReason::Killing, "Killing"},
    {StopReason::Deleted, "Deleted"},
    {StopReason::Orphaned, "Orphaned"},
    {StopReason::JobEnded, "JobEnded"},
    {StopReason::JobCancelled, "JobCancelled"},
    {StopReason::TimeLimit, "TimeLimit"},
    {StopReason::NodeFail, "NodeFail"},
    {StopReason::JobCompleted, "JobCompleted"},
    {StopReason::JobFailed, "JobFailed"},
    {StopReason::Preempted, "Preempted"},
    {StopReason::Requeued, "Requeued"},
    {StopReason::Shutdown, "Shutdown"},
}};

constexpr Names<EventType, 2> kEventTypes{{
    {EventType::Normal, "Normal"},
    {EventType::Warning, "Warning"},
}};

template <typename E, size_t N>
std::string_view name_of(const Names<E, N> &names, E e) noexcept {
    for (const auto &[value, name] : names)
        if (value == e) return name;
    return "?";
}

template <typename E, size_t N>
Result<E> value_of(const Names<E, N> &names, std::string_view s, std::string_view field) {
    std::string accepted;
    for (const auto &[value, name] : names) {
        if (name == s) return value;
        accepted += (accepted.empty() ? "" : ", ") + std::string(name);
    }
    return fail(Error::Parse, std::string(field) + " '" + std::string(s).substr(0, 64) +
                                  "' is not one of " + accepted);
}

std::string field_name(std::string_view ctx, const char *key) {
    return std::string(ctx) + ": '" + key + "'";
}

// A string field of at most max bytes.
Result<std::string> bounded(Result<std::string> r, std::string_view ctx, const char *key,
                            size_t max) {
    if (r && r->size() > max)
        return fail(Error::Parse,
                    field_name(ctx, key) + " is longer than " + std::to_string(max) + " bytes");
    return r;
}

// A pod uid names a directory in the shim's state: never empty, no '/', no
// leading '.' (no "." or "..").
Status check_uid(const std::string &uid, std::string_view ctx, const char *key) {
    if (uid.empty() || uid.size() > kMaxUidBytes || uid.find('/') != std::string::npos ||
        uid[0] == '.' || uid.find('\0') != std::string::npos)
        return fail(Error::Parse, field_name(ctx, key) + " must be 1.." +
                                      std::to_string(kMaxUidBytes) +
                                      " bytes without '/' or a leading '.'");
    return {};
}

Result<std::string> uid_field(const Json::Value &v, std::string_view ctx) {
    auto uid = json::get_string(v, "uid", ctx);
    if (!uid) return uid;
    if (auto st = check_uid(*uid, ctx, "uid"); !st) return st.failure();
    return uid;
}

Result<StopReason> reason_field(const Json::Value &v, std::string_view ctx, StopReason dflt) {
    auto s = json::opt_string(v, "reason", ctx, std::string(to_string(dflt)));
    if (!s) return s.failure();
    return stop_reason_from_string(*s, field_name(ctx, "reason"));
}

Result<uint32_t> grace_field(const Json::Value &v, std::string_view ctx) {
    auto n = json::opt_uint(v, "grace_s", ctx, 30, kMaxGraceSeconds);
    if (!n) return n.failure();
    return static_cast<uint32_t>(*n);
}

Failure invalid_run(const Failure &f) {
    return fail(Error::Invalid, f.message);
}

}  // namespace

std::string_view to_string(ShimOp op) noexcept {
    return name_of(kOps, op);
}
std::string_view to_string(StopReason r) noexcept {
    return name_of(kReasons, r);
}
std::string_view to_string(EventType t) noexcept {
    return name_of(kEventTypes, t);
}
std::string_view to_string(StatsSource s) noexcept {
    return name_of(kStatsSources, s);
}
Result<ShimOp> shim_op_from_string(std::string_view s, std::string_view field) {
    return value_of(kOps, s, field);
}
Result<StopReason> stop_reason_from_string(std::string_view s, std::string_view field) {
    return value_of(kReasons, s, field);
}
Result<EventType> event_type_from_string(std::string_view s, std::string_view field) {
    return value_of(kEventTypes, s, field);
}

bool is_drain_reason(StopReason r) noexcept {
    return r == StopReason::JobEnded || r == StopReason::JobCancelled ||
           r == StopReason::TimeLimit || r == StopReason::NodeFail ||
           r == StopReason::JobCompleted || r == StopReason::JobFailed ||
           r == StopReason::Preempted || r == StopReason::Requeued;
}

// ---- pod_run ----

namespace {
// pod_run's and pod_files' "files": {volume: {path: base64}}.
Json::Value files_to_json(const PodFiles &files) {
    Json::Value out(Json::objectValue);
    for (const auto &[volume, entries] : files) {
        Json::Value e(Json::objectValue);
        for (const auto &[path, bytes] : entries)
            e[path] = base64_encode(bytes);
        out[volume] = e;
    }
    return out;
}
}  // namespace

Json::Value to_json(const PodRun &m) {
    Json::Value v(Json::objectValue);
    v["pod"] = m.pod;
    v["files"] = files_to_json(m.files);
    if (!m.pull_auth.empty()) v["pull_auth"] = m.pull_auth;
    if (!m.net_ns.empty()) {
        v["network"]["net"] = m.net_ns;
        v["network"]["uts"] = m.uts_ns;
    }
    if (!m.host_volumes.empty()) {
        Json::Value hv(Json::objectValue);
        for (const auto &[name, h] : m.host_volumes) {
            Json::Value e(Json::objectValue);
            e["path"] = h.path;
            e["root"] = h.root;
            if (!h.type.empty()) e["type"] = h.type;
            if (h.read_only) e["read_only"] = true;
            hv[name] = e;
        }
        v["host_volumes"] = hv;
    }
    return v;
}

namespace {
// A path of host_volumes: absolute, bounded, no NUL.
bool host_path_ok(const Json::Value &v) {
    return v.isString() && !v.asString().empty() && v.asString()[0] == '/' &&
           v.asString().size() <= kMaxFilePathBytes && v.asString().find('\0') == std::string::npos;
}
}  // namespace

Result<HostVolumes> host_volumes_from_json(const Json::Value &body) {
    HostVolumes out;
    if (body.isNull()) return out;
    if (!body.isObject() || body.size() > kMaxVolumes)
        return fail(Error::Invalid, "pod_run: 'host_volumes' must be an object of at most " +
                                        std::to_string(kMaxVolumes) + " volumes");
    for (const auto &name : body.getMemberNames()) {
        const Json::Value &e = body[name];
        std::string where = "pod_run: host_volumes '" + name.substr(0, 64) + "'";
        if (name.size() > kMaxObjectNameBytes || !e.isObject())
            return fail(Error::Invalid, where + " must be an object named by a volume");
        if (!host_path_ok(e["path"]) || !host_path_ok(e["root"]))
            return fail(Error::Invalid, where + ": 'path' and 'root' must be absolute paths");
        if (!e["type"].isNull() && !e["type"].isString())
            return fail(Error::Invalid, where + ": 'type' must be a string");
        if (!e["read_only"].isNull() && !e["read_only"].isBool())
            return fail(Error::Invalid, where + ": 'read_only' must be a boolean");
        out[name] = {e["path"].asString(), e["root"].asString(), e["type"].asString(),
                     e["read_only"].asBool()};
    }
    return out;
}

Status check_pod_files(const PodFiles &files, std::string_view op) {
    const std::string ctx(op);
    if (files.size() > kMaxVolumes)
        return fail(Error::Parse,
                    ctx + ": 'files' has more than " + std::to_string(kMaxVolumes) + " volumes");
    for (const auto &[volume, entries] : files) {
        std::string where = ctx + ": 'files' of volume '" + volume.substr(0, 64) + "'";
        if (volume.size() > kMaxObjectNameBytes)
            return fail(Error::Parse, ctx + ": a volume name in 'files' is longer than " +
                                          std::to_string(kMaxObjectNameBytes) + " bytes");
        if (entries.size() > kMaxFilesPerVolume)
            return fail(Error::Parse,
                        where + " has more than " + std::to_string(kMaxFilesPerVolume) + " files");
        for (const auto &[path, bytes] : entries)
            if (path.size() > kMaxFilePathBytes)
                return fail(Error::Parse, where + ": a path is longer than " +
                                              std::to_string(kMaxFilePathBytes) + " bytes");
    }
    return {};
}

Result<PodFiles> pod_files_from_json(const Json::Value &files, std::string_view op) {
    const std::string ctx(op);
    PodFiles out;
    if (files.isNull()) return out;
    if (!files.isObject()) return fail(Error::Parse, ctx + ": 'files' must be an object");
    // The counts before any decoding: what a message may hold is bounded
    // before the work it costs.
    if (files.size() > kMaxVolumes)
        return fail(Error::Parse,
                    ctx + ": 'files' has more than " + std::to_string(kMaxVolumes) + " volumes");
    for (const auto &volume : files.getMemberNames()) {
        const Json::Value &entries = files[volume];
        std::string where = ctx + ": 'files' of volume '" + volume.substr(0, 64) + "'";
        if (!entries.isObject()) return fail(Error::Parse, where + " must be an object");
        if (entries.size() > kMaxFilesPerVolume)
            return fail(Error::Parse,
                        where + " has more than " + std::to_string(kMaxFilesPerVolume) + " files");
        auto &decoded = out[volume];
        for (const auto &path : entries.getMemberNames()) {
            const Json::Value &data = entries[path];
            std::string file = where + ": file '" + path.substr(0, 256) + "'";
            if (!data.isString()) return fail(Error::Parse, file + " must be a base64 string");
            auto bytes = base64_decode(data.asString());
            if (!bytes) return fail(Error::Parse, file + " is not valid base64");
            decoded[path] = std::move(*bytes);
        }
    }
    if (auto st = check_pod_files(out, op); !st) return st.failure();
    return out;
}

Json::Value to_json(const PodFilesUpdate &m) {
    Json::Value v(Json::objectValue);
    v["uid"] = m.uid;
    v["files"] = files_to_json(m.files);
    return v;
}

Result<PodFilesUpdate> pod_files_update_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "pod_files";
    if (!body.isObject()) return fail(Error::Parse, "pod_files: the body must be an object");
    PodFilesUpdate m;
    SK_TRY_ASSIGN(m.uid, uid_field(body, ctx));
    auto files = pod_files_from_json(body["files"], ctx);
    if (!files) return files.failure();
    m.files = std::move(*files);
    return m;
}

Result<PodRun> make_pod_run(Json::Value pod, PodFiles files, std::string pull_auth) {
    constexpr std::string_view ctx = "pod_run";
    PodRun m;
    if (!pod.isObject()) return fail(Error::Invalid, "pod_run: 'pod' must be an object");
    const Json::Value &meta = pod["metadata"];
    if (!meta.isObject() || !meta["uid"].isString() ||
        !check_uid(meta["uid"].asString(), ctx, "uid"))
        return fail(Error::Invalid, "pod_run: pod has no valid metadata.uid");
    m.uid = meta["uid"].asString();
    constexpr std::string_view mctx = "pod_run: metadata";
    auto ns =
        bounded(json::opt_string(meta, "namespace", mctx), mctx, "namespace", kMaxObjectNameBytes);
    if (!ns) return invalid_run(ns.failure());
    m.ns = *ns;
    auto name = bounded(json::opt_string(meta, "name", mctx), mctx, "name", kMaxObjectNameBytes);
    if (!name) return invalid_run(name.failure());
    m.name = *name;
    if (auto st = check_pod_files(files, ctx); !st) return invalid_run(st.failure());
    m.files = std::move(files);
    if (pull_auth.size() > kMaxPullAuthBytes)
        return fail(Error::Invalid, "pod_run: 'pull_auth' must be a string of at most " +
                                        std::to_string(kMaxPullAuthBytes) + " bytes");
    m.pull_auth = std::move(pull_auth);
    m.pod = std::move(pod);
    return m;
}

Result<PodRun> pod_run_from_json(const Json::Value &body) {
    const Json::Value &pod = body.isObject() ? body["pod"] : Json::Value::nullSingleton();
    if (!pod.isObject()) return fail(Error::Invalid, "pod_run: 'pod' must be an object");
    auto files = pod_files_from_json(body["files"]);
    if (!files) return invalid_run(files.failure());
    const Json::Value &auth = body["pull_auth"];
    if (!auth.isNull() && !auth.isString())
        return fail(Error::Invalid, "pod_run: 'pull_auth' must be a string of at most " +
                                        std::to_string(kMaxPullAuthBytes) + " bytes");
    auto host = host_volumes_from_json(body["host_volumes"]);
    if (!host) return host.failure();
    const Json::Value &net = body["network"];
    if (!net.isNull() &&
        (!net.isObject() || !host_path_ok(net["net"]) || !host_path_ok(net["uts"])))
        return fail(Error::Invalid,
                    "pod_run: 'network' must name the absolute paths of its 'net' and 'uts' "
                    "namespaces");
    auto run = make_pod_run(pod, std::move(*files), auth.isString() ? auth.asString() : "");
    if (run) run->host_volumes = std::move(*host);
    if (run && net.isObject()) {
        run->net_ns = net["net"].asString();
        run->uts_ns = net["uts"].asString();
    }
    return run;
}

// ---- pod_kill, pod_list, shutdown ----

Json::Value to_json(const PodKill &m) {
    Json::Value v(Json::objectValue);
    v["uid"] = m.uid;
    v["grace_s"] = m.grace_s;
    v["reason"] = std::string(to_string(m.reason));
    return v;
}

Result<PodKill> pod_kill_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "pod_kill";
    PodKill m;
    SK_TRY_ASSIGN(m.uid, uid_field(body, ctx));
    SK_TRY_ASSIGN(m.grace_s, grace_field(body, ctx));
    SK_TRY_ASSIGN(m.reason, reason_field(body, ctx, StopReason::Killing));
    return m;
}

// ---- exec_start, exec_attach, attach_start ----

namespace {

Result<std::string> session_field(const Json::Value &v, std::string_view ctx) {
    auto s = json::get_string(v, "session", ctx);
    if (!s) return s;
    bool ok = !s->empty() && s->size() <= kMaxSessionBytes;
    for (char ch : *s)
        ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-');
    if (!ok)
        return fail(Error::Parse, field_name(ctx, "session") + " must be 1.." +
                                      std::to_string(kMaxSessionBytes) +
                                      " bytes of letters, digits and '-'");
    return s;
}

Result<std::string> container_field(const Json::Value &v, std::string_view ctx) {
    auto c = bounded(json::get_string(v, "container", ctx), ctx, "container", kMaxObjectNameBytes);
    if (c && c->empty())
        return fail(Error::Parse, field_name(ctx, "container") + " must not be empty");
    return c;
}

}  // namespace

Json::Value to_json(const ExecStart &m) {
    Json::Value v(Json::objectValue);
    v["session"] = m.session;
    v["uid"] = m.uid;
    v["container"] = m.container;
    v["command"] = json::from_strings(m.command);
    v["stdin"] = m.in;
    v["stdout"] = m.out;
    v["stderr"] = m.err;
    v["tty"] = m.tty;
    return v;
}

Result<ExecStart> exec_start_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "exec_start";
    if (!body.isObject()) return fail(Error::Parse, "exec_start: the body must be an object");
    ExecStart m;
    SK_TRY_ASSIGN(m.session, session_field(body, ctx));
    SK_TRY_ASSIGN(m.uid, uid_field(body, ctx));
    SK_TRY_ASSIGN(m.container, container_field(body, ctx));
    SK_TRY_ASSIGN(m.command, json::opt_string_list(body, "command", ctx));
    size_t total = 0;
    for (const auto &w : m.command) {
        total += w.size();
        if (w.find('\0') != std::string::npos)
            return fail(Error::Parse, field_name(ctx, "command") + " has a word with a NUL byte");
    }
    if (m.command.empty() || m.command.size() > kMaxExecWords || total > kMaxExecCommandBytes)
        return fail(Error::Parse, field_name(ctx, "command") + " must have 1.." +
                                      std::to_string(kMaxExecWords) + " words of at most " +
                                      std::to_string(kMaxExecCommandBytes) + " bytes in all");
    SK_TRY_ASSIGN(m.in, json::opt_bool(body, "stdin", ctx, false));
    SK_TRY_ASSIGN(m.out, json::opt_bool(body, "stdout", ctx, true));
    SK_TRY_ASSIGN(m.err, json::opt_bool(body, "stderr", ctx, true));
    SK_TRY_ASSIGN(m.tty, json::opt_bool(body, "tty", ctx, false));
    return m;
}

Json::Value to_json(const ExecAttach &m) {
    Json::Value v(Json::objectValue);
    v["session"] = m.session;
    return v;
}

Result<ExecAttach> exec_attach_from_json(const Json::Value &body) {
    if (!body.isObject()) return fail(Error::Parse, "exec_attach: the body must be an object");
    ExecAttach m;
    SK_TRY_ASSIGN(m.session, session_field(body, "exec_attach"));
    return m;
}

Json::Value to_json(const AttachStart &m) {
    Json::Value v(Json::objectValue);
    v["session"] = m.session;
    v["uid"] = m.uid;
    v["container"] = m.container;
    v["stdin"] = m.in;
    v["stdout"] = m.out;
    v["stderr"] = m.err;
    v["tty"] = m.tty;
    return v;
}

Result<AttachStart> attach_start_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "attach_start";
    if (!body.isObject()) return fail(Error::Parse, "attach_start: the body must be an object");
    AttachStart m;
    SK_TRY_ASSIGN(m.session, session_field(body, ctx));
    SK_TRY_ASSIGN(m.uid, uid_field(body, ctx));
    SK_TRY_ASSIGN(m.container, container_field(body, ctx));
    SK_TRY_ASSIGN(m.in, json::opt_bool(body, "stdin", ctx, false));
    SK_TRY_ASSIGN(m.out, json::opt_bool(body, "stdout", ctx, true));
    SK_TRY_ASSIGN(m.err, json::opt_bool(body, "stderr", ctx, true));
    SK_TRY_ASSIGN(m.tty, json::opt_bool(body, "tty", ctx, false));
    return m;
}

Json::Value to_json(const PodList &) {
    return Json::Value(Json::objectValue);
}

Result<PodList> pod_list_request_from_json(const Json::Value &body) {
    if (!body.isObject()) return fail(Error::Parse, "pod_list: the body must be an object");
    return PodList{};
}

Json::Value to_json(const Shutdown &m) {
    Json::Value v(Json::objectValue);
    v["grace_s"] = m.grace_s;
    v["reason"] = std::string(to_string(m.reason));
    return v;
}

Result<Shutdown> shutdown_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "shutdown";
    Shutdown m;
    SK_TRY_ASSIGN(m.grace_s, grace_field(body, ctx));
    SK_TRY_ASSIGN(m.reason, reason_field(body, ctx, StopReason::Shutdown));
    return m;
}

Json::Value to_json(const PodsPause &m) {
    Json::Value v(Json::objectValue);
    v["pause"] = m.pause;
    v["message"] = m.message;
    return v;
}

Result<PodsPause> pods_pause_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "pods_pause";
    if (!body.isObject() || !body.isMember("pause") || !body["pause"].isBool())
        return fail(Error::Parse, field_name(ctx, "pause") + " must be true or false");
    PodsPause m;
    m.pause = body["pause"].asBool();
    SK_TRY_ASSIGN(m.message, json::opt_string(body, "message", ctx));
    if (m.message.size() > kMaxEventMessageBytes) m.message.resize(kMaxEventMessageBytes);
    return m;
}

Json::Value to_json(const ImagePull &m) {
    Json::Value v(Json::objectValue);
    v["image"] = m.image;
    return v;
}

Result<ImagePull> image_pull_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "image_pull";
    ImagePull m;
    SK_TRY_ASSIGN(m.image, json::get_string(body, "image", ctx));
    if (auto why = image_ref_error(m.image); !why.empty())
        return fail(Error::Parse, field_name(ctx, "image") + ": " + why);
    return m;
}

Json::Value to_json(const ImagePullCancel &m) {
    Json::Value v(Json::objectValue);
    v["id"] = Json::UInt64(m.id);
    return v;
}

Result<ImagePullCancel> image_pull_cancel_from_json(const Json::Value &body) {
    ImagePullCancel m;
    SK_TRY_ASSIGN(m.id, json::get_uint(body, "id", "image_pull_cancel"));
    return m;
}

Json::Value to_json(const PodSandbox &m) {
    Json::Value v(Json::objectValue);
    v["uid"] = m.uid;
    v["hostname"] = m.hostname;
    v["images"] = Json::Value(Json::arrayValue);
    for (const auto &i : m.images)
        v["images"].append(i);
    return v;
}

Result<PodSandbox> pod_sandbox_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "pod_sandbox";
    PodSandbox m;
    SK_TRY_ASSIGN(m.uid, json::get_string(body, "uid", ctx));
    if (auto st = check_uid(m.uid, ctx, "uid"); !st) return st.failure();
    SK_TRY_ASSIGN(m.hostname, json::get_string(body, "hostname", ctx));
    // A kubelet's pod hostname: a DNS label (metadata.name cut to 63, or
    // spec.hostname).
    bool label = !m.hostname.empty() && m.hostname.size() <= 63;
    for (char c : m.hostname)
        label = label && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.');
    if (!label)
        return fail(Error::Parse, field_name(ctx, "hostname") +
                                      " must be 1 to 63 lower-case letters, digits, '-' or '.'");
    SK_TRY_ASSIGN(m.images, json::opt_string_list(body, "images", ctx));
    if (m.images.size() > 256)
        return fail(Error::Parse, field_name(ctx, "images") + " lists more than 256 images");
    for (const auto &i : m.images)
        if (i.size() > 4096)
            return fail(Error::Parse,
                        field_name(ctx, "images") + ": an image name over 4096 bytes");
    return m;
}

Json::Value to_json(const PodSandboxReply &m) {
    Json::Value v(Json::objectValue);
    v["pid"] = m.pid;
    if (!m.node_network.empty()) v["node_network"] = m.node_network;
    return v;
}

Result<PodSandboxReply> pod_sandbox_reply_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "pod_sandbox reply";
    PodSandboxReply m;
    uint64_t pid = 0;
    SK_TRY_ASSIGN(pid, json::get_uint(body, "pid", ctx, 4194304));
    SK_TRY_ASSIGN(m.node_network, json::opt_string(body, "node_network", ctx));
    if (m.node_network.size() > kMaxEventMessageBytes) m.node_network.resize(kMaxEventMessageBytes);
    if (pid < 2 && m.node_network.empty())
        return fail(Error::Parse, "pod_sandbox reply: 'pid' must be a process id");
    m.pid = m.node_network.empty() ? static_cast<int>(pid) : 0;
    return m;
}

// ---- pod_status, pod_list reply ----

Json::Value to_json(const PodEvent &m) {
    Json::Value v(Json::objectValue);
    v["type"] = std::string(to_string(m.type));
    v["reason"] = m.reason;
    v["message"] = m.message;
    if (!m.container.empty()) v["container"] = m.container;
    return v;
}

Result<PodEvent> pod_event_from_json(const Json::Value &e) {
    constexpr std::string_view ctx = "pod_status: event";
    if (!e.isObject()) return fail(Error::Parse, "pod_status: an event must be an object");
    PodEvent m;
    std::string type;
    SK_TRY_ASSIGN(type, json::get_string(e, "type", ctx));
    SK_TRY_ASSIGN(m.type, event_type_from_string(type, field_name(ctx, "type")));
    SK_TRY_ASSIGN(m.reason,
                  bounded(json::get_string(e, "reason", ctx), ctx, "reason", kMaxEventReasonBytes));
    if (m.reason.empty()) return fail(Error::Parse, "pod_status: event 'reason' is empty");
    SK_TRY_ASSIGN(m.message, json::opt_string(e, "message", ctx));
    // A probe's output can be long: the message is cut, not refused.
    if (m.message.size() > kMaxEventMessageBytes) m.message.resize(kMaxEventMessageBytes);
    SK_TRY_ASSIGN(m.container, bounded(json::opt_string(e, "container", ctx), ctx, "container",
                                       kMaxObjectNameBytes));
    return m;
}

Json::Value to_json(const PodStatus &m) {
    Json::Value v(Json::objectValue);
    v["uid"] = m.uid;
    v["namespace"] = m.ns;
    v["name"] = m.name;
    v["status"] = m.status;
    if (m.events) {
        Json::Value a(Json::arrayValue);
        for (const auto &e : *m.events)
            a.append(to_json(e));
        v["events"] = a;
    }
    return v;
}

Result<PodStatus> pod_status_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "pod_status";
    if (!body.isObject()) return fail(Error::Parse, "pod_status: the body must be an object");
    PodStatus m;
    SK_TRY_ASSIGN(m.uid, uid_field(body, ctx));
    SK_TRY_ASSIGN(m.ns, bounded(json::opt_string(body, "namespace", ctx), ctx, "namespace",
                                kMaxObjectNameBytes));
    SK_TRY_ASSIGN(m.name,
                  bounded(json::opt_string(body, "name", ctx), ctx, "name", kMaxObjectNameBytes));
    if (!body["status"].isObject())
        return fail(Error::Parse, "pod_status: 'status' must be an object");
    m.status = body["status"];
    if (!body.isMember("events")) return m;
    const Json::Value &events = body["events"];
    if (!events.isArray()) return fail(Error::Parse, "pod_status: 'events' must be an array");
    if (events.size() > kMaxEvents)
        return fail(Error::Parse,
                    "pod_status: more than " + std::to_string(kMaxEvents) + " 'events'");
    m.events.emplace();
    for (const auto &e : events) {
        auto ev = pod_event_from_json(e);
        if (!ev) return ev.failure();
        m.events->push_back(std::move(*ev));
    }
    return m;
}

Json::Value to_json(const PodListReply &m) {
    Json::Value v(Json::objectValue);
    Json::Value a(Json::arrayValue);
    for (const auto &p : m.pods)
        a.append(to_json(p));
    v["pods"] = a;
    return v;
}

Result<PodListReply> pod_list_reply_from_json(const Json::Value &body) {
    if (!body.isObject() || !body["pods"].isArray())
        return fail(Error::Parse, "pod_list reply: 'pods' must be an array");
    PodListReply m;
    for (const auto &p : body["pods"]) {
        auto s = pod_status_from_json(p);
        if (!s) return fail(Error::Parse, "pod_list reply: " + s.message());
        m.pods.push_back(std::move(*s));
    }
    return m;
}

// ---- pod_stats ----

Json::Value to_json(const PodStatsRequest &) {
    return Json::Value(Json::objectValue);
}

Result<PodStatsRequest> pod_stats_request_from_json(const Json::Value &body) {
    if (!body.isObject()) return fail(Error::Parse, "pod_stats: the body must be an object");
    return PodStatsRequest{};
}

namespace {

Json::Value disk_use_json(const DiskUse &d) {
    Json::Value v(Json::objectValue);
    v["bytes"] = Json::UInt64(d.bytes);
    v["inodes"] = Json::UInt64(d.inodes);
    return v;
}

}  // namespace

Json::Value to_json(const PodStatsReply &m) {
    Json::Value v(Json::objectValue);
    Json::Value node(Json::objectValue);
    node["source"] = std::string(to_string(m.node.source));
    node["cpu_ns"] = Json::UInt64(m.node.cpu_ns);
    node["memory_bytes"] = Json::UInt64(m.node.memory_bytes);
    v["node"] = node;
    Json::Value pods(Json::arrayValue);
    for (const auto &p : m.pods) {
        Json::Value e(Json::objectValue);
        e["uid"] = p.uid;
        e["namespace"] = p.ns;
        e["name"] = p.name;
        e["start_ms"] = Json::Int64(p.start_ms);
        Json::Value cs(Json::arrayValue);
        for (const auto &c : p.containers) {
            Json::Value j(Json::objectValue);
            j["name"] = c.name;
            j["start_ms"] = Json::Int64(c.start_ms);
            j["cpu_ns"] = Json::UInt64(c.cpu_ns);
            j["memory_bytes"] = Json::UInt64(c.memory_bytes);
            if (c.logs) j["logs"] = disk_use_json(*c.logs);
            cs.append(j);
        }
        e["containers"] = cs;
        if (p.ephemeral) e["ephemeral_storage"] = disk_use_json(*p.ephemeral);
        if (p.cgroup_cpu_ns) e["cgroup_cpu_ns"] = Json::UInt64(*p.cgroup_cpu_ns);
        if (p.cgroup_memory_bytes) e["cgroup_memory_bytes"] = Json::UInt64(*p.cgroup_memory_bytes);
        pods.append(e);
    }
    v["pods"] = pods;
    return v;
}

namespace {

// A unix-ms time: 0..INT64_MAX (0 only where `zero_ok`).
Result<int64_t> time_ms_field(const Json::Value &v, const char *key, std::string_view ctx,
                              bool zero_ok) {
    auto n = json::get_uint(v, key, ctx, static_cast<uint64_t>(INT64_MAX));
    if (!n) return n.failure();
    if (*n == 0 && !zero_ok) return fail(Error::Parse, field_name(ctx, key) + " must be > 0");
    return static_cast<int64_t>(*n);
}

// An optional DiskUse member: absent (older shims) is nullopt.
Result<std::optional<DiskUse>> disk_use_field(const Json::Value &v, const char *key,
                                              std::string_view ctx) {
    if (!v.isMember(key)) return std::optional<DiskUse>{};
    const Json::Value &d = v[key];
    std::string name = field_name(ctx, key);
    if (!d.isObject()) return fail(Error::Parse, name + " must be an object");
    DiskUse out;
    SK_TRY_ASSIGN(out.bytes, json::get_uint(d, "bytes", name));
    SK_TRY_ASSIGN(out.inodes, json::get_uint(d, "inodes", name));
    return std::optional<DiskUse>{out};
}

Result<ContainerStats> container_stats_from_json(const Json::Value &v) {
    constexpr std::string_view ctx = "pod_stats reply: container";
    if (!v.isObject()) return fail(Error::Parse, "pod_stats reply: a container must be an object");
    ContainerStats c;
    SK_TRY_ASSIGN(c.name,
                  bounded(json::get_string(v, "name", ctx), ctx, "name", kMaxObjectNameBytes));
    if (c.name.empty()) return fail(Error::Parse, field_name(ctx, "name") + " must not be empty");
    SK_TRY_ASSIGN(c.start_ms, time_ms_field(v, "start_ms", ctx, false));
    SK_TRY_ASSIGN(c.cpu_ns, json::get_uint(v, "cpu_ns", ctx));
    SK_TRY_ASSIGN(c.memory_bytes, json::get_uint(v, "memory_bytes", ctx));
    SK_TRY_ASSIGN(c.logs, disk_use_field(v, "logs", ctx));
    return c;
}

Result<PodStatsEntry> pod_stats_entry_from_json(const Json::Value &v) {
    constexpr std::string_view ctx = "pod_stats reply: pod";
    if (!v.isObject()) return fail(Error::Parse, "pod_stats reply: a pod must be an object");
    PodStatsEntry p;
    SK_TRY_ASSIGN(p.uid, uid_field(v, ctx));
    SK_TRY_ASSIGN(p.ns, bounded(json::opt_string(v, "namespace", ctx), ctx, "namespace",
                                kMaxObjectNameBytes));
    SK_TRY_ASSIGN(p.name,
                  bounded(json::opt_string(v, "name", ctx), ctx, "name", kMaxObjectNameBytes));
    SK_TRY_ASSIGN(p.start_ms, time_ms_field(v, "start_ms", ctx, true));
    const Json::Value &cs = v["containers"];
    if (!cs.isArray())
        return fail(Error::Parse, field_name(ctx, "containers") + " must be an array");
    if (cs.size() > kMaxStatsContainers)
        return fail(Error::Parse, field_name(ctx, "containers") + " has more than " +
                                      std::to_string(kMaxStatsContainers) + " entries");
    for (const auto &c : cs) {
        auto e = container_stats_from_json(c);
        if (!e) return e.failure();
        p.containers.push_back(std::move(*e));
    }
    SK_TRY_ASSIGN(p.ephemeral, disk_use_field(v, "ephemeral_storage", ctx));
    for (auto [key, field] : {std::pair{"cgroup_cpu_ns", &p.cgroup_cpu_ns},
                              std::pair{"cgroup_memory_bytes", &p.cgroup_memory_bytes}}) {
        if (!v.isMember(key)) continue;
        auto n = json::get_uint(v, key, ctx);
        if (!n) return n.failure();
        *field = *n;
    }
    return p;
}

}  // namespace

Result<PodStatsReply> pod_stats_reply_from_json(const Json::Value &body) {
    constexpr std::string_view ctx = "pod_stats reply: node";
    if (!body.isObject()) return fail(Error::Parse, "pod_stats reply: the body must be an object");
    PodStatsReply m;
    const Json::Value &node = body["node"];
    if (!node.isObject()) return fail(Error::Parse, "pod_stats reply: 'node' must be an object");
    std::string source;
    SK_TRY_ASSIGN(source, json::get_string(node, "source", ctx));
    SK_TRY_ASSIGN(m.node.source, value_of(kStatsSources, source, field_name(ctx, "source")));
    SK_TRY_ASSIGN(m.node.cpu_ns, json::get_uint(node, "cpu_ns", ctx));
    SK_TRY_ASSIGN(m.node.memory_bytes, json::get_uint(node, "memory_bytes", ctx));
    const Json::Value &pods = body["pods"];
    if (!pods.isArray()) return fail(Error::Parse, "pod_stats reply: 'pods' must be an array");
    if (pods.size() > kMaxStatsPods)
        return fail(Error::Parse,
                    "pod_stats reply: more than " + std::to_string(kMaxStatsPods) + " 'pods'");
    for (const auto &p : pods) {
        auto e = pod_stats_entry_from_json(p);
        if (!e) return e.failure();
        m.pods.push_back(std::move(*e));
    }
    return m;
}

}  // namespace sk::proto
