// exec and attach (docs/architecture.md "Exec sessions"): the session asks
// the job's runtime to start the command (exec_start: the job's shim starts
// it as the job's user, in the pod's environment) or to attach to the
// container (attach_start), takes the shim's data connection when it arrives
// on the agent socket (exec_attach, checked against the job's uid:
// StreamSessions::attach) and relays bytes between the two: stdin, stdout,
// stderr, the terminal's size, and at the end the exit status as the
// kubelet's metav1.Status on the error stream. The agent never runs anything
// itself and reads nothing for the pod.
#include <unistd.h>

#include <algorithm>
#include <string>

#include "agent/kubelet/streams/remotecommand.h"
#include "agent/stream_session.h"
#include "common/daemons/exec_frames.h"
#include "common/daemons/json.h"
#include "common/daemons/protocol.h"
#include "common/log.h"

namespace sk::agent {

namespace {

std::string resize_payload(const remotecommand::TerminalSize &t) {
    return "{\"Width\":" + std::to_string(t.width) + ",\"Height\":" + std::to_string(t.height) +
           "}";
}

class ExecSession : public StreamSession {
  public:
    using StreamSession::StreamSession;

    bool waiting_for_shim() const override { return launched_ && !shim_ && !finished_ && !closed_; }
    uint32_t job_uid() const override { return job_uid_; }

    // The shim's data connection arrived (exec_attach, already checked).
    void attach_shim(int fd, const std::string &rest, uint64_t req_id) override {
        shim_ = Pipe(host_.loop());
        if (shim_.open(fd) != 0) {
            ::close(fd);
            return fail_session("cannot use the shim's data connection");
        }
        proto::Reply rep;
        rep.id = req_id;
        rep.body = Json::Value(Json::objectValue);
        shim_.write(proto::encode(rep));
        if (!to_shim_pending_.empty()) {
            std::string pending = std::move(to_shim_pending_);
            to_shim_pending_.clear();
            write_shim(std::move(pending));
        }
        if (shim_.read_start([this](ssize_t n, const char *d) { on_shim(n, d); }) != 0)
            return fail_session("cannot read the shim's data connection");
        if (!rest.empty()) on_shim_bytes(rest);
        if (client_paused_ && !closed_ && shim_.write_queue_size() < host_.limits().relay_buffer)
            resume_client();
    }

  private:
    enum StreamSlot { kError, kStdin, kStdout, kStderr, kResize, kSlots };

    void on_begun() override {
        if (req_.transport == StreamTransport::WebSocket) launch_when_sized();
    }
    bool awaiting_streams() const override { return !launched_ && !launch_waits_; }
    void close_upstreams() override {
        shim_.close();  // a command still running is killed by the shim
        size_wait_.close();
    }
    void client_drained() override {
        if (shim_paused_ && shim_) {
            shim_paused_ = false;
            shim_.read_start([this](ssize_t n, const char *d) { on_shim(n, d); });
        }
    }
    void idle() override { finish(remotecommand::status_internal_error("the session was idle")); }

    static int slot_of(const std::string &type) {
        if (type == remotecommand::kStreamError) return kError;
        if (type == remotecommand::kStreamStdin) return kStdin;
        if (type == remotecommand::kStreamStdout) return kStdout;
        if (type == remotecommand::kStreamStderr) return kStderr;
        if (type == remotecommand::kStreamResize) return kResize;
        return -1;
    }

    bool expected(int slot) const {
        switch (slot) {
            case kError:
                return true;
            case kStdin:
                return req_.in;
            case kStdout:
                return req_.out;
            case kStderr:
                return req_.err && !req_.tty;
            case kResize:
                return req_.tty;
            default:
                return false;
        }
    }

    void spdy_frame(const spdy::Frame &f) override {
        switch (f.type) {
            case spdy::FrameType::SynStream:
                return syn_stream(f);
            case spdy::FrameType::Data:
                return spdy_data(f.stream_id, f.data, f.fin());
            case spdy::FrameType::RstStream:
                // A reset stdin is its end; any other reset stream we ignore.
                if (f.stream_id == stream_id_[kStdin]) stdin_end();
                return;
            default:
                return;  // SETTINGS, WINDOW_UPDATE, HEADERS, SYN_REPLY: nothing to do
        }
    }

    void syn_stream(const spdy::Frame &f) {
        const std::string *type = spdy::find_header(f.headers, remotecommand::kHeaderStreamType);
        int slot = type ? slot_of(*type) : -1;
        if (slot < 0 || !expected(slot) || stream_id_[slot] != 0) {
            // The kubelet fails the session on a stream it did not ask
            // for; so do we, with the reason in our log.
            LOG_WARN("%s unexpected stream type '%s' from the client; closing", prefix_.c_str(),
                     type ? type->c_str() : "");
            send_spdy(spdy::rst_stream(f.stream_id, spdy::kRstProtocolError));
            send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayProtocolError));
            return end_after_writes(kErrorLingerMs);
        }
        stream_id_[slot] = f.stream_id;
        send_spdy(spdy::syn_reply(f.stream_id));
        if (f.fin()) spdy_data(f.stream_id, "", true);
        for (int s = 0; s < kSlots; s++)
            if (expected(s) && stream_id_[s] == 0) return;
        launch_when_sized();
    }

    void spdy_data(uint32_t sid, const std::string &data, bool fin) {
        if (sid == 0) return;
        if (sid == stream_id_[kStdin]) {
            if (!data.empty()) stdin_data(data);
            if (fin) stdin_end();
        } else if (sid == stream_id_[kResize]) {
            std::vector<remotecommand::TerminalSize> sizes;
            Status st = resize_decoder_.feed(data, &sizes);
            for (const auto &t : sizes)
                resized(t);
            if (!st.ok()) {
                LOG_WARN("%s resize stream: %s; ignoring it", prefix_.c_str(),
                         st.message().c_str());
                stream_id_[kResize] = UINT32_MAX;  // no stream has it: ignored from now on
            }
        }
        // The error stream and streams we reset carry nothing for us.
    }

    void ws_data(const ws::ChannelMessage &m) override {
        if (m.kind == ws::ChannelMessage::Kind::CloseStream) {
            if (m.channel == ws::kChannelStdin) stdin_end();
            return;
        }
        if (m.channel == ws::kChannelStdin && req_.in) {
            if (!m.data.empty()) stdin_data(m.data);
        } else if (m.channel == ws::kChannelResize && req_.tty) {
            std::vector<remotecommand::TerminalSize> sizes;
            Status st = resize_decoder_.feed(m.data, &sizes);
            if (st.ok()) st = resize_decoder_.end_message(&sizes);
            for (const auto &t : sizes)
                resized(t);
        }
    }

    void stdin_data(std::string_view data) {
        if (stdin_closed_) return;
        while (!data.empty()) {
            size_t n = std::min(data.size(), proto::kMaxExecFramePayload);
            to_shim(proto::ExecChannel::Stdin, data.substr(0, n));
            data.remove_prefix(n);
        }
    }

    void stdin_end() {
        if (stdin_closed_ || !req_.in) return;
        stdin_closed_ = true;
        to_shim(proto::ExecChannel::Close, std::string(1, '\0'));
    }

    void resized(const remotecommand::TerminalSize &t) {
        to_shim(proto::ExecChannel::Resize, resize_payload(t));
        if (!sized_) {
            sized_ = true;
            if (launch_waits_) launch();
        }
    }

    // With a terminal, the command starts once the client sent its window
    // size (kubectl sends it first thing), so that it starts on a terminal
    // of that size and not 0x0; a client that sends none gets its command
    // after kSizeWaitMs all the same.
    static constexpr uint64_t kSizeWaitMs = 1000;
    void launch_when_sized() {
        if (!req_.tty || sized_) return launch();
        launch_waits_ = true;
        size_wait_ = Timer(host_.loop());
        size_wait_.start(kSizeWaitMs, [this] { launch(); });
    }

    void launch() {
        if (launched_ || closed_ || ending_) return;
        launched_ = true;
        size_wait_.close();
        std::weak_ptr<bool> alive = alive_;
        host_.resolve(req_.ns, req_.pod, [this, alive](Result<ExecTarget> target) {
            if (alive.expired() || closed_ || finished_) return;
            launch_in(std::move(target));
        });
    }

    // What exec_start and attach_start share: the session, the pod, the
    // container and the streams asked for (stderr is the terminal's with one).
    template <typename Start>
    void fill_start(const ExecTarget &target, Start *m) const {
        m->session = id_;
        m->uid = target.pod_uid;
        m->container = req_.container;
        m->in = req_.in;
        m->out = req_.out;
        m->err = req_.err && !req_.tty;
        m->tty = req_.tty;
    }

    void launch_in(Result<ExecTarget> target) {
        if (!target.ok()) return finish(remotecommand::status_internal_error(target.message()));
        job_uid_ = target->job_uid;
        host_.expect_shim(id_, job_uid_);
        std::weak_ptr<bool> alive = alive_;
        auto done = [this, alive](const Status &st) {
            if (alive.expired() || closed_ || finished_) return;
            if (!st.ok()) {
                LOG_INFO("%s refused: %s", prefix_.c_str(), st.message().c_str());
                finish(remotecommand::status_internal_error(st.message()));
            }
        };
        if (req_.kind == StreamKind::Attach) {
            proto::AttachStart a;
            fill_start(*target, &a);
            LOG_INFO("%s session %s%s", prefix_.c_str(), id_.substr(0, 8).c_str(),
                     a.in ? ", stdin" : "");
            return target->attach(a, done);
        }
        proto::ExecStart m;
        fill_start(*target, &m);
        m.command = req_.command;
        LOG_INFO("%s session %s: %zu words%s%s", prefix_.c_str(), id_.substr(0, 8).c_str(),
                 m.command.size(), m.tty ? ", tty" : "", m.in ? ", stdin" : "");
        target->start(m, done);
    }

    void to_shim(proto::ExecChannel ch, std::string_view payload) {
        std::string frame = proto::encode_exec_frame(ch, payload);
        if (!shim_) {
            // Before the data connection arrived: kept, within the bound.
            to_shim_pending_ += frame;
            if (to_shim_pending_.size() > host_.limits().relay_buffer) pause_client();
            return;
        }
        write_shim(std::move(frame));
    }

    void write_shim(std::string bytes) {
        shim_.write(std::move(bytes), [this, alive = std::weak_ptr<bool>(alive_)](int) {
            if (alive.expired() || closed_) return;
            if (client_paused_ && shim_.write_queue_size() < host_.limits().relay_buffer / 2)
                resume_client();
        });
        if (shim_.write_queue_size() > host_.limits().relay_buffer) pause_client();
    }

    void on_shim(ssize_t n, const char *d) {
        if (n < 0) {
            shim_.close();
            if (!finished_)
                finish(remotecommand::status_internal_error(
                    "the command's session ended without an exit status (the job's shim "
                    "went away?)"));
            return;
        }
        touch();
        on_shim_bytes(std::string_view(d, static_cast<size_t>(n)));
    }

    void on_shim_bytes(std::string_view bytes) {
        std::vector<proto::ExecFrame> frames;
        Status st = shim_decoder_.feed(bytes, &frames);
        for (auto &f : frames) {
            if (closed_ || finished_) return;
            shim_frame(f);
        }
        if (!st.ok() && !finished_ && !closed_) {
            LOG_WARN("%s the shim's data connection: %s; closing it", prefix_.c_str(),
                     st.message().c_str());
            shim_.close();
            finish(remotecommand::status_internal_error("the job's shim broke the session"));
        }
    }

    void shim_frame(const proto::ExecFrame &f) {
        switch (f.channel) {
            case proto::ExecChannel::Stdout:
                return output(kStdout, ws::kChannelStdout, f.payload);
            case proto::ExecChannel::Stderr:
                return output(kStderr, ws::kChannelStderr, f.payload);
            case proto::ExecChannel::Exit:
                return exited(f.payload);
            default:
                return;  // the decoder refuses the rest
        }
    }

    void exited(const std::string &payload) {
        auto v = json::parse(payload);
        if (v && v->isObject() && (*v)["exit_code"].isInt()) {
            int code = (*v)["exit_code"].asInt();
            LOG_VERBOSE("%s exit %d", prefix_.c_str(), code);
            return finish(code == 0 ? remotecommand::status_success()
                                    : remotecommand::status_exit_code(code));
        }
        std::string why = v && v->isObject() && (*v)["error"].isString()
                              ? (*v)["error"].asString()
                              : std::string("the command's exit was not reported");
        finish(remotecommand::status_internal_error(why));
    }

    void output(int slot, uint8_t channel, const std::string &data) {
        if (data.empty()) return;
        if (req_.transport == StreamTransport::Spdy) {
            if (stream_id_[slot] == 0) return;
            send_spdy(spdy::data_frame(stream_id_[slot], data));
        } else {
            send_client(ws::encode_channel_data(channel, data));
        }
        if (client_full_ && shim_ && !shim_paused_) {
            shim_paused_ = true;
            shim_.read_stop();
        }
    }

    // The command is over (or never ran): the status on the error stream,
    // the output streams closed, then the client's close within linger_ms.
    void finish(const std::string &status) {
        if (finished_ || closed_ || ending_) return;
        finished_ = true;
        if (req_.transport == StreamTransport::Spdy) {
            for (int s : {kStdout, kStderr})
                if (stream_id_[s] != 0) send_spdy(spdy::data_frame(stream_id_[s], "", true));
            if (stream_id_[kError] != 0)
                send_spdy(spdy::data_frame(stream_id_[kError], status, true));
            send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayOk));
        } else {
            send_client(ws::encode_channel_data(ws::kChannelError, status));
            send_client(ws::encode_close(ws::kCloseNormal, ""));
        }
        end_after_writes();
    }

    void fail_session(const std::string &why) {
        LOG_WARN("%s %s", prefix_.c_str(), why.c_str());
        shim_.close();
        finish(remotecommand::status_internal_error(why));
    }

    Pipe shim_;
    Timer size_wait_;
    uint32_t job_uid_ = 0;
    bool launched_ = false;  // exec_start sent (or the launch failed)
    bool finished_ = false;  // the status went out
    bool stdin_closed_ = false;
    bool sized_ = false;         // a terminal size came from the client
    bool launch_waits_ = false;  // every stream is there: the size is awaited
    bool shim_paused_ = false;
    std::string to_shim_pending_;
    uint32_t stream_id_[kSlots] = {};
    remotecommand::ResizeDecoder resize_decoder_;
    proto::ExecFrameDecoder shim_decoder_{proto::ExecDirection::ToAgent};
};

}  // namespace

std::unique_ptr<StreamSession> new_exec_session(SessionHost &host, std::string id,
                                                StreamRequest req, HttpUpgrade conn) {
    return std::make_unique<ExecSession>(host, std::move(id), std::move(req), std::move(conn));
}

}  // namespace sk::agent
