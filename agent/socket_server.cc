#include "agent/socket_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace sk::agent {

struct Connection::Impl {
    static void on_alloc(uv_handle_t *, size_t, uv_buf_t *buf) noexcept {
        static thread_local char slab[65536];
        buf->base = slab;
        buf->len = sizeof slab;
    }

    static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) noexcept {
        auto *c = static_cast<Connection *>(s->data);
        if (n < 0) {
            c->close();
            return;
        }
        if (n == 0) return;
        std::shared_ptr<Connection> keep = c->self_;
        try {
            auto st = c->buf_.feed(buf->base, static_cast<size_t>(n));
            if (!st && c->drop_oversize_) {
                LOG_WARN("socket: connection %llu (uid %u pid %d): %s; dropped it",
                         static_cast<unsigned long long>(c->id_), c->peer_.uid, c->peer_.pid,
                         st.message().c_str());
            } else if (!st) {
                LOG_WARN("socket: connection %llu (uid %u pid %d): %s; closing it",
                         static_cast<unsigned long long>(c->id_), c->peer_.uid, c->peer_.pid,
                         st.message().c_str());
                c->reply(proto::error_reply(0, st.failure()));
                c->close();
                return;
            }
            while (!c->closed_) {
                auto line = c->buf_.next();
                if (!line) break;
                if (c->on_line_) c->on_line_(*line);
            }
        } catch (const std::exception &e) {
            LOG_ERROR("socket: connection %llu: %s", static_cast<unsigned long long>(c->id_),
                      e.what());
            c->close();
        }
    }
};

void Connection::send(const std::string &line) {
    if (closed_) return;
    struct W {
        uv_write_t req;
        std::string data;
    };
    auto *w = new W;
    w->data = line;
    uv_buf_t b = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    w->req.data = w;
    int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t *>(pipe_), &b, 1,
                      [](uv_write_t *r, int) { delete static_cast<W *>(r->data); });
    if (rc != 0) {
        delete w;
        close();
    }
}

void Connection::close() {
    if (closed_) return;
    closed_ = true;
    auto handler = std::move(on_close_);
    on_line_ = nullptr;
    uv_read_stop(reinterpret_cast<uv_stream_t *>(pipe_));
    pipe_->data = this;
    auto close_cb = [](uv_handle_t *h) {
        auto *c = static_cast<Connection *>(h->data);
        delete reinterpret_cast<uv_pipe_t *>(h);
        c->pipe_ = nullptr;
        c->self_.reset();  // may destroy c
    };
    // Shut down first so that queued replies (an error reason) still go out.
    auto *sr = new uv_shutdown_t;
    sr->data = reinterpret_cast<void *>(+close_cb);
    if (uv_shutdown(sr, reinterpret_cast<uv_stream_t *>(pipe_), [](uv_shutdown_t *r, int) {
            auto cb = reinterpret_cast<uv_close_cb>(r->data);
            uv_close(reinterpret_cast<uv_handle_t *>(r->handle), cb);
            delete r;
        }) != 0) {
        delete sr;
        uv_close(reinterpret_cast<uv_handle_t *>(pipe_), close_cb);
    }
    if (handler) handler();
}

struct SocketServer::Impl {
    static void on_connection(uv_stream_t *s, int status) noexcept {
        auto *self = static_cast<SocketServer *>(s->data);
        if (status < 0) {
            LOG_WARN("socket: accept failed: %s", uv_strerror(status));
            return;
        }
        try {
            self->accept_one();
        } catch (const std::exception &e) {
            LOG_ERROR("socket: accept: %s", e.what());
        }
    }
};

SocketServer::SocketServer(uv_loop_t *loop, std::string path, unsigned mode, size_t max_connections,
                           RequestHandler handler)
    : loop_(loop),
      path_(std::move(path)),
      mode_(mode),
      max_conns_(max_connections),
      handler_(std::move(handler)) {}

SocketServer::~SocketServer() {
    stop();
}

Status SocketServer::start() {
    listener_ = new uv_pipe_t;
    uv_pipe_init(loop_, listener_, 0);
    listener_->data = this;
    struct stat st;
    if (lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path_.c_str());
    int rc = uv_pipe_bind(listener_, path_.c_str());
    if (rc == 0 && chmod(path_.c_str(), mode_) != 0) rc = -errno;
    if (rc == 0)
        rc = uv_listen(reinterpret_cast<uv_stream_t *>(listener_), 128, Impl::on_connection);
    if (rc != 0) {
        uv_close(reinterpret_cast<uv_handle_t *>(listener_),
                 [](uv_handle_t *h) { delete reinterpret_cast<uv_pipe_t *>(h); });
        listener_ = nullptr;
        return fail(Error::Io, "cannot listen on " + path_ + ": " + uv_strerror(rc) +
                                   " (is another agent running? is the directory there?)");
    }
    return {};
}

void SocketServer::stop() {
    if (listener_) {
        uv_close(reinterpret_cast<uv_handle_t *>(listener_),
                 [](uv_handle_t *h) { delete reinterpret_cast<uv_pipe_t *>(h); });
        listener_ = nullptr;
        unlink(path_.c_str());
    }
    auto conns = conns_;
    for (const auto &c : conns)
        c->close();
    conns_.clear();
}

void SocketServer::accept_one() {
    auto *pipe = new uv_pipe_t;
    uv_pipe_init(loop_, pipe, 0);
    if (uv_accept(reinterpret_cast<uv_stream_t *>(listener_),
                  reinterpret_cast<uv_stream_t *>(pipe)) != 0) {
        uv_close(reinterpret_cast<uv_handle_t *>(pipe),
                 [](uv_handle_t *h) { delete reinterpret_cast<uv_pipe_t *>(h); });
        return;
    }
    auto conn = std::make_shared<Connection>();
    conn->pipe_ = pipe;
    conn->id_ = next_id_++;
    conn->self_ = conn;
    pipe->data = conn.get();
    uv_os_fd_t fd;
    struct ucred cred = {};
    socklen_t len = sizeof cred;
    if (uv_fileno(reinterpret_cast<uv_handle_t *>(pipe), &fd) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        conn->peer_ = PeerCred{cred.pid, cred.uid, cred.gid};
    }
    if (conns_.size() >= max_conns_) {
        LOG_WARN("socket: %zu connections open, refusing one from uid %u", conns_.size(), cred.uid);
        conn->reply(proto::error_reply(0, fail(Error::Unavailable, "too many connections")));
        conn->close();
        return;
    }
    conns_.insert(conn);
    std::weak_ptr<Connection> weak = conn;
    conn->set_close_handler([this, weak] {
        if (auto c = weak.lock()) conns_.erase(c);
    });
    conn->set_line_handler([this, weak](const std::string &line) {
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
    });
    uv_read_start(reinterpret_cast<uv_stream_t *>(pipe), Connection::Impl::on_alloc,
                  Connection::Impl::on_read);
}

}  // namespace sk::agent
