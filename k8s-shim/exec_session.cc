#include "k8s-shim/exec_session.h"

#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include <uv.h>

#include "common/daemons/protocol.h"
#include "common/log.h"
#include "common/procfs.h"

namespace sk::shim {

ExecSession::ExecSession(uv_loop_t *loop, proto::ExecStart request, SpawnSpec spec,
                         std::string supervisor, Started started, Ended ended)
    : loop_(loop),
      req_(std::move(request)),
      spec_(std::move(spec)),
      supervisor_(std::move(supervisor)),
      started_(std::move(started)),
      ended_(std::move(ended)) {}

ExecSession::~ExecSession() {
    if (pid_ > 0 && !exited_) kill_supervised(pid_);
}

void ExecSession::start(const std::string &socket_path) {
    data_ = Pipe(loop_);
    data_.connect(socket_path, [this](int status) { on_connected(status); });
}

void ExecSession::on_connected(int status) {
    if (status != 0) {
        finish_start(fail(Error::Unavailable, std::string("cannot connect to the agent socket: ") +
                                                  uv_strerror(status)));
        end();
        return;
    }
    data_.write(handshake_.request());
    data_.read_start([this](ssize_t n, const char *data) { on_data(n, data); });
}

void ExecSession::on_data(ssize_t n, const char *data) {
    if (n < 0) {
        // The agent closed the session (its client went away) or the link broke.
        if (!attached_) {
            finish_start(handshake_.closed_early("exec"));
            end();
        } else {
            kill("connection closed");
        }
        return;
    }
    std::string_view bytes(data, static_cast<size_t>(n));
    if (!attached_) {
        AttachHandshake::Step s = handshake_.feed(bytes);
        if (s.state == AttachHandshake::State::Pending) return;
        if (s.state == AttachHandshake::State::Refused) {
            finish_start(s.why);
            end();
            return;
        }
        attached_ = true;
        spawn();
        if (!attached_) return;
        bytes = s.rest;
    }
    if (!bytes.empty()) on_frames(bytes);
}

void ExecSession::spawn() {
    SpawnStdio io;
    int slave = -1;
    if (req_.tty) {
        int master = -1;
        if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
            std::string why = std::string("cannot open a terminal: ") + strerror(errno);
            send(proto::ExecChannel::Exit, proto::exit_error_payload(why));
            finish_start(fail(Error::Io, why));
            maybe_finish();
            return;
        }
        // Neither end may leak into another child of the shim.
        (void)fcntl(master, F_SETFD, FD_CLOEXEC);
        (void)fcntl(slave, F_SETFD, FD_CLOEXEC);
        term_ = Pipe(loop_);
        if (term_.open(master) != 0) {
            close(master);
            close(slave);
            send(proto::ExecChannel::Exit, proto::exit_error_payload("cannot use the terminal"));
            finish_start(fail(Error::Io, "cannot use the terminal"));
            maybe_finish();
            return;
        }
        master_fd_ = master;
        io.terminal_fd = slave;
    } else {
        if (req_.in) {
            in_ = Pipe(loop_);
            io.in = &in_;
        }
        if (req_.out) {
            out_ = Pipe(loop_);
            io.out = &out_;
        }
        if (req_.err) {
            err_ = Pipe(loop_);
            io.err = &err_;
        }
    }
    int rc = spawn_supervised(
        loop_, proc_, supervisor_, spec_, [this](int64_t status, int sig) { on_exit(status, sig); },
        io);
    if (slave >= 0) close(slave);
    if (rc != 0) {
        in_.close();
        out_.close();
        err_.close();
        term_.close();
        std::string why = std::string("cannot start '") + req_.command[0] + "': " + uv_strerror(rc);
        send(proto::ExecChannel::Exit, proto::exit_error_payload(why));
        finish_start(fail(Error::Io, why));
        maybe_finish();
        return;
    }
    pid_ = proc_.pid();
    start_ticks_ = proc_start_ticks(pid_);
    auto reader = [this](proto::ExecChannel ch) {
        return [this, ch](ssize_t n, const char *d) { on_output(ch, n, d); };
    };
    if (term_) term_open_ = term_.read_start(reader(proto::ExecChannel::Stdout)) == 0;
    if (out_) out_open_ = out_.read_start(reader(proto::ExecChannel::Stdout)) == 0;
    if (err_) err_open_ = err_.read_start(reader(proto::ExecChannel::Stderr)) == 0;
    finish_start({});
}

Stream *ExecSession::input() {
    if (term_) return &term_;
    if (in_) return &in_;
    return nullptr;
}

void ExecSession::on_frames(std::string_view bytes) {
    std::vector<proto::ExecFrame> frames;
    Status st = frames_.feed(bytes, &frames);
    for (auto &f : frames) {
        Stream *in = input();
        switch (f.channel) {
            case proto::ExecChannel::Stdin:
                if (!in || f.payload.empty() || killed_) break;
                in->write(std::move(f.payload), [this](int) { after_write(); });
                if (in->write_queue_size() > kMaxQueuedBytes) pause_input(true);
                break;
            case proto::ExecChannel::Resize:
                if (master_fd_ >= 0) {
                    auto size = proto::resize_from_payload(f.payload);
                    if (!size) {
                        LOG_WARN("exec session %s: %s", req_.session.c_str(),
                                 size.message().c_str());
                        break;
                    }
                    struct winsize ws {};
                    ws.ws_col = size->width;
                    ws.ws_row = size->height;
                    (void)ioctl(master_fd_, TIOCSWINSZ, &ws);
                }
                break;
            case proto::ExecChannel::Close:
                // The end of stdin: the command reads EOF once the pipe drained.
                // A terminal has no end of input but the session's.
                if (f.payload.size() == 1 && f.payload[0] == 0 && in_)
                    in_.shutdown([this](int) { in_.close(); });
                break;
            default:
                break;  // the decoder lets no other channel through
        }
    }
    if (!st) {
        LOG_WARN("exec session %s: %s; ending it", req_.session.c_str(), st.message().c_str());
        kill("protocol error");
    }
}

void ExecSession::on_output(proto::ExecChannel ch, ssize_t n, const char *data) {
    if (n > 0) {
        output_since_deadline_ = true;
        std::string_view bytes(data, static_cast<size_t>(n));
        while (!bytes.empty()) {
            size_t take = std::min(bytes.size(), proto::kMaxExecFramePayload);
            send(ch, bytes.substr(0, take));
            bytes.remove_prefix(take);
        }
        if (data_.write_queue_size() > kMaxQueuedBytes) pause_output(true);
        return;
    }
    // EOF, or EIO from a terminal whose last writer is gone.
    if (term_open_ && ch == proto::ExecChannel::Stdout && term_) {
        term_open_ = false;
    } else if (ch == proto::ExecChannel::Stdout) {
        out_open_ = false;
    } else {
        err_open_ = false;
    }
    maybe_finish();
}

void ExecSession::send(proto::ExecChannel ch, std::string_view payload) {
    if (!data_) return;
    data_.write(proto::encode_exec_frame(ch, payload), [this](int) { after_write(); });
}

void ExecSession::after_write() {
    if (output_paused_ && data_.write_queue_size() <= kMaxQueuedBytes / 2) pause_output(false);
    Stream *in = input();
    if (input_paused_ && (!in || in->write_queue_size() <= kMaxQueuedBytes / 2)) pause_input(false);
}

void ExecSession::pause_output(bool pause) {
    output_paused_ = pause;
    auto reader = [this](proto::ExecChannel ch) {
        return [this, ch](ssize_t n, const char *d) { on_output(ch, n, d); };
    };
    if (pause) {
        if (term_open_) term_.read_stop();
        if (out_open_) out_.read_stop();
        if (err_open_) err_.read_stop();
        return;
    }
    if (term_open_) term_.read_start(reader(proto::ExecChannel::Stdout));
    if (out_open_) out_.read_start(reader(proto::ExecChannel::Stdout));
    if (err_open_) err_.read_start(reader(proto::ExecChannel::Stderr));
}

void ExecSession::pause_input(bool pause) {
    input_paused_ = pause;
    if (pause)
        data_.read_stop();
    else
        data_.read_start([this](ssize_t n, const char *data) { on_data(n, data); });
}

void ExecSession::on_exit(int64_t status, int sig) {
    exited_ = true;
    exit_code_ = sig ? 128 + sig : static_cast<int>(status);
    pid_ = 0;
    proc_.close();
    in_.close();
    // Output still buffered in the pipes comes first; a descendant that kept
    // them open is gone (the supervisor killed it), so this is short.
    drain_timer_ = Timer(loop_);
    output_since_deadline_ = false;
    drain_timer_.start(kDrainMs, [this] { drain_deadline(); });
    maybe_finish();
}

// libuv runs due timers before it polls: a deadline seen first after a
// stall would otherwise end the drain with the command's last output unread.
void ExecSession::drain_deadline() {
    if (output_since_deadline_) {
        output_since_deadline_ = false;
        deadline_polled_ = false;
        drain_timer_.start(kDrainMs, [this] { drain_deadline(); });
        return;
    }
    if (!deadline_polled_) {
        deadline_polled_ = true;
        drain_timer_.start(kDrainRecheckMs, [this] { drain_deadline(); });
        return;
    }
    out_open_ = err_open_ = term_open_ = false;
    maybe_finish();
}

void ExecSession::maybe_finish() {
    if (pid_ > 0 || out_open_ || err_open_ || term_open_ || finishing_) return;
    finishing_ = true;
    drain_timer_.close();
    out_.close();
    err_.close();
    term_.close();
    master_fd_ = -1;
    if (!killed_ && !exit_sent_ && data_ && exited_) {
        exit_sent_ = true;
        send(proto::ExecChannel::Exit, proto::exit_payload(exit_code_));
    }
    if (data_) {
        data_.read_stop();
        // Closed once the Exit frame (and the output before it) went out.
        data_.shutdown([this](int) {
            data_.close();
            end();
        });
        return;
    }
    end();
}

void ExecSession::kill(const std::string &why) {
    if (killed_) return;
    killed_ = true;
    LOG_INFO("exec session %s in %s: %s, killing '%s'", req_.session.c_str(),
             req_.container.c_str(), why.c_str(), req_.command[0].c_str());
    data_.close();
    if (pid_ > 0) {
        kill_supervised(pid_);  // on_exit follows, then maybe_finish ends the session
        return;
    }
    if (!start_reported_) finish_start(fail(Error::Unavailable, "exec session ended: " + why));
    maybe_finish();
}

void ExecSession::finish_start(const Status &st) {
    if (start_reported_) return;
    start_reported_ = true;
    if (started_) started_(st);
}

void ExecSession::end() {
    if (ended_reported_) return;
    if (!start_reported_) finish_start(fail(Error::Unavailable, "exec session ended"));
    ended_reported_ = true;
    data_.close();
    if (ended_) ended_();
}

}  // namespace sk::shim
