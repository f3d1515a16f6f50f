// A small HTTP(S) server over libmicrohttpd for the kubelet endpoint and the
// agent's /metrics. It runs in MHD's own threads (one per connection, so a
// streaming response may block), never in the agent's event loop: handlers
// must be thread-safe and must not touch loop-owned state without a lock.
//
// TLS mode (GnuTLS backend): serves `cert_file`/`key_file`; with
// `client_ca_file` every request must carry a client certificate that
// verifies against that CA, else 401 (what a kubelet with anonymous auth off
// answers). Plain mode: for tests and for a localhost-only /metrics.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/result.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace sk {

struct HttpRequest {
    std::string method;                        // "GET"
    std::string path;                          // decoded, without the query
    std::map<std::string, std::string> query;  // last value wins
    std::string client_cn;  // TLS client certificate's subject CN ("" in plain mode)
    int fd = -1;            // the connection's socket (see HttpStream)
};

// A body produced while it is sent (chunked). read() runs in the
// connection's own thread and may block; it must return within about a
// second at a time so that a server stop or a gone client is noticed.
class HttpStream {
  public:
    virtual ~HttpStream() = default;
    // > 0: bytes written into buf (at most max); 0: nothing yet, call again;
    // -1: end of the body.
    virtual ssize_t read(char *buf, size_t max) = 0;
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;                    // used when stream is null
    std::shared_ptr<HttpStream> stream;  // chunked body
    std::map<std::string, std::string> headers;
};

HttpResponse http_text(int status, std::string body);

using HttpHandler = std::function<HttpResponse(const HttpRequest &)>;

struct HttpServerConfig {
    std::string name = "http";  // log prefix: "[kubelet] ..."
    std::string bind_address;   // IPv4/IPv6 literal; "" = all addresses
    uint16_t port = 0;          // 0 = an ephemeral port (see HttpServer::port())
    bool tls = false;
    std::string cert_file;       // PEM serving certificate (chain)
    std::string key_file;        // PEM private key
    std::string client_ca_file;  // PEM CA; "" = no client certificate required
    unsigned max_connections = 64;
    unsigned idle_timeout_s = 60;  // keep-alive connections without a request
};

class HttpServer {
  public:
    // No I/O here; start() reads the files and binds.
    HttpServer(HttpServerConfig config, HttpHandler handler);
    ~HttpServer();  // stop()
    HttpServer(const HttpServer &) = delete;
    HttpServer &operator=(const HttpServer &) = delete;

    Status start();
    // Tells streams to end (stopping() turns true), then joins MHD's threads.
    void stop();
    uint16_t port() const { return port_; }
    // True once stop() began: long-running streams poll this.
    bool stopping() const { return stopping_.load(); }

    // Whether the peer of a connection has closed it (poll for POLLRDHUP,
    // waiting at most wait_ms): a following stream's way to end early.
    static bool peer_closed(int fd, int wait_ms);

  private:
    friend struct HttpServerGlue;  // the MHD callbacks in http_server.cc

    HttpServerConfig config_;
    HttpHandler handler_;
    std::string cert_pem_, key_pem_, ca_pem_;
    MHD_Daemon *daemon_ = nullptr;
    uint16_t port_ = 0;
    std::atomic<bool> stopping_{false};
};

}  // namespace sk
