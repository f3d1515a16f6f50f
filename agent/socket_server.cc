#include "agent/socket_server.h"

#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace sk::agent {
namespace {

constexpr uint64_t kRefusalLogMs = 10000;

}  // namespace

void Connection::on_bytes(ssize_t n, const char *data) {
    if (n < 0) {
        close();
        return;
    }
    std::shared_ptr<Connection> keep = self_;
    try {
        auto st = buf_.feed(data, static_cast<size_t>(n));
        if (!st && drop_oversize_) {
            LOG_WARN("socket: connection %llu (uid %u pid %d): %s; dropped it",
                     static_cast<unsigned long long>(id_), peer_.uid, peer_.pid,
                     st.message().c_str());
        } else if (!st) {
            LOG_WARN("socket: connection %llu (uid %u pid %d): %s; closing it",
                     static_cast<unsigned long long>(id_), peer_.uid, peer_.pid,
                     st.message().c_str());
            reply(proto::error_reply(0, st.failure()));
            close();
            return;
        }
        while (!closed_) {
            auto line = buf_.next();
            if (!line) break;
            if (!handed_over_) {
                in_progress_++;
                idle_.stop();
            }
            if (on_line_) on_line_(*line);
        }
    } catch (const std::exception &e) {
        LOG_ERROR("socket: connection %llu: %s", static_cast<unsigned long long>(id_), e.what());
        close();
    }
}

void Connection::set_line_handler(LineHandler h) {
    on_line_ = std::move(h);
    handed_over_ = true;
    idle_.close();
}

void Connection::reply(const proto::Reply &r) {
    send(proto::encode(r));
    if (in_progress_ > 0 && --in_progress_ == 0) arm_idle();
}

void Connection::arm_idle() {
    if (closed_ || handed_over_ || idle_ms_ == 0) return;
    idle_.start(idle_ms_, [this] {
        LOG_VERBOSE("socket: connection %llu (uid %u pid %d): no request in %llu ms; closing it",
                    static_cast<unsigned long long>(id_), peer_.uid, peer_.pid,
                    static_cast<unsigned long long>(idle_ms_));
        std::shared_ptr<Connection> keep = self_;
        send(proto::encode(proto::error_reply(
            0, fail(Error::Timeout, "no complete request within " +
                                        std::to_string(idle_ms_ / 1000) + " s; closing"))));
        close();
    });
}

void Connection::send(const std::string &line) {
    if (closed_) return;
    if (pipe_.write(line) != 0) close();
}

int Connection::take_fd(std::string *rest) {
    if (closed_) return -1;
    const int fd = pipe_.fileno();
    if (fd < 0) return -1;
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return -1;
    *rest = buf_.take_rest();
    keep_socket_ = true;
    close();
    return dup;
}

void Connection::close() {
    if (closed_) return;
    closed_ = true;
    idle_.close();
    auto handler = std::move(on_close_);
    auto release = std::move(on_release_);
    on_line_ = nullptr;
    pipe_.read_stop();
    // The object outlives this call, as its socket's last steps do: until
    // the shutdown is done, else until the next loop iteration (a caller up
    // the stack may be one of its own callbacks).
    std::shared_ptr<Connection> keep = std::move(self_);
    // Shut down first so that queued replies (an error reason) still go out;
    // not when the socket lives on in another descriptor (take_fd).
    if (keep_socket_ || pipe_.shutdown([this, keep](int) { pipe_.close(); }) != 0) {
        pipe_.close();
        defer(loop_, [keep] {});
    }
    if (release) release();
    if (handler) handler();
}

void SocketServer::on_incoming() {
    const uint64_t now = uv_now(loop_);
    if (now != burst_ms_) {
        burst_ms_ = now;
        burst_ = 0;
    }
    if (burst_ >= kAcceptBurst) {
        if (!accept_deferred_) {
            accept_deferred_ = true;
            resume_.start(0, [this] {
                accept_deferred_ = false;
                burst_ms_ = uv_now(loop_);
                burst_ = 1;
                if (listener_) accept_one();
            });
        }
        return;
    }
    burst_++;
    accept_one();
}

SocketServer::SocketServer(uv_loop_t *loop, std::string path, unsigned mode, SocketLimits limits,
                           Classifier classify, RequestHandler handler)
    : loop_(loop),
      path_(std::move(path)),
      mode_(mode),
      limits_(limits),
      classify_(std::move(classify)),
      handler_(std::move(handler)) {}

SocketServer::~SocketServer() {
    stop();
}

Status SocketServer::start() {
    resume_ = Timer(loop_);
    listener_ = Pipe(loop_);
    struct stat st;
    if (lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path_.c_str());
    int rc = listener_.bind(path_);
    if (rc == 0 && chmod(path_.c_str(), mode_) != 0) rc = -errno;
    if (rc == 0)
        // The kernel's cap (net.core.somaxconn): room for a burst of job
        // starts beside another user's connect loop; clients wait for room
        // (common/agent_call.cc).
        rc = listener_.listen(SOMAXCONN, [this](int status) {
            if (status < 0) {
                LOG_WARN("socket: accept failed: %s", uv_strerror(status));
                return;
            }
            on_incoming();
        });
    if (rc != 0) {
        listener_.close();
        return fail(Error::Io, "cannot listen on " + path_ + ": " + uv_strerror(rc) +
                                   " (is another agent running? is the directory there?)");
    }
    return {};
}

void SocketServer::stop() {
    resume_.stop();
    accept_deferred_ = false;
    if (listener_) {
        listener_.close();
        unlink(path_.c_str());
    }
    auto conns = conns_;
    for (const auto &c : conns)
        c->close();
    conns_.clear();
}

void SocketServer::accept_one() {
    Pipe pipe(loop_);
    if (listener_.accept(pipe) != 0) return;
    auto conn = std::make_shared<Connection>();
    conn->pipe_ = std::move(pipe);
    conn->loop_ = loop_;
    conn->id_ = next_id_++;
    conn->self_ = conn;
    const int fd = conn->pipe_.fileno();
    struct ucred cred = {};
    socklen_t len = sizeof cred;
    if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        conn->peer_ = PeerCred{cred.pid, cred.uid, cred.gid};
    }
    const PeerStanding standing = classify_ ? classify_(conn->peer_) : PeerStanding{};
    auto admit = [&] {
        PoolCounts n;
        n.admin = admin_count_;
        n.user_total = user_total_;
        if (auto it = shim_of_uid_.find(conn->peer_.uid); it != shim_of_uid_.end())
            n.shim_of_uid = it->second;
        if (auto it = user_of_uid_.find(conn->peer_.uid); it != user_of_uid_.end())
            n.user_of_uid = it->second;
        return admit_connection(standing, conn->peer_.uid, n, limits_);
    };
    auto pool = admit();
    // Full: connections whose peers already went may still count (their
    // EOF not read yet: this accept can come first in the loop). Those are
    // let go, and the newcomer asked again.
    if (!pool && pool.error() == Error::Unavailable && reap_gone_peers() > 0) pool = admit();
    if (!pool) return refuse(conn, pool.failure());
    conn->pool_ = *pool;
    if (*pool == Pool::Admin) admin_count_++;
    if (*pool == Pool::Shim) shim_of_uid_[conn->peer_.uid]++;
    if (*pool == Pool::User) {
        user_total_++;
        user_of_uid_[conn->peer_.uid]++;
    }
    conns_.insert(conn);
    conn->on_release_ = [this, raw = conn.get()] { release(*raw); };
    conn->idle_ = Timer(loop_);
    conn->idle_ms_ = limits_.idle_timeout_ms;
    conn->arm_idle();
    std::weak_ptr<Connection> weak = conn;
    conn->on_line_ = [this, weak](const std::string &line) {
        auto c = weak.lock();
        if (!c) return;
        auto req = proto::decode_request(line);
        if (!req) {
            LOG_WARN("socket: connection %llu (uid %u): %s; closing it",
                     static_cast<unsigned long long>(c->id()), c->peer().uid,
                     req.message().c_str());
            c->reply(proto::error_reply(0, req.failure()));
            c->close();
            return;
        }
        handler_(c, *req);
    };
    // The Connection owns its pipe: the callback never outlives it.
    conn->pipe_.read_start([c = conn.get()](ssize_t n, const char *data) { c->on_bytes(n, data); });
}

void SocketServer::refuse(const std::shared_ptr<Connection> &conn, const Failure &why) {
    const uint32_t uid = conn->peer_.uid;
    const uint64_t now = uv_now(loop_);
    if (refusal_log_.size() > 4096) refusal_log_.clear();  // bounded whatever the peers do
    RefusalLog &rl = refusal_log_[uid];
    if (rl.last_ms == 0 || now - rl.last_ms >= kRefusalLogMs) {
        std::string more =
            rl.suppressed ? " (and " + std::to_string(rl.suppressed) + " more not logged)" : "";
        LOG_WARN("socket: refused a connection from uid %u pid %d: %s%s", uid, conn->peer_.pid,
                 why.message.c_str(), more.c_str());
        rl.last_ms = now;
        rl.suppressed = 0;
    } else {
        rl.suppressed++;
    }
    conn->reply(proto::error_reply(0, why));
    conn->close();
}

size_t SocketServer::reap_gone_peers() {
    size_t n = 0;
    auto conns = conns_;
    for (const auto &c : conns) {
        // Only a connection with nothing in progress: a peer that sent its
        // request and shut its side down still waits for the reply.
        if (c->closed_ || c->handed_over_ || c->in_progress_ > 0) continue;
        const int fd = c->pipe_.fileno();
        if (fd < 0) continue;
        char b;
        if (recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 0) continue;  // data, or still open
        c->close();
        n++;
    }
    return n;
}

void SocketServer::release(const Connection &c) {
    auto drop = [](std::map<uint32_t, size_t> &m, uint32_t uid) {
        auto it = m.find(uid);
        if (it != m.end() && --it->second == 0) m.erase(it);
    };
    if (c.pool_ == Pool::Admin) admin_count_--;
    if (c.pool_ == Pool::Shim) drop(shim_of_uid_, c.peer_.uid);
    if (c.pool_ == Pool::User) {
        user_total_--;
        drop(user_of_uid_, c.peer_.uid);
    }
    for (auto it = conns_.begin(); it != conns_.end(); ++it)
        if (it->get() == &c) {
            conns_.erase(it);  // c lives on while its socket closes (Connection::close)
            break;
        }
}

}  // namespace sk::agent
