// A small HTTP(S) server over libmicrohttpd for the kubelet endpoint and the
// agent's /metrics. It runs in MHD's own threads, never in the agent's event
// loop: handlers must be thread-safe and must not touch loop-owned state
// without a lock. Those threads are a fixed pool (HttpServerConfig::threads),
// each polling its connections with epoll, so an idle or half-open
// connection costs a socket and a little memory, not a thread; a handler or a
// stream's read() that blocks holds up every connection of its thread.
//
// Untrusted peers are bounded before they authenticate: a connection gets
// handshake_timeout_s of inactivity to finish its TLS handshake and send its
// first request, at most max_connections_per_address come from one address,
// at most max_connections in all (docs/security.md, "The kubelet endpoint").
//
// TLS mode: serves `cert_file`/`key_file` through the agent's own TLS front
// (agent/kubelet/tls_front.h: GnuTLS, one end of a socket pair per connection handed
// to libmicrohttpd in plain mode, the client's address kept for the limits);
// with `client_ca_file` every request must carry a client certificate that
// verifies against that CA, else 401 (what a kubelet with anonymous auth off
// answers). Plain mode: for tests and for a localhost-only /metrics.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
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

struct MHD_Daemon;
struct MHD_Connection;

namespace sk {

class TlsFront;
class ServingCredentials;

struct HttpRequest {
    std::string method;                        // "GET"
    std::string path;                          // decoded, without the query
    std::map<std::string, std::string> query;  // last value wins
    // Every query argument and request header in order, repeated names kept
    // (`command=` once per word, X-Stream-Protocol-Version once per offer).
    std::vector<std::pair<std::string, std::string>> query_all;
    std::vector<std::pair<std::string, std::string>> headers;
    // With a client CA: whether the client presented a certificate that
    // verified, and its subject CN and O values (a kubelet's user and groups).
    bool client_verified = false;
    std::string client_cn;  // "" in plain mode
    std::vector<std::string> client_groups;
    int fd = -1;  // the connection's socket, or with TLS its plaintext end
};

// A body produced while it is sent (chunked). read() runs in a polling
// thread shared with other connections: it must not wait for data (bounded
// work per call). When it has nothing yet the connection is parked
// (MHD_suspend_connection) and read() is called again stream_poll_ms later;
// a server stop ends the body without calling read() again.
class HttpStream {
  public:
    virtual ~HttpStream() = default;
    // > 0: bytes written into buf (at most max); 0: nothing yet, call again
    // later; -1: end of the body.
    virtual ssize_t read(char *buf, size_t max) = 0;
};

// A connection after a 101 Switching Protocols: fd carries the client's
// bytes both ways (with TLS one end of a socket pair whose other end the TLS
// front encrypts), `early` holds what the client sent after its request
// that the server already read. The holder reads and writes fd
// (non-blocking; it may shutdown() it, never close() it) and calls close()
// when it is done, once, from any thread: the server then closes the
// connection. The client's close (FIN, close_notify) reads as EOF on fd and
// shows as peer_closed(fd, 0) also while the holder does not read. A server
// stop closes every upgraded connection still open (fd then reads EOF and
// close() does nothing more).
struct HttpUpgrade {
    int fd = -1;
    std::string early;
    std::function<void()> close;
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;                    // used when stream is null
    std::shared_ptr<HttpStream> stream;  // chunked body
    std::map<std::string, std::string> headers;
    // With status 101 (and headers naming the Upgrade): called with the
    // connection once the response went out, in a polling thread (it must
    // not block). Not called when the client is gone before.
    std::function<void(HttpUpgrade)> upgrade;
};

HttpResponse http_text(int status, std::string body);

using HttpHandler = std::function<HttpResponse(const HttpRequest &)>;

struct HttpServerConfig {
    std::string name = "http";  // log prefix: "[kubelet] ..."
    std::string bind_address;   // IPv4/IPv6 literal; "" = all addresses
    uint16_t port = 0;          // 0 = an ephemeral port (see HttpServer::port())
    bool tls = false;
    std::string cert_file;  // PEM serving certificate (chain)
    std::string key_file;   // PEM private key
    // Instead of the two files: a pair that may come later and change while
    // the server runs (agent/kubelet/tls_front.h); shared by the servers given it.
    std::shared_ptr<ServingCredentials> serving;
    std::string client_ca_file;  // PEM CA; "" = no client certificate required
    // With a client CA: a request without a verified certificate goes to the
    // handler (client_verified false) instead of the server's 401, for a
    // handler that authenticates bearer tokens itself.
    bool pass_unverified = false;
    unsigned max_connections = 64;              // all addresses together
    unsigned max_connections_per_address = 16;  // from one client address; 0 = no own limit
    // Inactivity a new connection may spend before its first request (TCP
    // accepted, TLS handshake, request headers); then idle_timeout_s holds.
    unsigned handshake_timeout_s = 10;
    unsigned idle_timeout_s = 60;  // keep-alive connections between requests
    unsigned threads = 2;          // polling threads (at least 1)
    int stream_poll_ms = 100;      // a parked stream's next read() (HttpStream); >= 1
    // The CPU nice value of the server's threads (libmicrohttpd's, the TLS
    // front's, the waker): set on the starting thread around start(), which
    // they inherit, then the starting thread's own is put back. None: the
    // starting thread's. The agent's kubelet endpoint runs below its loop:
    // what its clients move (logs, exec, port-forward) must not queue the
    // pods' status (docs/architecture.md, "Priorities").
    std::optional<int> thread_nice;
};

class HttpServer {
  public:
    // No I/O here; start() reads the files and binds.
    HttpServer(HttpServerConfig config, HttpHandler handler);
    ~HttpServer();  // stop()
    HttpServer(const HttpServer &) = delete;
    HttpServer &operator=(const HttpServer &) = delete;

    Status start();
    // Ends every stream (stopping() turns true, parked ones are resumed to
    // end), then joins MHD's threads; waits on no stream's data.
    void stop();
    uint16_t port() const { return port_; }
    // True once stop() began: long-running streams poll this.
    bool stopping() const { return stopping_.load(); }

    // Whether the peer of a connection has closed it (poll for POLLRDHUP,
    // waiting at most wait_ms; a stream passes 0): a following stream's and
    // an upgraded connection's way to end early.
    static bool peer_closed(int fd, int wait_ms);

  private:
    friend struct HttpServerGlue;  // the MHD callbacks in http_server.cc

    // Parks a stream's connection until the waker's next round; false once
    // stop() began (the stream then ends instead).
    bool park(MHD_Connection *conn);
    void waker();  // resumes the parked connections every stream_poll_ms

    HttpServerConfig config_;
    HttpHandler handler_;
    std::shared_ptr<ServingCredentials> serving_;
    std::string ca_pem_;
    MHD_Daemon *daemon_ = nullptr;
    std::unique_ptr<TlsFront> front_;  // TLS mode
    uint16_t port_ = 0;
    std::atomic<bool> stopping_{false};

    // Upgraded connections not closed yet (HttpUpgrade::close, stop()).
    struct Upgraded;
    std::mutex upgrades_mu_;
    std::vector<std::shared_ptr<Upgraded>> upgrades_;
    void close_upgrades();

    std::mutex park_mu_;
    std::condition_variable park_cv_;
    std::vector<MHD_Connection *> parked_;  // suspended, to be resumed
    bool park_closed_ = false;              // stop() resumed them all: no more parking
    std::thread waker_;
};

}  // namespace sk
