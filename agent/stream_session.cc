#include "agent/stream_session.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/kubelet/http_server.h"
#include "common/log.h"

namespace sk::agent {

const char *stream_kind_name(StreamKind k) {
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

StreamSession::StreamSession(SessionHost &host, std::string id, StreamRequest req, HttpUpgrade conn)
    : host_(host),
      id_(std::move(id)),
      req_(std::move(req)),
      conn_(std::move(conn)),
      client_(host.loop()),
      timer_(host.loop()),
      started_ms_(uv_now(host.loop())) {
    prefix_ = "[" + std::string(stream_kind_name(req_.kind)) + " " + req_.ns + "/" + req_.pod +
              (req_.container.empty() ? "" : "/" + req_.container) + "]";
    if (req_.transport == StreamTransport::WebSocket)
        ws_proto_ = ws::channel_protocol(req_.protocol).value_or(ws::ChannelProtocol::V4);
}

StreamSession::~StreamSession() {
    host_.unexpect_shim(id_);
}

void StreamSession::attach_shim(int fd, const std::string & /*rest*/, uint64_t /*req_id*/) {
    ::close(fd);
}

void StreamSession::begin() {
    // The upgrade's descriptor stays the HTTP server's (it closes it on
    // conn_.close()); the loop reads and writes a duplicate.
    int fd = fcntl(conn_.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0 || client_.open(fd) != 0) {
        if (fd >= 0) ::close(fd);
        LOG_WARN("%s cannot take the connection over", prefix_.c_str());
        return close_all();
    }
    last_activity_ = uv_now(host_.loop());
    timer_.start(
        kTickMs, [this] { tick(); }, kTickMs);
    if (client_.read_start([this](ssize_t n, const char *d) { on_client(n, d); }) != 0)
        return close_all();
    std::string early = std::move(conn_.early);
    if (!early.empty()) on_client_bytes(early);
    if (!closed_) on_begun();
}

void StreamSession::close_all() {
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
    host_.ended();
}

void StreamSession::on_client(ssize_t n, const char *d) {
    if (n < 0) {
        if (!ending_) LOG_VERBOSE("%s the client closed the session", prefix_.c_str());
        return close_all();
    }
    last_activity_ = uv_now(host_.loop());
    on_client_bytes(std::string_view(d, static_cast<size_t>(n)));
}

void StreamSession::on_client_bytes(std::string_view bytes) {
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
            LOG_WARN("%s SPDY from the client: %s; closing", prefix_.c_str(), st.message().c_str());
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

void StreamSession::ws_message(const ws::Message &m) {
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

void StreamSession::end_after_writes(uint64_t linger_ms) {
    if (closed_ || ending_) return;
    ending_ = true;
    linger_ms_ = linger_ms ? linger_ms : host_.limits().linger_ms;
    close_upstreams();
    resume_client();  // its close is what we wait for now
    ending_ms_ = uv_now(host_.loop());
    ending_queued_ = client_.write_queue_size();
}

void StreamSession::send_spdy(const spdy::Frame &f) {
    std::string out;
    Status st = spdy_encoder_.encode(f, &out);
    if (!st.ok()) {
        LOG_ERROR("%s cannot encode a SPDY frame: %s", prefix_.c_str(), st.message().c_str());
        return close_all();
    }
    send_client(std::move(out));
}

void StreamSession::send_client(std::string bytes) {
    if (closed_ || ending_) return;
    client_.write(std::move(bytes), [this, alive = std::weak_ptr<bool>(alive_)](int) {
        if (alive.expired() || closed_) return;
        if (client_full_ && client_.write_queue_size() < host_.limits().relay_buffer / 2) {
            client_full_ = false;
            client_drained();
        }
    });
    if (client_.write_queue_size() > host_.limits().relay_buffer) client_full_ = true;
}

void StreamSession::pause_client() {
    if (client_paused_ || ending_) return;
    LOG_DEBUG("%s the relay is full: not reading the client", prefix_.c_str());
    client_paused_ = true;
    client_.read_stop();
}

void StreamSession::resume_client() {
    if (!client_paused_ || closed_) return;
    LOG_DEBUG("%s reading the client again", prefix_.c_str());
    client_paused_ = false;
    client_.read_start([this](ssize_t n, const char *d) { on_client(n, d); });
}

void StreamSession::tick() {
    uint64_t now = uv_now(host_.loop());
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
    if (awaiting_streams() && now - started_ms_ >= host_.limits().creation_timeout_ms) {
        LOG_WARN("%s the client did not open its streams within %llu ms; closing", prefix_.c_str(),
                 static_cast<unsigned long long>(host_.limits().creation_timeout_ms));
        send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayOk));
        return end_after_writes(kErrorLingerMs);
    }
    if (now - last_activity_ >= host_.limits().idle_timeout_ms) {
        LOG_INFO("%s idle for %llu s; closing", prefix_.c_str(),
                 static_cast<unsigned long long>(host_.limits().idle_timeout_ms / 1000));
        idle();
    }
}

void StreamSession::idle() {
    if (req_.transport == StreamTransport::Spdy)
        send_spdy(spdy::goaway(last_client_stream_, spdy::kGoAwayOk));
    else
        send_client(ws::encode_close(ws::kCloseNormal, "idle"));
    end_after_writes();
}

}  // namespace sk::agent
