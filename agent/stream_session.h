// One streaming session of the kubelet endpoint (docs/architecture.md "Exec
// sessions"): the client's upgraded connection (SPDY/3.1 or WebSocket v4/v5:
// agent/kubelet/streams/), its writes with their bound, its ending (the last
// writes, then the client's close within linger_ms) and its idle timeout. A
// kind of session (exec and attach: exec_session.cc; port-forward:
// forward_session.cc) handles the frames and owns what the bytes are relayed
// to; the table of sessions (StreamSessions, agent/stream_sessions.h) admits
// them and is the SessionHost they ask for the rest. Everything here runs on
// the sessions' thread.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/core/runtime.h"
#include "agent/kubelet/kubelet_server.h"
#include "agent/kubelet/streams/spdy.h"
#include "agent/kubelet/streams/ws_channel.h"
#include "common/daemons/shim_protocol.h"
#include "common/daemons/tcp_listeners.h"
#include "common/result.h"
#include "uv/handles.h"

namespace sk::agent {

// Where a pod's commands run, as the agent knows it on its loop.
struct ExecTarget {
    std::string pod_uid;
    uint32_t job_uid = 0;         // the only uid whose data connection may attach
    std::vector<uint16_t> ports;  // the containerPorts the pod declares (port-forward)
    // Its own network's address (agent/core/pod_networks.h): port-forward
    // connects there, to any port, as a kubelet does (whatever listens in
    // the pod's namespace is the pod's). "" = the node's network.
    std::string pod_ip;
    // The job's runtime's exec_start (agent/core/runtime.h); done on the loop.
    std::function<void(const proto::ExecStart &, PodRuntime::Done)> start;
    std::function<void(const proto::AttachStart &, PodRuntime::Done)> attach;
};

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

// What a session asks of the table that holds it, on the sessions' thread.
class SessionHost {
  public:
    virtual uv_loop_t *loop() const = 0;  // the sessions' loop
    virtual const StreamLimits &limits() const = 0;
    // The pod's target, asked on the agent's loop; cb runs on the sessions'
    // thread, and so do the target's start/attach Done.
    virtual void resolve(const std::string &ns, const std::string &pod,
                         std::function<void(Result<ExecTarget>)> cb) = 0;
    // An exec session whose data connection may now attach (from the job's
    // uid), and no more.
    virtual void expect_shim(const std::string &id, uint32_t uid) = 0;
    virtual void unexpect_shim(const std::string &id) = 0;
    // A session closed everything: free it soon (not now: it is on the stack).
    virtual void ended() = 0;
    // The listener of uid on port (common/daemons/tcp_listeners.h).
    virtual std::optional<Listener> find_listener(uint16_t port, uint32_t uid) const = 0;

  protected:
    ~SessionHost() = default;
};

// "exec", "attach", "port-forward": the log's name of a kind.
const char *stream_kind_name(StreamKind k);

// The client's side of every session; the subclasses' hooks are the
// protected virtuals.
class StreamSession {
  public:
    StreamSession(SessionHost &host, std::string id, StreamRequest req, HttpUpgrade conn);
    virtual ~StreamSession();
    StreamSession(const StreamSession &) = delete;
    StreamSession &operator=(const StreamSession &) = delete;

    bool closed() const { return closed_; }
    // An exec session whose command is being started: its data connection may attach.
    virtual bool waiting_for_shim() const { return false; }
    virtual uint32_t job_uid() const { return 0; }
    virtual void attach_shim(int fd, const std::string & /*rest*/, uint64_t /*req_id*/);

    void begin();

    // Ends everything now (agent stop, protocol errors, the client's close).
    void close_all();

  protected:
    // The connection is set up (WebSocket: the session can start now).
    virtual void on_begun() {}
    virtual void spdy_frame(const spdy::Frame &f) = 0;
    virtual void ws_data(const ws::ChannelMessage &m) = 0;
    // Closes what the session relays to (the shim's data connection, the
    // pod's sockets).
    virtual void close_upstreams() = 0;
    // The client's queue fell below half its bound: upstreams may be read again.
    virtual void client_drained() {}
    // SPDY: whether the session still waits for its streams (creation timeout).
    virtual bool awaiting_streams() const { return false; }

    void on_client(ssize_t n, const char *d);

    void on_client_bytes(std::string_view bytes);

    void ws_message(const ws::Message &m);

    virtual unsigned ws_channels() const { return ws::kExecChannels; }

    // No more bytes to the client after what is queued: the client closes
    // once it read them (kubectl does after the status or the GOAWAY), and
    // so the connection ends; a client that does not is cut off after
    // linger_ms. Not shutdown(): with TLS the server's relay stops
    // reporting the client's close after it (and what it holds could be
    // cut), so the client's end is what tells that everything arrived.
    // A peer that broke the protocol or let its time run out gets its
    // answer and a short while to read it, not the status's linger_ms.
    static constexpr uint64_t kErrorLingerMs = 1000;

    void end_after_writes(uint64_t linger_ms = 0);

    void send_spdy(const spdy::Frame &f);

    void send_client(std::string bytes);

    void pause_client();

    void resume_client();

    // How often a session looks at its client's connection and its
    // deadlines: the client's close is seen within this also while the
    // session does not read the client (paused by a full relay).
    static constexpr uint64_t kTickMs = 250;

    void tick();
    virtual void idle();

    void touch() { last_activity_ = uv_now(host_.loop()); }

    SessionHost &host_;
    std::string id_;
    StreamRequest req_;
    HttpUpgrade conn_;
    std::string prefix_;
    Pipe client_;
    Timer timer_;
    uint64_t started_ms_;
    uint64_t last_activity_ = 0;
    uint64_t ending_ms_ = 0;    // when end_after_writes came, or its writes last moved
    size_t ending_queued_ = 0;  // bytes still queued for the client at the last tick
    uint64_t linger_ms_ = 0;    // how long the client may take to close then
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for callbacks that outlive us
    bool ending_ = false;                                         // no more writes to the client
    bool closed_ = false;                                         // everything closed
    bool client_paused_ = false;
    bool client_full_ = false;  // the client's queue is over its bound
    spdy::Decoder spdy_decoder_;
    spdy::Encoder spdy_encoder_;
    uint32_t last_client_stream_ = 0;
    ws::FrameDecoder ws_decoder_;
    ws::ChannelProtocol ws_proto_ = ws::ChannelProtocol::V4;
};

// A session of each kind: exec and attach (the command's streams relayed to
// the job's shim over its data connection), port-forward (connections
// relayed to the pod's listeners).
std::unique_ptr<StreamSession> new_exec_session(SessionHost &host, std::string id,
                                                StreamRequest req, HttpUpgrade conn);
std::unique_ptr<StreamSession> new_forward_session(SessionHost &host, std::string id,
                                                   StreamRequest req, HttpUpgrade conn);

}  // namespace sk::agent
