// One exec session in the shim (`kubectl exec`, docs/protocol.md
// "exec_start"): a command run in a running container's environment, working
// directory and confinement, as the job's user, under a supervisor of its own
// (k8s-shim/supervise.h), so that everything it starts is killed with it.
//
// Its bytes travel on a data connection of the session's own, which the shim
// opens to the agent socket (exec_attach, then frames: common/daemons/exec_frames.h):
// the agent relays between that connection and the kubelet client's stream.
// Why a connection and not the shim's link: the link carries JSON lines for
// every pod, and one session's output (a `kubectl cp` of a checkpoint) must
// neither wait behind nor hold up the pods' status; why not descriptors
// passed to the root agent: the agent never holds a job's pipe or terminal,
// it only reads and writes frames from a socket it accepted
// (docs/architecture.md, "Exec sessions").
//
// Contract:
// - start() connects; started(status) runs once: ok once the command runs,
//   else why it did not (the agent socket unreachable, exec_attach refused,
//   the spawn failed: then an Exit frame with the error is sent too).
// - The command's stdout/stderr (or its terminal's output, with tty) go out
//   as frames of at most kMaxExecFramePayload; while the connection holds
//   more than kMaxQueuedBytes unsent, the command's output is not read (the
//   command blocks on a full pipe), and while its stdin pipe holds more than
//   that, the connection is not read. So a session holds a bounded amount.
// - When the command exits, its output is drained (until its pipes end, or
//   kDrainMs without output once the command is gone, a descendant holding
//   them; the deadline is only taken after a poll of the pipes that came
//   after it, so a loop starved past it still reads what the command wrote
//   before exiting), then the Exit frame {"exit_code"} goes out (128 +
//   the signal for a killed command, as a container runtime reports it) and
//   the connection is closed.
// - When the connection closes first (the client went away), on a protocol
//   error, and on kill(): every process of the command is killed (supervisor
//   kill) and the session ends without an Exit frame.
// - ended() runs once, after started(), when nothing of the session runs or
//   is open any more; the owner destroys the session later, never from
//   inside ended().
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/daemons/exec_frames.h"
#include "common/daemons/shim_protocol.h"
#include "common/result.h"
#include "k8s-shim/attach_handshake.h"
#include "k8s-shim/spawn.h"
#include "uv/handles.h"

namespace sk::shim {

class ExecSession {
  public:
    static constexpr size_t kMaxQueuedBytes = size_t{1} << 20;
    static constexpr uint64_t kDrainMs = 2000;
    // After the drain's deadline, the wait for one more poll of the pipes
    // (a terminal's output reaches its master from a kernel worker).
    static constexpr uint64_t kDrainRecheckMs = 100;

    using Started = std::function<void(const Status &)>;
    using Ended = std::function<void()>;

    // spec: what runs (argv = the exec command; env, cwd, confinement of the
    // container); supervisor: the shim's executable (ShimOptions::supervisor).
    ExecSession(uv_loop_t *loop, proto::ExecStart request, SpawnSpec spec, std::string supervisor,
                Started started, Ended ended);
    ~ExecSession();  // kills what still runs
    ExecSession(const ExecSession &) = delete;
    ExecSession &operator=(const ExecSession &) = delete;

    void start(const std::string &socket_path);
    void kill(const std::string &why);

    const proto::ExecStart &request() const { return req_; }
    int pid() const { return pid_; }  // the supervisor's; 0 before the start and after the exit
    unsigned long long start_ticks() const { return start_ticks_; }

  private:
    void on_connected(int status);
    void on_data(ssize_t n, const char *data);
    void spawn();
    void on_frames(std::string_view bytes);
    void on_output(proto::ExecChannel ch, ssize_t n, const char *data);
    void on_exit(int64_t status, int sig);
    void drain_deadline();
    void send(proto::ExecChannel ch, std::string_view payload);
    void after_write();
    void pause_output(bool pause);
    void pause_input(bool pause);
    void maybe_finish();
    void finish_start(const Status &st);
    void end();
    Stream *input();  // where stdin frames go: the terminal or the stdin pipe (null: none)

    uv_loop_t *loop_;
    proto::ExecStart req_;
    SpawnSpec spec_;
    std::string supervisor_;
    Started started_;
    Ended ended_;

    Pipe data_;
    AttachHandshake handshake_{req_.session};  // the data connection's exec_attach, its reply
    bool attached_ = false;
    proto::ExecFrameDecoder frames_{proto::ExecDirection::ToShim};

    Process proc_;
    Pipe in_, out_, err_, term_;
    int master_fd_ = -1;  // term_'s descriptor, for the window size (owned by term_)
    int pid_ = 0;
    unsigned long long start_ticks_ = 0;
    bool exited_ = false;
    int exit_code_ = 0;
    bool out_open_ = false, err_open_ = false, term_open_ = false;
    bool output_paused_ = false, input_paused_ = false;
    Timer drain_timer_;
    bool output_since_deadline_ = false;  // output read during the drain's current period
    bool deadline_polled_ = false;        // the deadline passed and a poll followed it
    bool start_reported_ = false, ended_reported_ = false, exit_sent_ = false;
    bool killed_ = false;
    bool finishing_ = false;  // maybe_finish closed everything but the connection
};

}  // namespace sk::shim
