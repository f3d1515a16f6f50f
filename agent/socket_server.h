// The agent's unix socket: newline-delimited JSON (common/daemons/protocol.h), peers
// identified by SO_PEERCRED at accept. Each connection reads lines through a
// bounded LineBuffer; a malformed or oversized message closes that
// connection only, until attach makes it a shim's link (set_link_bound:
// a larger bound, and an oversized line is dropped, the link kept). The server does not decide
// anything: it hands requests (with the peer's credentials) to a handler, which replies on the
// connection, possibly later (deregister), or takes the connection over
// (attach: the shim runtime then reads the lines).
//
// Admission (docs/security.md, "Who can talk to the agent socket"; the
// decision: admit_connection, agent/core/peer_auth.h): every connection is put
// at accept, by its SO_PEERCRED uid, into one of three pools, so that no
// local user can crowd out the prolog/epilog or a job's shim:
//   admin  root and the SlurmUser: admin_connections of their own, then the
//          user pool (no per-uid bound);
//   shim   a uid with registered jobs: one connection per such job, which no
//          other uid can take (a shim attaches on one);
//   user   everything else: max_connections in all, max_per_uid per uid.
// A connection none of them takes is answered with an error reply of id 0
// (common/daemons/protocol.h: a reply about the connection, not about a request) and
// closed. A connection that has no request in progress and sends no complete
// request within idle_timeout_ms (from its accept or its last reply) is
// closed, so idle and slow-loris peers free their slot; a connection handed
// over (set_line_handler: attach) is its new owner's to time out.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "agent/core/peer_auth.h"
#include "common/daemons/protocol.h"
#include "uv/handles.h"

typedef struct uv_loop_s uv_loop_t;

namespace sk::agent {

class Connection : public std::enable_shared_from_this<Connection> {
  public:
    using LineHandler = std::function<void(const std::string &line)>;

    const PeerCred &peer() const { return peer_; }
    uint64_t id() const { return id_; }
    bool closed() const { return closed_; }
    void send(const std::string &line);  // line includes its '\n'
    // Sends the reply to a request; the last one in progress re-arms the
    // idle timeout.
    void reply(const proto::Reply &r);
    void close();
    // Takes the socket out of the server (an exec session's data connection
    // after its exec_attach line: docs/protocol.md): returns a duplicate of
    // its descriptor (close-on-exec, the caller's to close) and in *rest
    // the bytes already read after the last line, then closes this
    // connection without shutting the socket down. -1 when closed.
    int take_fd(std::string *rest);
    // Hands the connection over (attach: to a shim runtime): its lines go to
    // h, and the idle timeout no longer applies.
    void set_line_handler(LineHandler h);
    void set_close_handler(std::function<void()> h) { on_close_ = std::move(h); }
    // An attached shim's link (common/daemons/shim_protocol.h): lines up to max_line,
    // an oversized one dropped with a warning instead of closing.
    void set_link_bound(size_t max_line) {
        buf_.set_max(max_line);
        drop_oversize_ = true;
    }

  private:
    friend class SocketServer;
    void arm_idle();
    void on_bytes(ssize_t n, const char *data);  // the pipe's reads (n < 0: EOF or error)
    Pipe pipe_;
    uv_loop_t *loop_ = nullptr;
    PeerCred peer_;
    uint64_t id_ = 0;
    bool closed_ = false;
    proto::LineBuffer buf_;
    bool drop_oversize_ = false;
    bool keep_socket_ = false;  // take_fd: close without shutdown()
    LineHandler on_line_;
    std::function<void()> on_close_;
    std::function<void()> on_release_;  // the server's bookkeeping, whoever owns the lines
    Pool pool_ = Pool::None;
    bool handed_over_ = false;
    size_t in_progress_ = 0;  // requests handed to the handler and not replied to yet
    uint64_t idle_ms_ = 0;
    Timer idle_;
    std::shared_ptr<Connection> self_;  // keeps the object alive until close()
};

class SocketServer {
  public:
    using RequestHandler =
        std::function<void(const std::shared_ptr<Connection> &conn, const proto::Request &req)>;

    using Classifier = std::function<PeerStanding(const PeerCred &peer)>;

    SocketServer(uv_loop_t *loop, std::string path, unsigned mode, SocketLimits limits,
                 Classifier classify, RequestHandler handler);
    ~SocketServer();
    // Removes a stale socket file, binds, chmods, listens.
    Status start();
    void stop();  // closes the listener and every connection
    size_t connections() const { return conns_.size(); }

  private:
    // At most kAcceptBurst connections are accepted per loop iteration; a
    // further one is left pending (libuv stops watching the listener until
    // it is accepted) and taken on the next iteration, so that a peer's
    // connect loop, which libuv would otherwise accept from until the queue
    // is empty, never starves the loop's other handles: the admin socket,
    // the shims' links, the API server's replies.
    static constexpr unsigned kAcceptBurst = 16;
    void on_incoming();
    void accept_one();
    void refuse(const std::shared_ptr<Connection> &conn, const Failure &why);
    void release(const Connection &c);
    // Closes the connections whose peer has gone (EOF pending, nothing in
    // progress, not handed over); how many.
    size_t reap_gone_peers();
    uv_loop_t *loop_;
    std::string path_;
    unsigned mode_;
    SocketLimits limits_;
    Classifier classify_;
    RequestHandler handler_;
    size_t admin_count_ = 0, user_total_ = 0;
    std::map<uint32_t, size_t> shim_of_uid_, user_of_uid_;
    // Refusals are logged once per uid per kRefusalLogMs, with a count.
    struct RefusalLog {
        uint64_t last_ms = 0;
        size_t suppressed = 0;
    };
    std::map<uint32_t, RefusalLog> refusal_log_;
    Pipe listener_;
    uint64_t burst_ms_ = UINT64_MAX;  // uv_now() of the burst being counted
    unsigned burst_ = 0;
    bool accept_deferred_ = false;
    Timer resume_;  // takes the pending connection on the next iteration
    uint64_t next_id_ = 1;
    std::set<std::shared_ptr<Connection>> conns_;
};

}  // namespace sk::agent
