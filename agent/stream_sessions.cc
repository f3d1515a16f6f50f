#include "agent/stream_sessions.h"

#include <sys/random.h>
#include <unistd.h>
#include <uv.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/strings.h"

namespace sk::agent {

namespace {

constexpr size_t kMaxProcNetTcp = 16 << 20;  // /proc/net/tcp of a host with 100k sockets

// An unguessable session id (the data connection names it; the peer's uid
// is checked too): 128 random bits in hex.
std::string new_session_id(uint64_t n) {
    unsigned char r[16] = {};
    if (getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
        // Never on Linux >= 3.17 for 16 bytes; the uid check still holds.
        uint64_t t = uv_hrtime();
        for (size_t i = 0; i < sizeof r; i++)
            r[i] = static_cast<unsigned char>((t >> (8 * (i % 8))) ^ (n >> (8 * (i % 8))));
    }
    return hex_encode(r, sizeof r);
}

}  // namespace

StreamSessions::StreamSessions(uv_loop_t *main, const StreamLimits &limits, ExecCheck check,
                               std::optional<int> relay_nice)
    : thread_(main, "sk-streams", relay_nice),
      loop_(thread_.loop()),
      limits_(limits),
      check_(std::move(check)),
      wake_(loop_, [this] { take_started(); }),
      reap_(loop_) {}

StreamSessions::~StreamSessions() {
    // Normally stopped already (the daemon's teardown); closing handles does
    // not throw in practice, and a destructor must not let it out.
    try {
        stop();
    } catch (...) {
        LOG_ERROR("stream sessions: error while closing them");
    }
}

Status StreamSessions::check(const StreamRequest &req) {
    if (count_.load() >= limits_.max_sessions)
        return fail(Error::Refused, "too many streaming sessions on this node (" +
                                        std::to_string(limits_.max_sessions) + ")");
    return check_ ? check_(req) : Status();
}

void StreamSessions::start(StreamRequest req, HttpUpgrade conn) {
    count_++;
    {
        std::lock_guard<std::mutex> lock(mu_);
        started_.emplace_back(std::move(req), std::move(conn));
    }
    wake_.send();
}

void StreamSessions::take_started() {
    std::deque<std::pair<StreamRequest, HttpUpgrade>> batch;
    {
        std::lock_guard<std::mutex> lock(mu_);
        batch.swap(started_);
    }
    for (auto &[req, conn] : batch) {
        if (stopped_) {
            if (conn.close) conn.close();
            count_--;
            continue;
        }
        std::string id = new_session_id(next_++);
        LOG_VERBOSE("[%s %s/%s] session %s opened (%zu now)", stream_kind_name(req.kind),
                    req.ns.c_str(), req.pod.c_str(), id.substr(0, 8).c_str(), count_.load());
        std::unique_ptr<StreamSession> s;
        if (req.kind == StreamKind::PortForward)
            s = new_forward_session(*this, id, std::move(req), std::move(conn));
        else
            s = new_exec_session(*this, id, std::move(req), std::move(conn));
        StreamSession *raw = s.get();
        by_id_[id] = std::move(s);
        raw->begin();
    }
}

Status StreamSessions::start() {
    return thread_.start();
}

void StreamSessions::resolve(const std::string &ns, const std::string &pod,
                             std::function<void(Result<ExecTarget>)> cb) {
    ThreadLoop *tl = &thread_;
    tl->post_main([this, tl, ns, pod, cb = std::move(cb)] {
        Result<ExecTarget> t = resolver_
                                   ? resolver_(ns, pod)
                                   : Result<ExecTarget>(fail(Error::NotFound, "no pods here"));
        if (t.ok()) {
            // Called on the sessions' thread; the runtime is the agent's
            // loop's, and its answer goes back.
            auto on_main = [tl](auto fn) {
                return [tl, fn](const auto &m, PodRuntime::Done done) {
                    tl->post_main([tl, fn, m, done = std::move(done)] {
                        fn(m, [tl, done](const Status &st) { tl->post([done, st] { done(st); }); });
                    });
                };
            };
            t->start = on_main(t->start);
            t->attach = on_main(t->attach);
        }
        tl->post([cb, t] { cb(t); });
    });
}

void StreamSessions::expect_shim(const std::string &id, uint32_t uid) {
    std::lock_guard<std::mutex> lock(wait_mu_);
    waiting_[id] = uid;
}

void StreamSessions::unexpect_shim(const std::string &id) {
    std::lock_guard<std::mutex> lock(wait_mu_);
    waiting_.erase(id);
}

void StreamSessions::attach(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto m = proto::exec_attach_from_json(req.body);
    if (!m.ok()) {
        c->reply(proto::error_reply(req.id, m.failure()));
        return c->close();
    }
    bool claimed = false;
    {
        std::lock_guard<std::mutex> lock(wait_mu_);
        auto it = waiting_.find(m->session);
        if (it != waiting_.end() && it->second != c->peer().uid) {
            LOG_WARN("socket: exec_attach for a session of uid %u from uid %u pid %d: refused",
                     it->second, c->peer().uid, c->peer().pid);
        } else if (it != waiting_.end()) {
            claimed = true;
            waiting_.erase(it);  // a second exec_attach finds none
        }
    }
    if (!claimed || main_stopped_) {
        // One answer for all three: nothing tells another user which ids exist.
        c->reply(proto::error_reply(
            req.id, fail(Error::NotFound, "no exec session '" + m->session + "' waits")));
        return c->close();
    }
    std::string rest;
    int fd = c->take_fd(&rest);
    if (fd < 0) return;
    // Closed unless the session takes it (a closure dropped at stop too).
    auto held = std::shared_ptr<int>(new int(fd), [](int *p) {
        if (*p >= 0) ::close(*p);
        delete p;
    });
    thread_.post([this, id = m->session, held, rest, req_id = req.id] {
        auto it = by_id_.find(id);
        if (it == by_id_.end() || !it->second->waiting_for_shim()) return;  // ended meanwhile
        it->second->attach_shim(std::exchange(*held, -1), rest, req_id);
    });
}

std::optional<Listener> StreamSessions::find_listener(uint16_t port, uint32_t uid) const {
    // Root reads the kernel's tables, bounded; the pod cannot write them.
    for (bool v6 : {false, true}) {
        auto text = read_file(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", kMaxProcNetTcp);
        if (!text.ok()) continue;
        if (auto l = sk::find_listener(*text, v6, port, uid)) return l;
    }
    return std::nullopt;
}

void StreamSessions::ended() {
    if (stopped_) return;
    reap_.start(0, [this] {
        for (auto it = by_id_.begin(); it != by_id_.end();) {
            if (it->second->closed()) {
                it = by_id_.erase(it);
                count_--;
            } else {
                ++it;
            }
        }
    });
}

void StreamSessions::stop() {
    if (main_stopped_) return;
    main_stopped_ = true;
    thread_.stop([this] {
        stopped_ = true;
        take_started();  // what arrived before the HTTP server stopped
        for (auto &[id, s] : by_id_)
            s->close_all();
        count_ -= by_id_.size();
        by_id_.clear();
        wake_.close();
        reap_.close();
    });
}

}  // namespace sk::agent
