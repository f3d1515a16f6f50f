#include "agent/shim_runtime.h"

#include "common/daemons/json.h"
#include "common/daemons/shim_protocol.h"
#include "common/log.h"

namespace sk::agent {

namespace {

PodSnapshot to_snapshot(proto::PodStatus &&m) {
    PodSnapshot p;
    p.uid = std::move(m.uid);
    p.ns = std::move(m.ns);
    p.name = std::move(m.name);
    p.status = std::move(m.status);
    p.reports_events = m.events.has_value();
    if (m.events)
        for (auto &e : *m.events)
            p.events.push_back({std::string(proto::to_string(e.type)), std::move(e.reason),
                                std::move(e.message), std::move(e.container)});
    return p;
}

}  // namespace

Result<PodSnapshot> pod_status_from_json(const Json::Value &b) {
    auto m = proto::pod_status_from_json(b);
    if (!m) return m.failure();
    return to_snapshot(std::move(*m));
}

Result<std::vector<PodSnapshot>> pod_list_from_json(const Json::Value &body) {
    auto m = proto::pod_list_reply_from_json(body);
    if (!m) return m.failure();
    std::vector<PodSnapshot> out;
    for (auto &p : m->pods)
        out.push_back(to_snapshot(std::move(p)));
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

void ShimRuntime::cancel_image_pulls() {
    auto pulls = std::move(image_pulls_);
    image_pulls_.clear();
    if (image_cancel_)
        for (const auto &[id, ticket] : pulls)
            image_cancel_(ticket);
}

void ShimRuntime::detach() {
    cancel_image_pulls();
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
    cancel_image_pulls();
    auto pending = std::move(pending_);
    for (auto &[id, cb] : pending)
        cb(fail(Error::Unavailable, "the shim's connection closed"));
    notify_lost();  // may destroy this
}

void ShimRuntime::call(proto::ShimOp op, const Json::Value &body, ReplyCb cb, size_t max) {
    if (!connected()) {
        cb(fail(Error::Unavailable, "no shim attached"));
        return;
    }
    proto::Request r;
    r.id = next_id_++;
    r.op = std::string(proto::to_string(op));
    r.body = body;
    std::string line = proto::encode(r);
    if (line.size() - 1 > max) {  // never sent: the shim would drop it
        cb(fail(Error::TooLarge, std::string(proto::to_string(op)) + " message of " +
                                     std::to_string(line.size() - 1) +
                                     " bytes exceeds the limit of " + std::to_string(max)));
        return;
    }
    pending_[r.id] = std::move(cb);
    conn_->send(line);
}

void ShimRuntime::on_line(const std::string &line) {
    auto v = json::parse(line);
    if (!v || !v->isObject()) {
        LOG_WARN("%s malformed message from the shim; closing its connection", prefix_.c_str());
        if (conn_) conn_->close();
        return;
    }
    if (v->isMember("ok")) {  // a reply to one of our requests
        auto rep = proto::decode_reply(line, proto::kMaxShimMessageBytes);
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
    auto req = proto::decode_request(line, proto::kMaxShimMessageBytes);
    if (!req) {
        if (conn_) conn_->reply(proto::error_reply(0, req.failure()));
        return;
    }
    proto::Reply reply;
    reply.id = req->id;
    auto op = proto::shim_op_from_string(req->op, "op");
    if (op && *op == proto::ShimOp::PodStatus) {
        auto snap = pod_status_from_json(req->body);
        if (!snap) {
            reply = proto::error_reply(req->id, snap.failure());
        } else {
            if (conn_) conn_->reply(reply);
            notify(*snap);
            return;
        }
    } else if (op && *op == proto::ShimOp::ImagePull) {
        image_pull(req->id, req->body);
        return;
    } else if (op && *op == proto::ShimOp::ImagePullCancel) {
        // A notification: the shim forgot its request and expects no answer.
        auto m = proto::image_pull_cancel_from_json(req->body);
        if (!m) {
            if (conn_) conn_->reply(proto::error_reply(req->id, m.failure()));
            return;
        }
        auto it = image_pulls_.find(m->id);
        if (it != image_pulls_.end()) {
            uint64_t ticket = it->second;
            image_pulls_.erase(it);
            if (image_cancel_) image_cancel_(ticket);
        }
        if (conn_) conn_->reply(reply);
        return;
    } else {
        reply = proto::error_reply(
            req->id,
            fail(Error::InvalidArgument, "unknown operation '" + req->op + "' from a shim"));
    }
    if (conn_) conn_->reply(reply);
}

void ShimRuntime::image_pull(uint64_t id, const Json::Value &body) {
    auto m = proto::image_pull_from_json(body);
    if (!m || !image_puller_) {
        if (conn_)
            conn_->reply(proto::error_reply(
                id, m ? fail(Error::Unavailable, "this node has no image store") : m.failure()));
        return;
    }
    std::weak_ptr<Connection> conn = conn_;
    // Answered at most once: the ticket's entry goes with the answer (this
    // object may be gone by then: the entry is looked up through `alive`).
    image_pulls_[id] = image_puller_(
        m->image, [this, alive = std::weak_ptr<bool>(alive_), conn, id](const Status &st) {
            if (auto a = alive.lock()) image_pulls_.erase(id);
            auto c = conn.lock();
            if (!c || c->closed()) return;
            if (!st) return c->reply(proto::error_reply(id, st.failure()));
            proto::Reply r;
            r.id = id;
            r.body = Json::Value(Json::objectValue);
            c->reply(r);
        });
}

void ShimRuntime::run(const proto::PodRun &m, Done done) {
    // m was checked as the shim checks it (proto::make_pod_run). A pod_run
    // over kMaxPodRunBytes (a huge spec, or the data of its ConfigMap/Secret
    // volumes) fails TooLarge here, that pod alone: the link and the job's
    // other pods are not touched.
    call(
        proto::ShimOp::PodRun, proto::to_json(m),
        [done](const Result<Json::Value> &r) {
            if (r) return done(Status());
            if (r.error() != Error::TooLarge) return done(r.failure());
            done(fail(Error::TooLarge,
                      "the pod is too large to run: its spec with the data of its ConfigMap and "
                      "Secret volumes makes a " +
                          r.message()));
        },
        proto::kMaxPodRunBytes);
}

void ShimRuntime::kill(const std::string &uid, uint32_t grace_s, proto::StopReason reason,
                       Done done) {
    proto::PodKill m;
    m.uid = uid;
    m.grace_s = grace_s;
    m.reason = reason;
    call(proto::ShimOp::PodKill, proto::to_json(m),
         [done](const Result<Json::Value> &r) { done(r ? Status() : r.failure()); });
}

void ShimRuntime::snapshot(std::function<void(Result<std::vector<PodSnapshot>>)> done) {
    call(proto::ShimOp::PodList, proto::to_json(proto::PodList{}), [done](Result<Json::Value> r) {
        if (!r) return done(r.failure());
        done(pod_list_from_json(*r));
    });
}

void ShimRuntime::shutdown(uint32_t grace_s, proto::StopReason reason, Done done) {
    proto::Shutdown m;
    m.grace_s = grace_s;
    m.reason = reason;
    call(proto::ShimOp::Shutdown, proto::to_json(m),
         [done](const Result<Json::Value> &r) { done(r ? Status() : r.failure()); });
}

void ShimRuntime::exec_start(const proto::ExecStart &m, Done done) {
    call(proto::ShimOp::ExecStart, proto::to_json(m),
         [done](const Result<Json::Value> &r) { done(r ? Status() : r.failure()); });
}

void ShimRuntime::attach_start(const proto::AttachStart &m, Done done) {
    call(proto::ShimOp::AttachStart, proto::to_json(m),
         [done](const Result<Json::Value> &r) { done(r ? Status() : r.failure()); });
}

void ShimRuntime::pause(bool pause, const std::string &message, Done done) {
    proto::PodsPause m;
    m.pause = pause;
    m.message = message;
    call(proto::ShimOp::PodsPause, proto::to_json(m),
         [done](const Result<Json::Value> &r) { done(r ? Status() : r.failure()); });
}

void ShimRuntime::update_files(const proto::PodFilesUpdate &m, Done done) {
    call(proto::ShimOp::PodFiles, proto::to_json(m),
         [done](const Result<Json::Value> &r) { done(r ? Status() : r.failure()); });
}

void ShimRuntime::sandbox(const proto::PodSandbox &m,
                          std::function<void(Result<proto::PodSandboxReply>)> done) {
    call(proto::ShimOp::PodSandbox, proto::to_json(m), [done](const Result<Json::Value> &r) {
        if (!r) return done(r.failure());
        done(proto::pod_sandbox_reply_from_json(*r));
    });
}

// The reply is the job user's: decoded strictly and bounded
// (proto::pod_stats_reply_from_json), whatever the shim sends.
void ShimRuntime::stats(std::function<void(Result<proto::PodStatsReply>)> done) {
    call(proto::ShimOp::PodStats, proto::to_json(proto::PodStatsRequest{}),
         [done](Result<Json::Value> r) {
             if (!r) return done(r.failure());
             done(proto::pod_stats_reply_from_json(*r));
         });
}

}  // namespace sk::agent
