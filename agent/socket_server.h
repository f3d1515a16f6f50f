// The agent's unix socket: newline-delimited JSON (common/protocol.h), peers
// identified by SO_PEERCRED at accept. Each connection reads lines through a
// bounded LineBuffer; a malformed or oversized message closes that
// connection only, until attach makes it a shim's link (set_link_bound:
// a larger bound, and an oversized line is dropped, the link kept). The server does not decide
// anything: it hands requests (with the peer's credentials) to a handler, which replies on the
// connection, possibly later (deregister), or takes the connection over
// (attach: the shim runtime then reads the lines).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "agent/peer_auth.h"
#include "common/protocol.h"

typedef struct uv_loop_s uv_loop_t;
typedef struct uv_pipe_s uv_pipe_t;

namespace sk::agent {

class Connection : public std::enable_shared_from_this<Connection> {
  public:
    using LineHandler = std::function<void(const std::string &line)>;

    const PeerCred &peer() const { return peer_; }
    uint64_t id() const { return id_; }
    bool closed() const { return closed_; }
    void send(const std::string &line);  // line includes its '\n'
    void reply(const proto::Reply &r) { send(proto::encode(r)); }
    void close();
    // Replaces how lines are handled (attach hands the connection to a runtime).
    void set_line_handler(LineHandler h) { on_line_ = std::move(h); }
    void set_close_handler(std::function<void()> h) { on_close_ = std::move(h); }
    // An attached shim's link (common/shim_protocol.h): lines up to max_line,
    // an oversized one dropped with a warning instead of closing.
    void set_link_bound(size_t max_line) {
        buf_.set_max(max_line);
        drop_oversize_ = true;
    }

    struct Impl;

  private:
    friend class SocketServer;
    friend struct Impl;
    uv_pipe_t *pipe_ = nullptr;
    PeerCred peer_;
    uint64_t id_ = 0;
    bool closed_ = false;
    proto::LineBuffer buf_;
    bool drop_oversize_ = false;
    LineHandler on_line_;
    std::function<void()> on_close_;
    std::shared_ptr<Connection> self_;  // keeps the object alive while the pipe is open
};

class SocketServer {
  public:
    using RequestHandler =
        std::function<void(const std::shared_ptr<Connection> &conn, const proto::Request &req)>;

    SocketServer(uv_loop_t *loop, std::string path, unsigned mode, size_t max_connections,
                 RequestHandler handler);
    ~SocketServer();
    // Removes a stale socket file, binds, chmods, listens.
    Status start();
    void stop();  // closes the listener and every connection
    size_t connections() const { return conns_.size(); }

    struct Impl;

  private:
    friend struct Impl;
    void accept_one();
    uv_loop_t *loop_;
    std::string path_;
    unsigned mode_;
    size_t max_conns_;
    RequestHandler handler_;
    uv_pipe_t *listener_ = nullptr;
    uint64_t next_id_ = 1;
    std::set<std::shared_ptr<Connection>> conns_;
};

}  // namespace sk::agent
