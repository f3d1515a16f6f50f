#include "k8s-shim/session_table.h"

#include "common/log.h"
#include "k8s-shim/spawn.h"

namespace sk::shim {

SessionTable::SessionTable(uv_loop_t *loop, Host &host, std::string supervisor,
                           std::string socket_path)
    : loop_(loop),
      host_(host),
      supervisor_(std::move(supervisor)),
      socket_path_(std::move(socket_path)) {}

SessionTable::~SessionTable() {
    // The sessions' loop first: its sessions (killing what they run) go on
    // its own thread, and none of its closures runs after this.
    if (!sessions_) return;
    try {
        sessions_->stop([this] {
            live_execs_.clear();
            dead_execs_.clear();
        });
    } catch (...) {  // a destructor must not let it out
        LOG_ERROR("exec sessions: error while stopping them");
    }
}

Status SessionTable::admit(const std::string &uid) const {
    size_t in_pod = 0;
    for (const auto &[id, e] : execs_)
        in_pod += e.req.uid == uid;
    for (const auto &[id, a] : attaches_)
        in_pod += a->request().uid == uid;
    if (in_pod >= kMaxPerPod || execs_.size() + attaches_.size() >= kMaxPerJob)
        return fail(Error::Refused, "too many exec sessions (at most " +
                                        std::to_string(kMaxPerPod) + " per pod, " +
                                        std::to_string(kMaxPerJob) +
                                        " per job, attach sessions included): end one (exit the "
                                        "shell) and try again");
    return {};
}

Status SessionTable::start_exec(uint64_t req_id, proto::ExecStart m, SpawnSpec spec) {
    if (!sessions_) {
        auto loop = std::make_unique<ThreadLoop>(loop_, "sk-sessions", workload_nice());
        if (auto st = loop->start(); !st) return st;
        sessions_ = std::move(loop);
    }
    std::string session = m.session, uid = m.uid;
    // On the shim's loop: the reply, the supervisor recorded in state.json;
    // at the end the record goes.
    auto started = [this, req_id, uid, session](const Status &st, int pid,
                                                unsigned long long ticks) {
        proto::Reply r = st ? proto::Reply{} : proto::error_reply(req_id, st.failure());
        r.id = req_id;
        host_.send_reply(r);
        if (auto e = execs_.find(session); e != execs_.end()) {
            e->second.pid = pid;
            e->second.start_ticks = ticks;
        }
        host_.exec_changed(uid);  // the command's supervisor is recorded
    };
    auto ended = [this, session, uid] {
        if (execs_.erase(session) == 0) return;
        host_.exec_changed(uid);
    };
    execs_[session] = ExecInfo{m};
    // On the sessions' loop: the session itself.
    sessions_->post(
        [this, m = std::move(m), spec = std::move(spec), session, started, ended]() mutable {
            ThreadLoop *sl = sessions_.get();
            auto on_started = [this, sl, session, started](const Status &st) {
                auto it = live_execs_.find(session);
                int pid = it != live_execs_.end() ? it->second->pid() : 0;
                unsigned long long ticks = it != live_execs_.end() ? it->second->start_ticks() : 0;
                sl->post_main([started, st, pid, ticks] { started(st, pid, ticks); });
            };
            auto on_ended = [this, sl, session, ended] {
                auto it = live_execs_.find(session);
                if (it != live_execs_.end()) {
                    dead_execs_.push_back(std::move(it->second));
                    live_execs_.erase(it);
                    sl->post([this] { dead_execs_.clear(); });
                }
                sl->post_main(ended);
            };
            auto s = std::make_unique<ExecSession>(sl->loop(), std::move(m), std::move(spec),
                                                   supervisor_, on_started, on_ended);
            ExecSession *raw = s.get();
            live_execs_[session] = std::move(s);
            raw->start(socket_path_);
        });
    return {};
}

void SessionTable::start_attach(uint64_t req_id, proto::AttachStart m) {
    std::string session = m.session, uid = m.uid, container = m.container;
    auto resolve = [this, uid, container]() { return host_.attach_container(uid, container); };
    auto started = [this, req_id](const Status &st) {
        proto::Reply r = st ? proto::Reply{} : proto::error_reply(req_id, st.failure());
        r.id = req_id;
        host_.send_reply(r);
    };
    auto ended = [this, session] {
        auto a = attaches_.find(session);
        if (a == attaches_.end()) return;
        attaches_ended_.push_back(std::move(a->second));
        attaches_.erase(a);
    };
    auto s = std::make_unique<AttachSession>(loop_, std::move(m), resolve, started, ended);
    AttachSession *raw = s.get();
    attaches_[session] = std::move(s);
    raw->start(socket_path_);
}

void SessionTable::kill_execs(const std::string &uid, const std::string &why,
                              const std::function<bool(const std::string &)> &running) {
    for (auto &[id, e] : execs_) {
        if (e.req.uid != uid) continue;
        if (running && running(e.req.container)) continue;
        sessions_->post([this, id = id,
                         w = running ? "container " + e.req.container + " is not running" : why] {
            if (auto it = live_execs_.find(id); it != live_execs_.end()) it->second->kill(w);
        });
    }
}

void SessionTable::exec_records(const std::string &uid, Json::Value *processes) const {
    for (const auto &[id, e] : execs_) {
        if (e.req.uid != uid || e.pid <= 0) continue;
        Json::Value r(Json::objectValue);
        r["pid"] = e.pid;
        r["start_ticks"] = Json::UInt64(e.start_ticks);
        (*processes)[e.req.container + ":exec:" + std::to_string(e.pid)] = r;
    }
}

}  // namespace sk::shim
