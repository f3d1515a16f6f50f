#include "agent/stream_sessions.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

#include "agent/kubelet/streams/remotecommand.h"
#include "agent/kubelet/streams/spdy.h"
#include "agent/kubelet/streams/ws_channel.h"
#include "common/daemons/exec_frames.h"
#include "common/daemons/json.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/strings.h"

namespace sk::agent {

namespace {

constexpr size_t kMaxProcNetTcp = 16 << 20;  // /proc/net/tcp of a host with 100k sockets

// An unguessable session id (the data connection names it; the peer's uid
// is checked too): 128 random bits in hex.
std::string new_session_id(uint64_t n) {
    unsigned char r[16] = {};
    if (getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
        // Never on Linux >= 3.17 for 16 bytes; the uid check still holds.
        uint64_t t = uv_hrtime();
        for (size_t i = 0; i < sizeof r; i++)
            r[i] = static_cast<unsigned char>((t >> (8 * (i % 8))) ^ (n >> (8 * (i % 8))));
    }
    return hex_encode(r, sizeof r);
}

std::string resize_payload(const remotecommand::TerminalSize &t) {
    return "{\"Width\":" + std::to_string(t.width) + ",\"Height\":" + std::to_string(t.height) +
           "}";
}

const char *kind_name(StreamKind k) {
    switch (k) {
        case StreamKind::Exec:
            return "exec";
        case StreamKind::Attach:
            return "attach";
        case StreamKind::PortForward:
            return "port-forward";
    }
    return "stream";
}

}  // namespace

// One upgraded connection and, once the shim attached, its data connection.
// ---- what every session does with its client ----

// The upgraded connection: one decoder per protocol, the writes with their
// bound, the ending (the last writes, then the client's close within
// linger_ms), the idle timeout. Subclasses handle the frames and own
// whatever the bytes are relayed to (`upstreams`).
class StreamSessions::Session {
  public:
    Session(StreamSessions &owner, std::string id, StreamRequest req, HttpUpgrade conn)
        : owner_(owner),
          id_(std::move(id)),
          req_(std::move(req)),
          conn_(std::move(conn)),
          client_(owner.loop_),
          timer_(owner.loop_),
          started_ms_(uv_now(owner.loop_)) {
        prefix_ = "[" + std::string(kind_name(req_.kind)) + " " + req_.ns + "/" + req_.pod +
                  (req_.container.empty() ? "" : "/" + req_.container) + "]";
        if (req_.transport == StreamTransport::WebSocket)
            ws_proto_ = ws::channel_protocol(req_.protocol).value_or(ws::ChannelProtocol::V4);
    }
    virtual ~Session() { owner_.unexpect_shim(id_); }
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;

    bool closed() const { return closed_; }
    // An exec session whose command is being started: its data connection may attach.
    virtual bool waiting_for_shim() const { return false; }
    virtual uint32_t job_uid() const { return 0; }
    virtual void attach_shim(int fd, const std::string & /*rest*/, uint64_t /*req_id*/) {
        ::close(fd);
    }

    void begin() {
        // The upgrade's descriptor stays the HTTP server's (it closes it on
        // conn_.close()); the loop reads and writes a duplicate.
        int fd = fcntl(conn_.fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0 || client_.open(fd) != 0) {
            if (fd >= 0) ::close(fd);
            LOG_WARN("%s cannot take the connection over", prefix_.c_str());
            return close_all();
        }
        last_activity_ = uv_now(owner_.loop_);
        timer_.start(
            kTickMs, [this] { tick(); }, kTickMs);
        if (client_.read_start([this](ssize_t n, const char *d) { on_client(n, d); }) != 0)
            return close_all();
        std::string early = std::move(conn_.early);
        if (!early.empty()) on_client_bytes(early);
        if (!closed_) on_begun();
    }

    // Ends everything now (agent stop, protocol errors, the client's close).
    void close_all() {
        if (closed_) return;
        closed_ = true;
        close_upstreams();
        client_.close();
        timer_.close();
        // The server's TLS relay ends the client's connection once its end
        // of the socket pair reads EOF (the close action alone leaves it).
        if (conn_.close && conn_.fd >= 0) ::shutdown(conn_.fd, SHUT_RDWR);
        if (conn_.close) conn_.close();
        conn_.close = nullptr;
        LOG_VERBOSE("%s session %s closed", prefix_.c_str(), id_.substr(0, 8).c_str());
        owner_.ended();
    }

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

    void on_client(ssize_t n, const char *d) {
        if (n < 0) {
            if (!ending_) LOG_VERBOSE("%s the client closed the session", prefix_.c_str());
            return close_all();
        }
        last_activity_ = uv_now(owner_.loop_);
        on_client_bytes(std::string_view(d, static_cast<size_t>(n)));
    }

    void on_client_bytes(std::string_view bytes) {
        if (ending_) return;  // after the last writes: only the close matters
        if (req_.transport == StreamTransport::Spdy) {
            std::vector<spdy::Frame> frames;
            Status st = spdy_decoder_.feed(bytes, &frames);
            for (auto &f : frames) {
                if (ending_ || closed_) return;
                if (f.stream_id > last_client_stream_ && f.type == spdy::FrameType::SynStream)
                    last_client_stream_ = f.stream_id;
                if (f.type == spdy::FrameType::Ping) {
                    send_spdy(spdy::ping(f.ping_id));
                } else if (f.type == spdy::FrameType::GoAway) {
                    LOG_VERBOSE("%s the client sent GOAWAY", prefix_.c_str());
                    return close_all();
                } else {
                    spdy_frame(f);
                }
            }
            if (!st.ok() && !closed_ && !ending_) {
                LOG_WARN("%s SPDY from the client: %s; closing", prefix_.c_str(),
                         st.message().c_str());
                send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayProtocolError));
                end_after_writes(kErrorLingerMs);
            }
            return;
        }
        std::vector<ws::Message> msgs;
        Status st = ws_decoder_.feed(bytes, &msgs);
        for (auto &m : msgs) {
            if (ending_ || closed_) return;
            ws_message(m);
        }
        if (!st.ok() && !closed_ && !ending_) {
            LOG_WARN("%s WebSocket from the client: %s; closing", prefix_.c_str(),
                     st.message().c_str());
            send_client(ws::encode_close(ws_decoder_.close_code(), st.message()));
            end_after_writes(kErrorLingerMs);
        }
    }

    void ws_message(const ws::Message &m) {
        switch (m.opcode) {
            case ws::Opcode::Ping:
                return send_client(ws::encode_frame(ws::Opcode::Pong, m.payload));
            case ws::Opcode::Pong:
                return;
            case ws::Opcode::Close:
                send_client(ws::encode_close(ws::kCloseNormal, ""));
                return end_after_writes();
            case ws::Opcode::Text:
                send_client(ws::encode_close(ws::kClosePolicy, "text messages are not a channel"));
                return end_after_writes();
            default:
                break;
        }
        auto cm = ws::parse_channel_message(ws_proto_, m.payload, ws_channels());
        if (!cm.ok()) {
            send_client(ws::encode_close(ws::kCloseProtocolError, cm.message()));
            return end_after_writes(kErrorLingerMs);
        }
        if (cm->kind != ws::ChannelMessage::Kind::Empty) ws_data(*cm);
    }

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

    void end_after_writes(uint64_t linger_ms = 0) {
        if (closed_ || ending_) return;
        ending_ = true;
        linger_ms_ = linger_ms ? linger_ms : owner_.limits_.linger_ms;
        close_upstreams();
        resume_client();  // its close is what we wait for now
        ending_ms_ = uv_now(owner_.loop_);
        ending_queued_ = client_.write_queue_size();
    }

    void send_spdy(const spdy::Frame &f) {
        std::string out;
        Status st = spdy_encoder_.encode(f, &out);
        if (!st.ok()) {
            LOG_ERROR("%s cannot encode a SPDY frame: %s", prefix_.c_str(), st.message().c_str());
            return close_all();
        }
        send_client(std::move(out));
    }

    void send_client(std::string bytes) {
        if (closed_ || ending_) return;
        client_.write(std::move(bytes), [this, alive = std::weak_ptr<bool>(alive_)](int) {
            if (alive.expired() || closed_) return;
            if (client_full_ && client_.write_queue_size() < owner_.limits_.relay_buffer / 2) {
                client_full_ = false;
                client_drained();
            }
        });
        if (client_.write_queue_size() > owner_.limits_.relay_buffer) client_full_ = true;
    }

    void pause_client() {
        if (client_paused_ || ending_) return;
        LOG_DEBUG("%s the relay is full: not reading the client", prefix_.c_str());
        client_paused_ = true;
        client_.read_stop();
    }

    void resume_client() {
        if (!client_paused_ || closed_) return;
        LOG_DEBUG("%s reading the client again", prefix_.c_str());
        client_paused_ = false;
        client_.read_start([this](ssize_t n, const char *d) { on_client(n, d); });
    }

    // How often a session looks at its client's connection and its
    // deadlines: the client's close is seen within this also while the
    // session does not read the client (paused by a full relay).
    static constexpr uint64_t kTickMs = 250;

    void tick() {
        uint64_t now = uv_now(owner_.loop_);
        if (HttpServer::peer_closed(conn_.fd, 0)) {
            if (!ending_) LOG_VERBOSE("%s the client closed the session", prefix_.c_str());
            return close_all();
        }
        if (ending_) {
            // The linger counts from the last progress of the final writes:
            // a slow client that still takes output gets all of it, one
            // that takes nothing for linger_ms is closed.
            size_t queued = client_.write_queue_size();
            if (queued < ending_queued_) ending_ms_ = now;
            ending_queued_ = queued;
            if (now - ending_ms_ >= linger_ms_) close_all();
            return;
        }
        if (awaiting_streams() && now - started_ms_ >= owner_.limits_.creation_timeout_ms) {
            LOG_WARN("%s the client did not open its streams within %llu ms; closing",
                     prefix_.c_str(),
                     static_cast<unsigned long long>(owner_.limits_.creation_timeout_ms));
            send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayOk));
            return end_after_writes(kErrorLingerMs);
        }
        if (now - last_activity_ >= owner_.limits_.idle_timeout_ms) {
            LOG_INFO("%s idle for %llu s; closing", prefix_.c_str(),
                     static_cast<unsigned long long>(owner_.limits_.idle_timeout_ms / 1000));
            idle();
        }
    }
    virtual void idle() {
        if (req_.transport == StreamTransport::Spdy)
            send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayOk));
        else
            send_client(ws::encode_close(ws::kCloseNormal, "idle"));
        end_after_writes();
    }

    void touch() { last_activity_ = uv_now(owner_.loop_); }

    StreamSessions &owner_;
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

// ---- exec ----

class ExecSession : public StreamSessions::Session {
  public:
    using Session::Session;

    bool waiting_for_shim() const override { return launched_ && !shim_ && !finished_ && !closed_; }
    uint32_t job_uid() const override { return job_uid_; }

    // The shim's data connection arrived (exec_attach, already checked).
    void attach_shim(int fd, const std::string &rest, uint64_t req_id) override {
        shim_ = Pipe(owner_.loop_);
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
        if (client_paused_ && !closed_ && shim_.write_queue_size() < owner_.limits_.relay_buffer)
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
        size_wait_ = Timer(owner_.loop_);
        size_wait_.start(kSizeWaitMs, [this] { launch(); });
    }

    void launch() {
        if (launched_ || closed_ || ending_) return;
        launched_ = true;
        size_wait_.close();
        std::weak_ptr<bool> alive = alive_;
        owner_.resolve(req_.ns, req_.pod, [this, alive](Result<ExecTarget> target) {
            if (alive.expired() || closed_ || finished_) return;
            launch_in(std::move(target));
        });
    }

    void launch_in(Result<ExecTarget> target) {
        if (!target.ok()) return finish(remotecommand::status_internal_error(target.message()));
        job_uid_ = target->job_uid;
        owner_.expect_shim(id_, job_uid_);
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
            a.session = id_;
            a.uid = target->pod_uid;
            a.container = req_.container;
            a.in = req_.in;
            a.out = req_.out;
            a.err = req_.err && !req_.tty;
            a.tty = req_.tty;
            LOG_INFO("%s session %s%s", prefix_.c_str(), id_.substr(0, 8).c_str(),
                     a.in ? ", stdin" : "");
            return target->attach(a, done);
        }
        proto::ExecStart m;
        m.session = id_;
        m.uid = target->pod_uid;
        m.container = req_.container;
        m.command = req_.command;
        m.in = req_.in;
        m.out = req_.out;
        m.err = req_.err && !req_.tty;
        m.tty = req_.tty;
        LOG_INFO("%s session %s: %zu words%s%s", prefix_.c_str(), id_.substr(0, 8).c_str(),
                 m.command.size(), m.tty ? ", tty" : "", m.in ? ", stdin" : "");
        target->start(m, done);
    }

    void to_shim(proto::ExecChannel ch, std::string_view payload) {
        std::string frame = proto::encode_exec_frame(ch, payload);
        if (!shim_) {
            // Before the data connection arrived: kept, within the bound.
            to_shim_pending_ += frame;
            if (to_shim_pending_.size() > owner_.limits_.relay_buffer) pause_client();
            return;
        }
        write_shim(std::move(frame));
    }

    void write_shim(std::string bytes) {
        shim_.write(std::move(bytes), [this, alive = std::weak_ptr<bool>(alive_)](int) {
            if (alive.expired() || closed_) return;
            if (client_paused_ && shim_.write_queue_size() < owner_.limits_.relay_buffer / 2)
                resume_client();
        });
        if (shim_.write_queue_size() > owner_.limits_.relay_buffer) pause_client();
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

// ---- port-forward ----

// SPDY: per forwarded connection the client opens an error stream and a data
// stream with the same requestid and port; the data stream is relayed to a
// new TCP connection to the pod's listener. WebSocket: one connection per
// port of the query, on channels 2i (data) and 2i+1 (errors), each opened
// with the port (2 bytes, little endian). Errors go on the error stream as
// the kubelet words them, and end that connection only.
class ForwardSession : public StreamSessions::Session {
  public:
    using Session::Session;

  private:
    struct Conn {
        uint16_t port = 0;
        uint32_t data_sid = 0, error_sid = 0;  // SPDY
        unsigned index = 0;                    // WebSocket: the port's index in the query
        Tcp tcp;
        bool connected = false, client_fin = false, up_eof = false, paused = false;
        std::string pending;  // client bytes before the connect completed
    };

    unsigned ws_channels() const override {
        return static_cast<unsigned>(std::min<size_t>(req_.ports.size() * 2, 254));
    }

    void on_begun() override {
        if (req_.transport != StreamTransport::WebSocket) return;
        if (req_.ports.empty() || req_.ports.size() > 127) {
            send_client(ws::encode_close(ws::kClosePolicy, "port-forward needs 1..127 ports"));
            return end_after_writes(kErrorLingerMs);
        }
        for (unsigned i = 0; i < req_.ports.size(); i++) {
            std::string port_le{static_cast<char>(req_.ports[i] & 0xff),
                                static_cast<char>(req_.ports[i] >> 8)};
            send_client(ws::encode_channel_data(static_cast<uint8_t>(2 * i), port_le));
            send_client(ws::encode_channel_data(static_cast<uint8_t>(2 * i + 1), port_le));
            auto c = std::make_unique<Conn>();
            c->port = req_.ports[i];
            c->index = i;
            Conn *raw = c.get();
            conns_[i + 1] = std::move(c);
            dial(raw, i + 1);
        }
    }

    void close_upstreams() override {
        for (auto &[k, c] : conns_)
            c->tcp.close();
        conns_.clear();
    }

    void client_drained() override {
        for (auto &[k, c] : conns_)
            if (c->paused && c->connected && !c->up_eof) {
                c->paused = false;
                read_upstream(c.get(), k);
            }
    }

    void spdy_frame(const spdy::Frame &f) override {
        switch (f.type) {
            case spdy::FrameType::SynStream:
                return syn_stream(f);
            case spdy::FrameType::Data: {
                // Only the data stream carries bytes; the client closes its
                // side of the error stream at once.
                uint64_t key = by_sid(f.stream_id);
                auto it = conns_.find(key);
                if (it != conns_.end() && it->second->data_sid == f.stream_id)
                    client_data(key, f.data, f.fin());
                return;
            }
            case spdy::FrameType::RstStream: {
                uint64_t key = by_sid(f.stream_id);
                auto it = conns_.find(key);
                if (it != conns_.end() && it->second->data_sid == f.stream_id) drop(key);
                return;
            }
            default:
                return;
        }
    }

    uint64_t by_sid(uint32_t sid) const {
        auto it = sid_.find(sid);
        return it == sid_.end() ? 0 : it->second;
    }

    void syn_stream(const spdy::Frame &f) {
        const std::string *type = spdy::find_header(f.headers, remotecommand::kHeaderStreamType);
        const std::string *port_s = spdy::find_header(f.headers, remotecommand::kHeaderPort);
        const std::string *rid = spdy::find_header(f.headers, remotecommand::kHeaderRequestId);
        uint64_t port = 0;
        bool port_ok = port_s && !port_s->empty() && port_s->size() <= 5 &&
                       port_s->find_first_not_of("0123456789") == std::string::npos &&
                       (port = std::stoul(*port_s)) >= 1 && port <= 65535;
        if (!type || !rid || !port_ok ||
            (*type != remotecommand::kStreamData && *type != remotecommand::kStreamError)) {
            LOG_WARN("%s a stream without a valid streamtype, port and requestid; resetting it",
                     prefix_.c_str());
            return send_spdy(spdy::rst_stream(f.stream_id, spdy::kRstProtocolError));
        }
        auto &key = rid_[*rid];
        if (key == 0) {
            if (conns_.size() >= kMaxConnections) {
                LOG_WARN("%s more than %zu forwarded connections at once; resetting one",
                         prefix_.c_str(), kMaxConnections);
                rid_.erase(*rid);
                return send_spdy(spdy::rst_stream(f.stream_id, spdy::kRstRefusedStream));
            }
            key = next_key_++;
            conns_[key] = std::make_unique<Conn>();
            conns_[key]->port = static_cast<uint16_t>(port);
            request_of_[key] = *rid;
        }
        Conn *c = conns_.count(key) ? conns_[key].get() : nullptr;
        if (!c) return send_spdy(spdy::rst_stream(f.stream_id, spdy::kRstInvalidStream));
        uint32_t &slot = *type == remotecommand::kStreamData ? c->data_sid : c->error_sid;
        if (slot != 0) return send_spdy(spdy::rst_stream(f.stream_id, spdy::kRstStreamInUse));
        slot = f.stream_id;
        sid_[f.stream_id] = key;
        send_spdy(spdy::syn_reply(f.stream_id));
        if (*type == remotecommand::kStreamData) dial(c, key);
    }

    void ws_data(const ws::ChannelMessage &m) override {
        unsigned i = m.channel / 2;
        auto it = conns_.find(i + 1);
        if (it == conns_.end() || m.channel % 2 != 0) return;  // errors from the client: none
        if (m.kind == ws::ChannelMessage::Kind::CloseStream) return client_data(i + 1, "", true);
        client_data(i + 1, m.data, false);
    }

    // Where the pod listens on c->port (docs/security.md "port-forward"),
    // then the connection.
    void dial(Conn *, uint64_t key) {
        owner_.resolve(req_.ns, req_.pod,
                       [this, key, alive = std::weak_ptr<bool>(alive_)](Result<ExecTarget> t) {
                           if (alive.expired() || closed_) return;
                           auto it = conns_.find(key);
                           if (it != conns_.end()) dial_in(it->second.get(), key, std::move(t));
                       });
    }

    void dial_in(Conn *c, uint64_t key, Result<ExecTarget> target) {
        if (!target.ok()) return conn_error(key, target.message());
        if (!owner_.limits_.forward_any_port &&
            std::find(target->ports.begin(), target->ports.end(), c->port) == target->ports.end())
            return conn_error(key, "the pod declares no containerPort " + std::to_string(c->port) +
                                       " (this node forwards only to declared ports)");
        auto l = owner_.find_listener_(c->port, target->job_uid);
        if (!l)
            return conn_error(key, "failed to connect to localhost:" + std::to_string(c->port) +
                                       ": no process of the pod listens on it");
        sockaddr_storage ss{};
        int rc =
            l->v6
                ? uv_ip6_addr(l->connect_to.c_str(), c->port, reinterpret_cast<sockaddr_in6 *>(&ss))
                : uv_ip4_addr(l->connect_to.c_str(), c->port, reinterpret_cast<sockaddr_in *>(&ss));
        if (rc != 0) return conn_error(key, "bad listener address " + l->connect_to);
        c->tcp = Tcp(owner_.loop_);
        rc = c->tcp.connect(reinterpret_cast<sockaddr *>(&ss), [this, key](int status) {
            auto it = conns_.find(key);
            if (it == conns_.end()) return;
            if (status != 0)
                return conn_error(
                    key, "failed to connect to localhost:" + std::to_string(it->second->port) +
                             ": " + uv_strerror(status));
            Conn *cc = it->second.get();
            cc->connected = true;
            if (!cc->pending.empty()) write_upstream(cc, std::move(cc->pending));
            cc->pending.clear();
            if (cc->client_fin) cc->tcp.shutdown([](int) {});
            read_upstream(cc, key);
        });
        if (rc != 0) conn_error(key, std::string("cannot connect: ") + uv_strerror(rc));
    }

    void read_upstream(Conn *c, uint64_t key) {
        c->tcp.read_start([this, key](ssize_t n, const char *d) {
            auto it = conns_.find(key);
            if (it == conns_.end()) return;
            Conn *cc = it->second.get();
            if (n < 0) {
                cc->up_eof = true;
                to_client(cc, "", true);
                return maybe_done(key);
            }
            touch();
            to_client(cc, std::string_view(d, static_cast<size_t>(n)), false);
            if (client_full_ && !cc->paused) {
                cc->paused = true;
                cc->tcp.read_stop();
            }
        });
    }

    void to_client(Conn *c, std::string_view data, bool fin) {
        if (req_.transport == StreamTransport::Spdy) {
            if (c->data_sid) send_spdy(spdy::data_frame(c->data_sid, std::string(data), fin));
        } else if (!data.empty()) {
            send_client(ws::encode_channel_data(static_cast<uint8_t>(2 * c->index), data));
        } else if (fin && ws_proto_ == ws::ChannelProtocol::V5) {
            send_client(ws::encode_channel_close(static_cast<uint8_t>(2 * c->index)));
        }
    }

    void client_data(uint64_t key, std::string_view data, bool fin) {
        auto it = conns_.find(key);
        if (it == conns_.end()) return;
        Conn *c = it->second.get();
        if (!data.empty()) {
            if (!c->connected)
                c->pending.append(data);
            else
                write_upstream(c, std::string(data));
            if (c->pending.size() > owner_.limits_.relay_buffer) pause_client();
        }
        if (fin && !c->client_fin) {
            c->client_fin = true;
            if (c->connected) c->tcp.shutdown([](int) {});
            maybe_done(key);
        }
    }

    void write_upstream(Conn *c, std::string bytes) {
        touch();
        c->tcp.write(std::move(bytes), [this, alive = std::weak_ptr<bool>(alive_)](int) {
            if (!alive.expired()) maybe_resume_client();
        });
        if (c->tcp.write_queue_size() > owner_.limits_.relay_buffer) pause_client();
    }

    // Both directions ended: the connection is over (its streams closed).
    void maybe_done(uint64_t key) {
        auto it = conns_.find(key);
        if (it == conns_.end() || !it->second->up_eof || !it->second->client_fin) return;
        Conn *c = it->second.get();
        if (req_.transport == StreamTransport::Spdy && c->error_sid)
            send_spdy(spdy::data_frame(c->error_sid, "", true));
        drop(key);
    }

    void conn_error(uint64_t key, const std::string &why) {
        auto it = conns_.find(key);
        if (it == conns_.end()) return;
        Conn *c = it->second.get();
        std::string msg =
            "error forwarding port " + std::to_string(c->port) + " to pod " + req_.pod + ": " + why;
        LOG_INFO("%s %s", prefix_.c_str(), msg.c_str());
        if (req_.transport == StreamTransport::Spdy) {
            if (c->error_sid) send_spdy(spdy::data_frame(c->error_sid, msg, true));
            if (c->data_sid) send_spdy(spdy::data_frame(c->data_sid, "", true));
            return drop(key);
        }
        send_client(ws::encode_channel_data(static_cast<uint8_t>(2 * c->index + 1), msg));
        // WebSocket forwards one connection per port for the whole session:
        // the port is lost, the others go on.
        c->tcp.close();
        c->up_eof = c->client_fin = true;
    }

    void drop(uint64_t key) {
        auto it = conns_.find(key);
        if (it == conns_.end()) return;
        it->second->tcp.close();
        sid_.erase(it->second->data_sid);
        sid_.erase(it->second->error_sid);
        if (auto r = request_of_.find(key); r != request_of_.end()) {
            rid_.erase(r->second);
            request_of_.erase(r);
        }
        conns_.erase(it);
        maybe_resume_client();  // a paused client may have waited on this one
    }

    // The client is read again once no connection holds more than half the
    // bound (a connection that went away holds nothing).
    void maybe_resume_client() {
        if (!client_paused_ || closed_) return;
        for (const auto &[k, c] : conns_)
            if (c->tcp.write_queue_size() + c->pending.size() >= owner_.limits_.relay_buffer / 2)
                return;
        resume_client();
    }

    static constexpr size_t kMaxConnections = 128;
    std::map<uint64_t, std::unique_ptr<Conn>> conns_;  // by key (WebSocket: index + 1)
    std::map<uint32_t, uint64_t> sid_;                 // SPDY stream -> key
    std::map<std::string, uint64_t> rid_;              // SPDY requestid -> key
    std::map<uint64_t, std::string> request_of_;
    uint64_t next_key_ = 1;
};

StreamSessions::StreamSessions(uv_loop_t *main, const StreamLimits &limits, ExecCheck check,
                               std::optional<int> relay_nice)
    : thread_(main, "sk-streams", relay_nice),
      loop_(thread_.loop()),
      limits_(limits),
      check_(std::move(check)),
      wake_(loop_, [this] { take_started(); }),
      reap_(loop_) {
    find_listener_ = [](uint16_t port, uint32_t uid) -> std::optional<Listener> {
        // Root reads the kernel's tables, bounded; the pod cannot write them.
        for (bool v6 : {false, true}) {
            auto text = read_file(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", kMaxProcNetTcp);
            if (!text.ok()) continue;
            if (auto l = find_listener(*text, v6, port, uid)) return l;
        }
        return std::nullopt;
    };
}

StreamSessions::~StreamSessions() {
    // Normally stopped already (the daemon's teardown); closing handles does
    // not throw in practice, and a destructor must not let it out.
    try {
        stop();
    } catch (...) {
        LOG_ERROR("stream sessions: error while closing them");
    }
}

Status StreamSessions::check(const StreamRequest &req) {
    if (count_.load() >= limits_.max_sessions)
        return fail(Error::Refused, "too many streaming sessions on this node (" +
                                        std::to_string(limits_.max_sessions) + ")");
    return check_ ? check_(req) : Status();
}

void StreamSessions::start(StreamRequest req, HttpUpgrade conn) {
    count_++;
    {
        std::lock_guard<std::mutex> lock(mu_);
        started_.emplace_back(std::move(req), std::move(conn));
    }
    wake_.send();
}

void StreamSessions::take_started() {
    std::deque<std::pair<StreamRequest, HttpUpgrade>> batch;
    {
        std::lock_guard<std::mutex> lock(mu_);
        batch.swap(started_);
    }
    for (auto &[req, conn] : batch) {
        if (stopped_) {
            if (conn.close) conn.close();
            count_--;
            continue;
        }
        std::string id = new_session_id(next_++);
        LOG_VERBOSE("[%s %s/%s] session %s opened (%zu now)", kind_name(req.kind), req.ns.c_str(),
                    req.pod.c_str(), id.substr(0, 8).c_str(), count_.load());
        std::unique_ptr<Session> s;
        if (req.kind == StreamKind::PortForward)
            s = std::make_unique<ForwardSession>(*this, id, std::move(req), std::move(conn));
        else
            s = std::make_unique<ExecSession>(*this, id, std::move(req), std::move(conn));
        Session *raw = s.get();
        by_id_[id] = std::move(s);
        raw->begin();
    }
}

Status StreamSessions::start() {
    return thread_.start();
}

void StreamSessions::resolve(const std::string &ns, const std::string &pod,
                             std::function<void(Result<ExecTarget>)> cb) {
    ThreadLoop *tl = &thread_;
    tl->post_main([this, tl, ns, pod, cb = std::move(cb)] {
        Result<ExecTarget> t = resolver_
                                   ? resolver_(ns, pod)
                                   : Result<ExecTarget>(fail(Error::NotFound, "no pods here"));
        if (t.ok()) {
            // Called on the sessions' thread; the runtime is the agent's
            // loop's, and its answer goes back.
            auto on_main = [tl](auto fn) {
                return [tl, fn](const auto &m, PodRuntime::Done done) {
                    tl->post_main([tl, fn, m, done = std::move(done)] {
                        fn(m, [tl, done](const Status &st) { tl->post([done, st] { done(st); }); });
                    });
                };
            };
            t->start = on_main(t->start);
            t->attach = on_main(t->attach);
        }
        tl->post([cb, t] { cb(t); });
    });
}

void StreamSessions::expect_shim(const std::string &id, uint32_t uid) {
    std::lock_guard<std::mutex> lock(wait_mu_);
    waiting_[id] = uid;
}

void StreamSessions::unexpect_shim(const std::string &id) {
    std::lock_guard<std::mutex> lock(wait_mu_);
    waiting_.erase(id);
}

void StreamSessions::attach(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto m = proto::exec_attach_from_json(req.body);
    if (!m.ok()) {
        c->reply(proto::error_reply(req.id, m.failure()));
        return c->close();
    }
    bool claimed = false;
    {
        std::lock_guard<std::mutex> lock(wait_mu_);
        auto it = waiting_.find(m->session);
        if (it != waiting_.end() && it->second != c->peer().uid) {
            LOG_WARN("socket: exec_attach for a session of uid %u from uid %u pid %d: refused",
                     it->second, c->peer().uid, c->peer().pid);
        } else if (it != waiting_.end()) {
            claimed = true;
            waiting_.erase(it);  // a second exec_attach finds none
        }
    }
    if (!claimed || main_stopped_) {
        // One answer for all three: nothing tells another user which ids exist.
        c->reply(proto::error_reply(
            req.id, fail(Error::NotFound, "no exec session '" + m->session + "' waits")));
        return c->close();
    }
    std::string rest;
    int fd = c->take_fd(&rest);
    if (fd < 0) return;
    // Closed unless the session takes it (a closure dropped at stop too).
    auto held = std::shared_ptr<int>(new int(fd), [](int *p) {
        if (*p >= 0) ::close(*p);
        delete p;
    });
    thread_.post([this, id = m->session, held, rest, req_id = req.id] {
        auto it = by_id_.find(id);
        if (it == by_id_.end() || !it->second->waiting_for_shim()) return;  // ended meanwhile
        it->second->attach_shim(std::exchange(*held, -1), rest, req_id);
    });
}

void StreamSessions::ended() {
    if (stopped_) return;
    reap_.start(0, [this] {
        for (auto it = by_id_.begin(); it != by_id_.end();) {
            if (it->second->closed()) {
                it = by_id_.erase(it);
                count_--;
            } else {
                ++it;
            }
        }
    });
}

void StreamSessions::stop() {
    if (main_stopped_) return;
    main_stopped_ = true;
    thread_.stop([this] {
        stopped_ = true;
        take_started();  // what arrived before the HTTP server stopped
        for (auto &[id, s] : by_id_)
            s->close_all();
        count_ -= by_id_.size();
        by_id_.clear();
        wake_.close();
        reap_.close();
    });
}

}  // namespace sk::agent
