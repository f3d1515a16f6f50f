#include "k8s-shim/attach_session.h"

#include <uv.h>

#include "common/daemons/protocol.h"
#include "common/log.h"

namespace sk::shim {

AttachSession::AttachSession(uv_loop_t *loop, proto::AttachStart request, Resolve resolve,
                             Started started, Ended ended)
    : loop_(loop),
      req_(std::move(request)),
      resolve_(std::move(resolve)),
      started_(std::move(started)),
      ended_(std::move(ended)) {}

AttachSession::~AttachSession() {
    if (container_) container_->detach(this);
}

void AttachSession::start(const std::string &socket_path) {
    data_ = Pipe(loop_);
    data_.connect(socket_path, [this](int status) { on_connected(status); });
}

void AttachSession::on_connected(int status) {
    if (status != 0) {
        finish_start(fail(Error::Unavailable, std::string("cannot connect to the agent socket: ") +
                                                  uv_strerror(status)));
        end();
        return;
    }
    data_.write(handshake_.request());
    read_input(true);
}

void AttachSession::read_input(bool on) {
    input_paused_ = !on;
    if (on)
        data_.read_start([this](ssize_t n, const char *data) { on_data(n, data); });
    else
        data_.read_stop();
}

void AttachSession::on_data(ssize_t n, const char *data) {
    if (n < 0) {
        if (!attached_) {
            finish_start(handshake_.closed_early("attach"));
            end();
        } else {
            close("the agent closed the connection");
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
        on_accepted();
        if (!attached_) return;
        bytes = s.rest;
    }
    if (!bytes.empty()) on_frames(bytes);
}

void AttachSession::on_accepted() {
    auto c = resolve_();
    if (!c) {
        finish_start(c.failure());
        end();
        return;
    }
    attached_ = true;
    container_ = *c;
    container_->attach(this);
    finish_start({});
}

void AttachSession::on_frames(std::string_view bytes) {
    std::vector<proto::ExecFrame> frames;
    Status st = frames_.feed(bytes, &frames);
    for (auto &f : frames) {
        if (!container_) break;
        switch (f.channel) {
            case proto::ExecChannel::Stdin:
                if (!req_.in || f.payload.empty()) break;
                if (container_->write_stdin(std::move(f.payload)) &&
                    container_->stdin_queued() > Container::kMaxStdinQueued)
                    read_input(false);  // tap_stdin_drained resumes
                break;
            case proto::ExecChannel::Close:
                // The client's end of input: the container's only with stdinOnce
                // (its other clients may still write, as the kubelet's do).
                if (req_.in && f.payload.size() == 1 && f.payload[0] == 0 &&
                    container_->plan->stdin_once)
                    container_->close_stdin();
                break;
            case proto::ExecChannel::Resize:
                if (container_->plan->tty) {
                    auto size = proto::resize_from_payload(f.payload);
                    if (size) container_->resize(size->width, size->height);
                }
                break;
            default:
                break;
        }
    }
    if (!st) {
        LOG_WARN("attach session %s: %s; ending it", req_.session.c_str(), st.message().c_str());
        close("protocol error");
    }
}

void AttachSession::tap_output(bool is_stderr, std::string_view bytes) {
    if (!data_ || (is_stderr ? !req_.err : !req_.out)) return;
    auto ch = is_stderr ? proto::ExecChannel::Stderr : proto::ExecChannel::Stdout;
    while (!bytes.empty()) {
        size_t take = std::min(bytes.size(), proto::kMaxExecFramePayload);
        data_.write(proto::encode_exec_frame(ch, bytes.substr(0, take)));
        bytes.remove_prefix(take);
    }
    // Never a reason for the container to wait: a client this far behind is dropped.
    if (data_.write_queue_size() > kMaxQueuedBytes)
        close("more than " + std::to_string(kMaxQueuedBytes) +
              " bytes of output unsent (the client does not read)");
}

void AttachSession::tap_exit(std::optional<int> exit_code) {
    container_ = nullptr;  // the container detached this tap
    if (!data_) return;
    if (!exit_code) {
        end();
        return;
    }
    data_.write(
        proto::encode_exec_frame(proto::ExecChannel::Exit, proto::exit_payload(*exit_code)));
    data_.read_stop();
    // Closed once the Exit frame (and the output before it) went out.
    if (data_.shutdown([this](int) { end(); }) != 0) end();
}

void AttachSession::tap_stdin_drained() {
    if (input_paused_ && data_) read_input(true);
}

void AttachSession::close(const std::string &why) {
    if (ended_reported_) return;
    LOG_INFO("attach session %s to %s: %s, detaching", req_.session.c_str(), req_.container.c_str(),
             why.c_str());
    if (container_) {
        Container *c = container_;
        container_ = nullptr;
        c->detach(this);
        if (req_.in && c->plan->stdin_once) c->close_stdin();
    }
    if (!start_reported_) finish_start(fail(Error::Unavailable, "attach session ended: " + why));
    end();
}

void AttachSession::finish_start(const Status &st) {
    if (start_reported_) return;
    start_reported_ = true;
    if (started_) started_(st);
}

void AttachSession::end() {
    if (ended_reported_) return;
    if (!start_reported_) finish_start(fail(Error::Unavailable, "attach session ended"));
    ended_reported_ = true;
    if (container_) {
        container_->detach(this);
        container_ = nullptr;
    }
    data_.close();
    if (ended_) ended_();
}

}  // namespace sk::shim
