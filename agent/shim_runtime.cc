#include "agent/shim_runtime.h"

#include "common/json.h"
#include "common/log.h"

namespace sk::agent {

Result<PodSnapshot> pod_status_from_json(const Json::Value &b) {
    PodSnapshot p;
    auto uid = json::get_string(b, "uid", "pod_status");
    if (!uid) return uid.failure();
    p.uid = *uid;
    auto ns = json::opt_string(b, "namespace", "pod_status");
    if (!ns) return ns.failure();
    p.ns = *ns;
    auto name = json::opt_string(b, "name", "pod_status");
    if (!name) return name.failure();
    p.name = *name;
    if (!b["status"].isObject())
        return fail(Error::Parse, "pod_status: 'status' must be an object");
    p.status = b["status"];
    if (!b.isMember("events")) return p;
    if (!b["events"].isArray()) return fail(Error::Parse, "pod_status: 'events' must be an array");
    p.reports_events = true;
    for (const auto &e : b["events"]) {
        if (!e.isObject()) return fail(Error::Parse, "pod_status: an event must be an object");
        RuntimeEvent re;
        re.type = e["type"].isString() ? e["type"].asString() : "";
        if (re.type != "Normal" && re.type != "Warning")
            return fail(Error::Parse, "pod_status: event type must be Normal or Warning");
        if (!e["reason"].isString() || e["reason"].asString().empty() ||
            e["reason"].asString().size() > 128)
            return fail(Error::Parse, "pod_status: event reason must be a short string");
        re.reason = e["reason"].asString();
        re.message = e["message"].isString() ? e["message"].asString().substr(0, 1024) : "";
        re.container = e["container"].isString() ? e["container"].asString() : "";
        p.events.push_back(std::move(re));
    }
    return p;
}

Result<std::vector<PodSnapshot>> pod_list_from_json(const Json::Value &body) {
    std::vector<PodSnapshot> out;
    if (!body["pods"].isArray())
        return fail(Error::Parse, "pod_list reply: 'pods' must be an array");
    for (const auto &p : body["pods"]) {
        auto s = pod_status_from_json(p);
        if (!s) return s.failure();
        out.push_back(*s);
    }
    return out;
}

ShimRuntime::ShimRuntime(std::shared_ptr<Connection> conn, std::string log_prefix)
    : conn_(std::move(conn)), prefix_(std::move(log_prefix)) {
    conn_->set_line_handler([this](const std::string &l) { on_line(l); });
    conn_->set_close_handler([this] { on_closed(); });
}

ShimRuntime::~ShimRuntime() {
    detach();
}

void ShimRuntime::detach() {
    if (!conn_) return;
    conn_->set_line_handler(nullptr);
    conn_->set_close_handler(nullptr);
    conn_->close();
    conn_.reset();
    auto pending = std::move(pending_);
    for (auto &[id, cb] : pending)
        cb(fail(Error::Unavailable, "shim detached"));
}

void ShimRuntime::on_closed() {
    LOG_INFO("%s shim connection closed", prefix_.c_str());
    conn_.reset();
    auto pending = std::move(pending_);
    for (auto &[id, cb] : pending)
        cb(fail(Error::Unavailable, "the shim's connection closed"));
    notify_lost();  // may destroy this
}

void ShimRuntime::call(const std::string &op, const Json::Value &body, ReplyCb cb) {
    if (!connected()) {
        cb(fail(Error::Unavailable, "no shim attached"));
        return;
    }
    proto::Request r;
    r.id = next_id_++;
    r.op = op;
    r.body = body;
    pending_[r.id] = std::move(cb);
    conn_->send(proto::encode(r));
}

void ShimRuntime::on_line(const std::string &line) {
    auto v = json::parse(line);
    if (!v || !v->isObject()) {
        LOG_WARN("%s malformed message from the shim; closing its connection", prefix_.c_str());
        if (conn_) conn_->close();
        return;
    }
    if (v->isMember("ok")) {  // a reply to one of our requests
        auto rep = proto::decode_reply(line);
        if (!rep) {
            LOG_WARN("%s bad reply from the shim: %s", prefix_.c_str(), rep.message().c_str());
            return;
        }
        auto it = pending_.find(rep->id);
        if (it == pending_.end()) return;
        ReplyCb cb = std::move(it->second);
        pending_.erase(it);
        if (rep->ok)
            cb(rep->body);
        else
            cb(fail(rep->error, rep->message));
        return;
    }
    auto req = proto::decode_request(line);
    if (!req) {
        if (conn_) conn_->reply(proto::error_reply(0, req.failure()));
        return;
    }
    proto::Reply reply;
    reply.id = req->id;
    if (req->op == "pod_status") {
        auto snap = pod_status_from_json(req->body);
        if (!snap) {
            reply = proto::error_reply(req->id, snap.failure());
        } else {
            if (conn_) conn_->reply(reply);
            notify(*snap);
            return;
        }
    } else {
        reply = proto::error_reply(
            req->id,
            fail(Error::InvalidArgument, "unknown operation '" + req->op + "' from a shim"));
    }
    if (conn_) conn_->reply(reply);
}

void ShimRuntime::run(const Json::Value &body, Done done) {
    call("pod_run", body,
         [done](const Result<Json::Value> &r) { done(r ? Status() : r.failure()); });
}

void ShimRuntime::kill(const std::string &uid, uint32_t grace_s, const std::string &reason,
                       Done done) {
    Json::Value b(Json::objectValue);
    b["uid"] = uid;
    b["grace_s"] = grace_s;
    b["reason"] = reason;
    call("pod_kill", b, [done](const Result<Json::Value> &r) { done(r ? Status() : r.failure()); });
}

void ShimRuntime::snapshot(std::function<void(Result<std::vector<PodSnapshot>>)> done) {
    call("pod_list", Json::Value(Json::objectValue), [done](Result<Json::Value> r) {
        if (!r) return done(r.failure());
        done(pod_list_from_json(*r));
    });
}

void ShimRuntime::shutdown(uint32_t grace_s, const std::string &reason, Done done) {
    Json::Value b(Json::objectValue);
    b["grace_s"] = grace_s;
    b["reason"] = reason;
    call("shutdown", b, [done](const Result<Json::Value> &r) { done(r ? Status() : r.failure()); });
}

}  // namespace sk::agent
