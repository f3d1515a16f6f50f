// One attach session in the shim (`kubectl attach`, docs/protocol.md
// "attach_start"): a tap on a running container instance's own stdio, on a
// data connection of its own to the agent socket, opened as an exec
// session's is (exec_attach, then frames: common/daemons/exec_frames.h,
// k8s-shim/exec_session.h says why a connection per session).
//
// Contract:
// - start() connects; started(status) runs once: ok once the session is
//   attached to the container (asked again with `resolve` when the agent
//   answered exec_attach: the container may have stopped meanwhile), else
//   why not (the agent socket unreachable, exec_attach refused, the
//   container gone); nothing is sent on the connection then.
// - The container's stdout and stderr from then on go out as Stdout and
//   Stderr frames (those the request asked for) of at most
//   kMaxExecFramePayload. The CRI log gets them as before: a tee, never a
//   diversion. The container is never held up by a session: one whose
//   connection holds more than kMaxQueuedBytes unsent is dropped (its
//   connection closed), the container and its log unaffected.
// - Stdin frames (when the request had stdin) are written to the container's
//   stdin pipe (spec.stdin); while that pipe holds more than
//   Container::kMaxStdinQueued, the connection is not read. A Close frame
//   [0] closes the container's stdin only when the container has
//   spec.stdinOnce; so does the end of such a session (Kubernetes' stdinOnce:
//   stdin stays closed until the container restarts). Resize frames are
//   ignored (containers get no terminal).
// - When the container instance exits, its Exit frame {"exit_code"} goes out
//   (after all its output) and the connection is closed.
// - When the agent closes the connection (the client went away), on a
//   protocol error, and on close(): the session ends; nothing is killed.
// - ended() runs once, after started(), when the session's connection is
//   closed; the owner destroys the session later, never from inside ended().
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/daemons/exec_frames.h"
#include "common/daemons/shim_protocol.h"
#include "common/result.h"
#include "k8s-shim/attach_handshake.h"
#include "k8s-shim/container.h"
#include "uv/handles.h"

namespace sk::shim {

class AttachSession : public ContainerTap {
  public:
    static constexpr size_t kMaxQueuedBytes = size_t{1} << 20;

    // The running instance to tap, or why there is none (PodRunner::attach_container).
    using Resolve = std::function<Result<Container *>()>;
    using Started = std::function<void(const Status &)>;
    using Ended = std::function<void()>;

    AttachSession(uv_loop_t *loop, proto::AttachStart request, Resolve resolve, Started started,
                  Ended ended);
    ~AttachSession() override;  // detaches from the container
    AttachSession(const AttachSession &) = delete;
    AttachSession &operator=(const AttachSession &) = delete;

    void start(const std::string &socket_path);
    // Ends the session now (the connection closed), leaving the container as it is.
    void close(const std::string &why);

    const proto::AttachStart &request() const { return req_; }

  private:
    void tap_output(bool is_stderr, std::string_view bytes) override;
    void tap_exit(std::optional<int> exit_code) override;
    void tap_stdin_drained() override;

    void on_connected(int status);
    void on_data(ssize_t n, const char *data);
    void on_accepted();  // the agent took the data connection: tap the container
    void on_frames(std::string_view bytes);
    void read_input(bool on);
    void finish_start(const Status &st);
    void end();

    uv_loop_t *loop_;
    proto::AttachStart req_;
    Resolve resolve_;
    Started started_;
    Ended ended_;

    Pipe data_;
    AttachHandshake handshake_{req_.session};  // the data connection's exec_attach, its reply
    bool attached_ = false;
    proto::ExecFrameDecoder frames_{proto::ExecDirection::ToShim};
    Container *container_ = nullptr;  // while attached to a running instance
    bool input_paused_ = false;
    bool start_reported_ = false, ended_reported_ = false;
};

}  // namespace sk::shim
