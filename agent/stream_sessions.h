// The agent's table of streaming sessions (`kubectl exec`, `attach`,
// `port-forward`; docs/architecture.md "Exec sessions"): the kubelet endpoint
// hands each upgraded connection here (StreamHandler,
// agent/kubelet/kubelet_server.h), which admits it within max_sessions, makes
// the session of its kind (agent/stream_session.h: exec_session.cc,
// forward_session.cc), routes a shim's data connection (exec_attach on the
// agent socket, checked against the job's uid) to the session that waits for
// it, and frees sessions once they closed everything.
//
// A session ends when the command exits (status, then the client's close or
// its flush), when the client goes away (the data connection is closed: the
// shim kills the command), on a protocol error from either side, after the
// SPDY streams did not all arrive in time, or after idle_timeout without a
// byte either way. Bounded: max_sessions on the node, relay_buffer bytes per
// direction before the relay stops reading its source.
//
// Threads: check() and start() come from the HTTP server's threads;
// set_resolver(), attach() and stop() from the agent's loop, which alone
// runs the resolver and the targets' start/attach (the job's runtime); the
// sessions themselves run on a loop and thread of their own
// (uv/thread_loop.h, "sk-streams", at `relay_nice`): what they relay is
// scheduled behind the agent's loop, which keeps the pods' status
// (docs/architecture.md, "Priorities").
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/kubelet/kubelet_server.h"
#include "agent/socket_server.h"
#include "agent/stream_session.h"
#include "common/daemons/protocol.h"
#include "common/result.h"
#include "uv/handles.h"
#include "uv/thread_loop.h"

namespace sk::agent {

// NotFound when no virtual node of this agent runs the pod.
using ExecResolver =
    std::function<Result<ExecTarget>(const std::string &ns, const std::string &pod)>;
// Before the upgrade, from an HTTP thread (thread-safe): whether the pod and
// its container can take a session (agent/kubelet/log_index.h).
using ExecCheck = std::function<Status(const StreamRequest &req)>;

class StreamSessions : public StreamHandler, private SessionHost {
  public:
    // main: the agent's loop. relay_nice: the sessions' thread's nice value
    // (none: the agent's).
    StreamSessions(uv_loop_t *main, const StreamLimits &limits, ExecCheck check,
                   std::optional<int> relay_nice = std::nullopt);
    ~StreamSessions() override;
    StreamSessions(const StreamSessions &) = delete;
    StreamSessions &operator=(const StreamSessions &) = delete;

    // The sessions' thread.
    Status start();

    // Agent's loop, before sessions arrive (the agent exists after the
    // kubelet endpoint, whose port the nodes name).
    void set_resolver(ExecResolver r) { resolver_ = std::move(r); }

    Status check(const StreamRequest &req) override;
    void start(StreamRequest req, HttpUpgrade conn) override;

    // Agent's loop: the agent socket's exec_attach request on connection c
    // (a shim's data connection, docs/protocol.md). Answers and closes c on
    // a refusal; otherwise takes its socket over for the session.
    void attach(const std::shared_ptr<Connection> &c, const proto::Request &req);

    // Agent's loop: ends every session (after the HTTP server stopped: no
    // start() can come any more), closes the handles, joins the thread.
    void stop();
    size_t sessions() const { return count_.load(); }

  private:
    void take_started();
    // SessionHost, on the sessions' thread.
    uv_loop_t *loop() const override { return loop_; }
    const StreamLimits &limits() const override { return limits_; }
    void resolve(const std::string &ns, const std::string &pod,
                 std::function<void(Result<ExecTarget>)> cb) override;
    void expect_shim(const std::string &id, uint32_t uid) override;
    void unexpect_shim(const std::string &id) override;
    void ended() override;
    std::optional<Listener> find_listener(uint16_t port, uint32_t uid) const override;

    ThreadLoop thread_;
    uv_loop_t *loop_;  // thread_'s
    StreamLimits limits_;
    ExecCheck check_;
    ExecResolver resolver_;
    std::atomic<size_t> count_{0};  // sessions admitted by check() and not yet freed
    std::mutex mu_;
    std::deque<std::pair<StreamRequest, HttpUpgrade>> started_;  // from HTTP threads
    Async wake_;
    Timer reap_;
    uint64_t next_ = 1;
    std::map<std::string, std::unique_ptr<StreamSession>> by_id_;
    bool stopped_ = false;  // sessions' thread
    bool main_stopped_ = false;
    // Exec sessions waiting for their data connection: id -> the job's uid
    // (expect_shim); the agent's loop claims an entry for an exec_attach.
    std::mutex wait_mu_;
    std::map<std::string, uint32_t> waiting_;
};

}  // namespace sk::agent
