// The agent's side of `kubectl exec` (docs/architecture.md "Exec sessions"):
// the kubelet endpoint hands each upgraded /exec connection here
// (StreamHandler, agent/kubelet/kubelet_server.h); a session speaks the client's
// protocol (SPDY/3.1 or WebSocket v4/v5: agent/kubelet/streams/spdy.h,
// agent/kubelet/streams/ws_channel.h, agent/kubelet/streams/remotecommand.h), asks the job's
// runtime to start the command (exec_start: the job's shim starts it as the job's user, in the
// pod's environment), takes the shim's data connection when it arrives on the agent socket
// (exec_attach, checked against the job's uid) and relays bytes between the two: stdin, stdout,
// stderr, the terminal's size, and at the end the exit status as the kubelet's metav1.Status on the
// error stream. The agent never runs anything itself and reads nothing for the pod.
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
#include <vector>

#include "agent/core/runtime.h"
#include "agent/kubelet/kubelet_server.h"
#include "agent/socket_server.h"
#include "common/daemons/protocol.h"
#include "common/daemons/shim_protocol.h"
#include "common/daemons/tcp_listeners.h"
#include "common/result.h"
#include "uv/handles.h"
#include "uv/thread_loop.h"

namespace sk::agent {

class ExecSession;
class ForwardSession;

// Where a pod's commands run, as the agent knows it on its loop.
struct ExecTarget {
    std::string pod_uid;
    uint32_t job_uid = 0;         // the only uid whose data connection may attach
    std::vector<uint16_t> ports;  // the containerPorts the pod declares (port-forward)
    // The job's runtime's exec_start (agent/core/runtime.h); done on the loop.
    std::function<void(const proto::ExecStart &, PodRuntime::Done)> start;
    std::function<void(const proto::AttachStart &, PodRuntime::Done)> attach;
};
// NotFound when no virtual node of this agent runs the pod.
using ExecResolver =
    std::function<Result<ExecTarget>(const std::string &ns, const std::string &pod)>;
// Before the upgrade, from an HTTP thread (thread-safe): whether the pod and
// its container can take a session (agent/kubelet/log_index.h).
using ExecCheck = std::function<Status(const StreamRequest &req)>;

struct StreamLimits {
    uint64_t creation_timeout_ms = 30000;           // SPDY: every expected stream (the kubelet's)
    uint64_t idle_timeout_ms = 4ULL * 3600 * 1000;  // the kubelet's streaming idle timeout
    uint64_t linger_ms = 10000;                     // the last writes' flush at most
    size_t max_sessions = 64;                       // on this agent
    size_t relay_buffer = 1 << 20;                  // bytes queued per direction
    // port-forward: also to ports the pod does not declare (still only to a
    // listener of the job's user: common/daemons/tcp_listeners.h).
    bool forward_any_port = false;
};

class StreamSessions : public StreamHandler {
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

    class Session;

  private:
    friend class Session;
    friend class ExecSession;
    friend class ForwardSession;
    void take_started();
    void ended();  // a session closed everything: free it soon
    // Sessions' thread: the resolver asked on the agent's loop; cb runs on
    // the sessions' thread, and so do the target's start/attach Done.
    void resolve(const std::string &ns, const std::string &pod,
                 std::function<void(Result<ExecTarget>)> cb);
    // Sessions' thread: an exec session whose data connection may now
    // attach (from the job's uid), and no more.
    void expect_shim(const std::string &id, uint32_t uid);
    void unexpect_shim(const std::string &id);

    ThreadLoop thread_;
    uv_loop_t *loop_;  // thread_'s
    StreamLimits limits_;
    ExecCheck check_;
    ExecResolver resolver_;
    // The listener of uid on port (common/daemons/tcp_listeners.h), from /proc/net.
    std::function<std::optional<Listener>(uint16_t port, uint32_t uid)> find_listener_;
    std::atomic<size_t> count_{0};  // sessions admitted by check() and not yet freed
    std::mutex mu_;
    std::deque<std::pair<StreamRequest, HttpUpgrade>> started_;  // from HTTP threads
    Async wake_;
    Timer reap_;
    uint64_t next_ = 1;
    std::map<std::string, std::unique_ptr<Session>> by_id_;
    bool stopped_ = false;  // sessions' thread
    bool main_stopped_ = false;
    // Exec sessions waiting for their data connection: id -> the job's uid
    // (expect_shim); the agent's loop claims an entry for an exec_attach.
    std::mutex wait_mu_;
    std::map<std::string, uint32_t> waiting_;
};

}  // namespace sk::agent
