#include "agent/stream_sessions.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

#include "common/exec_frames.h"
#include "common/json.h"
#include "common/log.h"
#include "common/remotecommand.h"
#include "common/spdy.h"
#include "common/ws_channel.h"

namespace sk::agent {

namespace {

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
    std::string s;
    char b[3];
    for (unsigned char c : r) {
        snprintf(b, sizeof b, "%02x", c);
        s += b;
    }
    return s;
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
class StreamSessions::Session {
  public:
    Session(StreamSessions &owner, std::string id, StreamRequest req, HttpUpgrade conn)
        : owner_(owner),
          id_(std::move(id)),
          req_(std::move(req)),
          conn_(std::move(conn)),
          client_(owner.loop_),
          timer_(owner.loop_),
          shim_decoder_(proto::ExecDirection::ToAgent) {
        prefix_ = "[" + std::string(kind_name(req_.kind)) + " " + req_.ns + "/" + req_.pod + "/" +
                  req_.container + "]";
        if (req_.transport == StreamTransport::WebSocket)
            ws_proto_ = ws::channel_protocol(req_.protocol).value_or(ws::ChannelProtocol::V4);
    }

    const std::string &id() const { return id_; }
    uint32_t job_uid() const { return job_uid_; }
    bool waiting_for_shim() const { return launched_ && !shim_ && !finished_ && !closed_; }
    bool closed() const { return closed_; }

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
        arm_timer();
        if (client_.read_start([this](ssize_t n, const char *d) { on_client(n, d); }) != 0)
            return close_all();
        std::string early = std::move(conn_.early);
        if (!early.empty()) on_client_bytes(early);
        if (req_.transport == StreamTransport::WebSocket && !closed_) launch_when_sized();
    }

    // The shim's data connection arrived (exec_attach, already checked).
    void attach_shim(int fd, const std::string &rest, uint64_t req_id) {
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
        if (client_paused_ && !closed_) resume_client();
    }

    // Ends everything now (agent stop, protocol errors).
    void close_all() {
        if (closed_) return;
        closed_ = true;
        client_.close();
        shim_.close();
        timer_.close();
        size_wait_.close();
        if (conn_.close) conn_.close();
        conn_.close = nullptr;
        owner_.ended(this);
    }

  private:
    // ---- the client ----

    void on_client(ssize_t n, const char *d) {
        if (n < 0) {
            // The client went away (or closed after our status): the data
            // connection's close tells the shim to kill the command.
            if (!finished_) LOG_VERBOSE("%s the client closed the session", prefix_.c_str());
            return close_all();
        }
        last_activity_ = uv_now(owner_.loop_);
        on_client_bytes(std::string_view(d, static_cast<size_t>(n)));
    }

    void on_client_bytes(std::string_view bytes) {
        if (finished_) return;  // after the status: only the close matters
        if (req_.transport == StreamTransport::Spdy)
            spdy_in(bytes);
        else
            ws_in(bytes);
    }

    void spdy_in(std::string_view bytes) {
        std::vector<spdy::Frame> frames;
        Status st = spdy_decoder_.feed(bytes, &frames);
        for (auto &f : frames) {
            if (closed_ || finished_) return;
            spdy_frame(f);
        }
        if (!st.ok() && !closed_) {
            LOG_WARN("%s SPDY from the client: %s; closing", prefix_.c_str(), st.message().c_str());
            send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayProtocolError));
            end_after_writes();
        }
    }

    void spdy_frame(const spdy::Frame &f) {
        switch (f.type) {
            case spdy::FrameType::SynStream:
                return spdy_syn_stream(f);
            case spdy::FrameType::Data:
                return spdy_data(f.stream_id, f.data, f.fin());
            case spdy::FrameType::RstStream:
                // A reset stdin is its end; any other reset stream we ignore.
                if (f.stream_id == stream_id_[kStdin]) return stdin_end();
                return;
            case spdy::FrameType::Ping:
                return send_spdy(spdy::ping(f.ping_id));
            case spdy::FrameType::GoAway:
                LOG_VERBOSE("%s the client sent GOAWAY", prefix_.c_str());
                return close_all();
            default:
                return;  // SETTINGS, WINDOW_UPDATE, HEADERS, SYN_REPLY: nothing to do
        }
    }

    enum StreamSlot { kError, kStdin, kStdout, kStderr, kResize, kSlots };

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

    void spdy_syn_stream(const spdy::Frame &f) {
        if (f.stream_id > last_client_stream_) last_client_stream_ = f.stream_id;
        const std::string *type = spdy::find_header(f.headers, remotecommand::kHeaderStreamType);
        int slot = type ? slot_of(*type) : -1;
        if (slot < 0 || !expected(slot) || stream_id_[slot] != 0) {
            // The kubelet fails the session on a stream it did not ask
            // for; so do we, with the reason in our log.
            LOG_WARN("%s unexpected stream type '%s' from the client; closing", prefix_.c_str(),
                     type ? type->c_str() : "");
            send_spdy(spdy::rst_stream(f.stream_id, spdy::kRstProtocolError));
            send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayProtocolError));
            return end_after_writes();
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

    void ws_in(std::string_view bytes) {
        std::vector<ws::Message> msgs;
        Status st = ws_decoder_.feed(bytes, &msgs);
        for (auto &m : msgs) {
            if (closed_ || finished_) return;
            ws_message(m);
        }
        if (!st.ok() && !closed_) {
            LOG_WARN("%s WebSocket from the client: %s; closing", prefix_.c_str(),
                     st.message().c_str());
            send_client(ws::encode_close(ws_decoder_.close_code(), st.message()));
            end_after_writes();
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
        auto cm = ws::parse_channel_message(ws_proto_, m.payload, ws::kExecChannels);
        if (!cm.ok()) {
            send_client(ws::encode_close(ws::kCloseProtocolError, cm.message()));
            return end_after_writes();
        }
        if (cm->kind == ws::ChannelMessage::Kind::CloseStream) {
            if (cm->channel == ws::kChannelStdin) stdin_end();
            return;
        }
        if (cm->kind != ws::ChannelMessage::Kind::Data) return;
        if (cm->channel == ws::kChannelStdin && req_.in) {
            if (!cm->data.empty()) stdin_data(cm->data);
        } else if (cm->channel == ws::kChannelResize && req_.tty) {
            std::vector<remotecommand::TerminalSize> sizes;
            Status st = resize_decoder_.feed(cm->data, &sizes);
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

    // ---- the command ----

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
        if (launched_ || closed_ || finished_) return;
        launched_ = true;
        size_wait_.close();
        if (!owner_.resolver_) return finish(remotecommand::status_internal_error("no pods here"));
        auto target = owner_.resolver_(req_.ns, req_.pod);
        if (!target.ok()) return finish(remotecommand::status_internal_error(target.message()));
        job_uid_ = target->job_uid;
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
        std::weak_ptr<bool> alive = alive_;
        target->start(m, [this, alive](const Status &st) {
            if (alive.expired() || closed_ || finished_) return;
            if (!st.ok()) {
                LOG_INFO("%s refused: %s", prefix_.c_str(), st.message().c_str());
                finish(remotecommand::status_internal_error(st.message()));
            }
        });
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
        last_activity_ = uv_now(owner_.loop_);
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
    }

    // The command is over (or never ran): the status on the error stream,
    // the output streams closed, then the client's close within linger_ms.
    void finish(const std::string &status) {
        if (finished_ || closed_) return;
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

    // No more bytes to the client after what is queued: shut the write side
    // down once it went out, then wait for the client's close (a kubelet's
    // closed connection reads as the end on the client) at most linger_ms.
    void end_after_writes() {
        if (closed_ || ending_) return;
        ending_ = true;
        shim_.close();    // a command still running is killed by the shim
        resume_client();  // its close is what we wait for now
        client_.shutdown([](int) {});
        timer_.start(owner_.limits_.linger_ms, [this] { close_all(); });
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
            if (shim_paused_ && client_.write_queue_size() < owner_.limits_.relay_buffer / 2) {
                shim_paused_ = false;
                shim_.read_start([this](ssize_t n, const char *d) { on_shim(n, d); });
            }
        });
        if (shim_ && !shim_paused_ && client_.write_queue_size() > owner_.limits_.relay_buffer) {
            shim_paused_ = true;
            shim_.read_stop();
        }
    }

    void pause_client() {
        if (client_paused_ || ending_) return;
        client_paused_ = true;
        client_.read_stop();
    }

    void resume_client() {
        if (!client_paused_) return;
        client_paused_ = false;
        client_.read_start([this](ssize_t n, const char *d) { on_client(n, d); });
    }

    // One timer: the SPDY streams' deadline, then the idle timeout, then
    // (end_after_writes) the linger.
    void arm_timer() {
        uint64_t every = std::min<uint64_t>(owner_.limits_.idle_timeout_ms, 60000);
        if (req_.transport == StreamTransport::Spdy)
            every = std::min<uint64_t>(every, owner_.limits_.creation_timeout_ms);
        timer_.start(
            every, [this] { tick(); }, every);
    }

    void tick() {
        uint64_t now = uv_now(owner_.loop_);
        if (!launched_ && now - started_ms_ >= owner_.limits_.creation_timeout_ms) {
            LOG_WARN("%s the client did not open its streams within %llu ms; closing",
                     prefix_.c_str(),
                     static_cast<unsigned long long>(owner_.limits_.creation_timeout_ms));
            send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayOk));
            return end_after_writes();
        }
        if (now - last_activity_ >= owner_.limits_.idle_timeout_ms) {
            LOG_INFO("%s idle for %llu s; closing", prefix_.c_str(),
                     static_cast<unsigned long long>(owner_.limits_.idle_timeout_ms / 1000));
            finish(remotecommand::status_internal_error("the session was idle for too long"));
        }
    }

    StreamSessions &owner_;
    std::string id_;
    StreamRequest req_;
    HttpUpgrade conn_;
    std::string prefix_;
    Pipe client_;
    Pipe shim_;
    Timer timer_;
    Timer size_wait_;
    uint64_t started_ms_ = uv_now(owner_.loop_);
    uint64_t last_activity_ = 0;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for callbacks that outlive us

    uint32_t job_uid_ = 0;
    bool launched_ = false;  // exec_start sent (or the launch failed)
    bool finished_ = false;  // the status went out
    bool ending_ = false;    // no more writes to the client
    bool closed_ = false;    // everything closed
    bool stdin_closed_ = false;
    bool sized_ = false;         // a terminal size came from the client
    bool launch_waits_ = false;  // every stream is there: the size is awaited
    bool client_paused_ = false;
    bool shim_paused_ = false;
    std::string to_shim_pending_;

    spdy::Decoder spdy_decoder_;
    spdy::Encoder spdy_encoder_;
    uint32_t stream_id_[kSlots] = {};
    uint32_t last_client_stream_ = 0;
    ws::FrameDecoder ws_decoder_;
    ws::ChannelProtocol ws_proto_ = ws::ChannelProtocol::V4;
    remotecommand::ResizeDecoder resize_decoder_;
    proto::ExecFrameDecoder shim_decoder_;
};

StreamSessions::StreamSessions(uv_loop_t *loop, StreamLimits limits, ExecCheck check)
    : loop_(loop),
      limits_(limits),
      check_(std::move(check)),
      wake_(loop, [this] { take_started(); }),
      reap_(loop) {}

StreamSessions::~StreamSessions() {
    stop();
}

Status StreamSessions::check(const StreamRequest &req) {
    if (req.kind != StreamKind::Exec)
        return fail(Error::NotFound,
                    std::string(kind_name(req.kind)) + " is not served on this node yet");
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
        auto s = std::make_unique<Session>(*this, id, std::move(req), std::move(conn));
        Session *raw = s.get();
        by_id_[id] = std::move(s);
        raw->begin();
    }
}

void StreamSessions::attach(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto m = proto::exec_attach_from_json(req.body);
    if (!m.ok()) {
        c->reply(proto::error_reply(req.id, m.failure()));
        return c->close();
    }
    auto it = by_id_.find(m->session);
    if (it == by_id_.end() || !it->second->waiting_for_shim() ||
        it->second->job_uid() != c->peer().uid) {
        if (it != by_id_.end() && it->second->job_uid() != c->peer().uid)
            LOG_WARN("socket: exec_attach for a session of uid %u from uid %u pid %d: refused",
                     it->second->job_uid(), c->peer().uid, c->peer().pid);
        // One answer for all three: nothing tells another user which ids exist.
        c->reply(proto::error_reply(
            req.id, fail(Error::NotFound, "no exec session '" + m->session + "' waits")));
        return c->close();
    }
    std::string rest;
    int fd = c->take_fd(&rest);
    if (fd < 0) return;
    it->second->attach_shim(fd, rest, req.id);
}

void StreamSessions::ended(Session *s) {
    (void)s;
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
    if (stopped_) return;
    stopped_ = true;
    take_started();  // what arrived before the HTTP server stopped
    for (auto &[id, s] : by_id_)
        s->close_all();
    count_ -= by_id_.size();
    by_id_.clear();
    wake_.close();
    reap_.close();
}

}  // namespace sk::agent
