// port-forward (docs/architecture.md "Exec sessions"). SPDY: per forwarded
// connection the client opens an error stream and a data stream with the
// same requestid and port; the data stream is relayed to a new TCP
// connection to the pod's listener. WebSocket: one connection per
// port of the query, on channels 2i (data) and 2i+1 (errors), each opened
// with the port (2 bytes, little endian). Errors go on the error stream as
// the kubelet words them, and end that connection only.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "agent/kubelet/streams/remotecommand.h"
#include "agent/stream_session.h"
#include "common/log.h"

namespace sk::agent {

namespace {

class ForwardSession : public StreamSession {
  public:
    using StreamSession::StreamSession;

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
        host_.resolve(req_.ns, req_.pod,
                      [this, key, alive = std::weak_ptr<bool>(alive_)](Result<ExecTarget> t) {
                          if (alive.expired() || closed_) return;
                          auto it = conns_.find(key);
                          if (it != conns_.end()) dial_in(it->second.get(), key, std::move(t));
                      });
    }

    void dial_in(Conn *c, uint64_t key, Result<ExecTarget> target) {
        if (!target.ok()) return conn_error(key, target.message());
        if (!target->pod_ip.empty()) return connect(c, key, target->pod_ip, false);
        if (!host_.limits().forward_any_port &&
            std::find(target->ports.begin(), target->ports.end(), c->port) == target->ports.end())
            return conn_error(key, "the pod declares no containerPort " + std::to_string(c->port) +
                                       " (this node forwards only to declared ports)");
        auto l = host_.find_listener(c->port, target->job_uid);
        if (!l)
            return conn_error(key, "failed to connect to localhost:" + std::to_string(c->port) +
                                       ": no process of the pod listens on it");
        connect(c, key, l->connect_to, l->v6);
    }

    void connect(Conn *c, uint64_t key, const std::string &addr, bool v6) {
        sockaddr_storage ss{};
        int rc = v6 ? uv_ip6_addr(addr.c_str(), c->port, reinterpret_cast<sockaddr_in6 *>(&ss))
                    : uv_ip4_addr(addr.c_str(), c->port, reinterpret_cast<sockaddr_in *>(&ss));
        if (rc != 0) return conn_error(key, "bad listener address " + addr);
        c->tcp = Tcp(host_.loop());
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
            if (c->pending.size() > host_.limits().relay_buffer) pause_client();
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
        if (c->tcp.write_queue_size() > host_.limits().relay_buffer) pause_client();
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
            if (c->tcp.write_queue_size() + c->pending.size() >= host_.limits().relay_buffer / 2)
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

}  // namespace

std::unique_ptr<StreamSession> new_forward_session(SessionHost &host, std::string id,
                                                   StreamRequest req, HttpUpgrade conn) {
    return std::make_unique<ForwardSession>(host, std::move(id), std::move(req), std::move(conn));
}

}  // namespace sk::agent
