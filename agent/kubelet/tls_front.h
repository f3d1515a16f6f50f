// TLS in the agent's own hands, in front of a plain libmicrohttpd daemon
// (agent/kubelet/http_server.h). Why: libmicrohttpd 0.9.75 (Debian 12's) relays an
// upgraded TLS connection (kubectl exec, attach, port-forward) through
// buffers carved from the connection's memory pool after its response
// header took all of it, so the relay falls back to an 8-byte emergency
// buffer and moves about 200 KB/s; it also never passes a client's close
// on to the upgraded socket (docs/benchmarks.md, "kubectl exec and
// port-forward"). Here the front accepts each TCP connection, runs the TLS
// session with GnuTLS and hands libmicrohttpd one end of a socket pair that
// carries the plaintext; an upgraded connection is that end itself, so the
// front's relay (bounded buffers of relay_buffer bytes each way, full TLS
// records) is the only copy, and a client's close reads as EOF there.
//
// Contracts:
// - hand_off(fd, addr, len) gives libmicrohttpd the plaintext end with the
//   client's own address (its per-address and total connection limits and
//   its inactivity timeouts hold as before: a handshake that stalls is an
//   idle connection there, closed after its handshake timeout, and the
//   front then closes the TCP connection). It returns false when the daemon
//   refused the connection, having closed fd (MHD_add_connection's
//   contract); the front then drops the client.
// - No plaintext reaches the daemon before the handshake completed and the
//   client's certificate was checked against client_ca: peer(fd), called
//   from the daemon's threads while it holds fd, is then always the answer
//   for that connection.
// - Half-closes pass through both ways: the client's close_notify or FIN
//   shuts the plaintext end's write side; the daemon's (or an upgraded
//   connection's holder's) shutdown or close sends close_notify and a FIN.
//   Once the client's side ended, what the daemon does not take at once is
//   dropped: a holder that stopped reading (a full relay) still sees the
//   client's end (peer_closed on its fd) instead of waiting behind bytes
//   nobody will answer.
//   The connection ends when both ways ended, when either side fails, or
//   when the daemon closed its end entirely and nothing is left to send.
// - Everything runs in one thread of the front's own, never blocking: a slow
//   reader on either side pauses the other side's reads, not other
//   connections.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"

namespace sk {

// What the TLS handshake established about a client.
struct TlsPeer {
    std::string refused;  // "" when the certificate verified (or none is asked for), else why not
    std::string cn;       // the verified certificate's subject CN
    std::vector<std::string> organizations;  // its subject O values (a kubelet's groups)
};

// The certificate and key TLS fronts serve, replaceable while they run (a
// serving certificate obtained and renewed through CSRs, agent/controllers/
// csr_certificate.h); one may be shared by several fronts (the per-node
// endpoints). Thread-safe. A front takes a new pair for the connections it
// accepts after set(); those open keep the one they began with. Until the
// first pair a front closes every connection it accepts at once, and logs
// why (set_waiting()) at most every 10 s.
class ServingCredentials {
  public:
    ServingCredentials() = default;
    ServingCredentials(std::string cert_pem, std::string key_pem);
    void set(std::string cert_pem, std::string key_pem);
    void set_waiting(std::string why);
    struct Pair {
        uint64_t generation = 0;  // 0: no pair yet; each set() counts one up
        std::string cert_pem;     // serving certificate (chain)
        std::string key_pem;      // its private key
        std::string waiting;      // why there is none yet
    };
    Pair current() const;
    uint64_t generation() const { return generation_.load(); }

  private:
    mutable std::mutex mu_;
    Pair pair_;
    std::atomic<uint64_t> generation_{0};
};

struct TlsFrontConfig {
    std::string name = "http";                    // log prefix
    std::shared_ptr<ServingCredentials> serving;  // required
    std::string ca_pem;                           // client CA; "" = no client certificate asked for
    size_t relay_buffer = size_t{64} * 1024;      // bytes buffered each way per connection
};

using TlsHandOff = std::function<bool(int fd, const sockaddr *addr, socklen_t len)>;

class TlsFront {
  public:
    // No I/O here. listen_fd: a bound, listening socket the front owns from
    // start() on (closed by stop()).
    TlsFront(TlsFrontConfig config, int listen_fd, TlsHandOff hand_off);
    ~TlsFront();  // stop()
    TlsFront(const TlsFront &) = delete;
    TlsFront &operator=(const TlsFront &) = delete;

    // Loads the credentials (an unusable certificate or key is an error
    // here, not at the first client; none yet is not) and starts the thread.
    Status start();
    // Closes the listening socket and every connection, joins the thread.
    void stop();

    // The client of a connection whose plaintext end (as handed off) is fd;
    // nullopt when fd is none of the front's. Thread-safe.
    std::optional<TlsPeer> peer(int fd) const;

    // Connections open now (for tests and the agent's metrics).
    size_t connections() const { return open_.load(); }

  private:
    struct Conn;
    struct Creds;
    void run();
    void accept_all();
    bool step(Conn &c);  // false: the connection is over
    void close_conn(Conn &c);
    // Creds for the pair in config_.serving, built again when it changed;
    // null while there is no usable pair.
    std::shared_ptr<Creds> current_creds();
    Result<std::shared_ptr<Creds>> make_creds(const ServingCredentials::Pair &pair) const;

    TlsFrontConfig config_;
    int listen_fd_;
    TlsHandOff hand_off_;
    std::shared_ptr<Creds> creds_;  // the thread's own once started
    uint64_t creds_generation_ = 0;
    int64_t refusal_logged_ = 0;  // monotonic s of the last "no certificate" line
    int wake_[2] = {-1, -1};      // stop() writes, run() polls
    std::thread thread_;
    std::atomic<bool> running_{false};
    std::atomic<size_t> open_{0};

    std::map<uint64_t, std::unique_ptr<Conn>> conns_;  // the thread's own
    uint64_t next_id_ = 1;

    // Handed-off fd -> the connection's peer, from the handshake's end until
    // the connection closes. A later connection may reuse an fd number only
    // once the daemon closed the old one; the newer entry then wins and the
    // older connection's close leaves it in place (owner id).
    struct PeerEntry {
        uint64_t owner;
        TlsPeer peer;
    };
    mutable std::mutex peers_mu_;
    std::map<int, PeerEntry> peers_;
};

// A bound, listening, non-blocking TCP socket on address:port ("" = every
// address, IPv6 and IPv4). port 0 picks a free one; *bound_port says which.
Result<int> tcp_listen(const std::string &address, uint16_t port, uint16_t *bound_port);

}  // namespace sk
