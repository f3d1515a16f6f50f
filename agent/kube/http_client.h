// HTTP for the agent: an abstract transport (so controllers can be tested
// with a fake one) and its implementation on libcurl's multi interface driven
// by libuv: curl's socket callback -> one Poll per socket, its timer
// callback -> one Timer (uv/handles.h), messages checked after every action. One multi
// handle = one connection pool; HTTP/2 with multiplexing where offered, so
// all watches share a connection. No globals; nothing throws across a
// callback.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "uv/handles.h"

typedef struct uv_loop_s uv_loop_t;

namespace sk::agent {

struct Credential;  // agent/kube/api_auth.h

// Who a request acts as (kube-apiserver's impersonation: Impersonate-User,
// one Impersonate-Group per group) while it authenticates with the
// transport's own credential: node_identity = impersonate sends a virtual
// node's traffic as system:node:<node> over the agent's connections. The
// values go into header lines as they are: the caller's contract is that
// they are names without control characters (a validated DNS-1123 node
// name, a fixed group).
struct Impersonation {
    std::string user;
    std::vector<std::string> groups;
};

struct HttpRequest {
    std::string method = "GET";
    std::string url;
    std::string body;
    std::string content_type;     // for bodies
    uint64_t timeout_ms = 10000;  // whole request; 0 = none (watches)
    // Presented instead of the transport's own credential (a virtual node's
    // identity, agent/controllers/node_identity.h); its 401 is the caller's to handle:
    // the transport's ApiAuth neither hears of it nor retries. Connections
    // are shared only between requests with the same client certificate.
    std::shared_ptr<const Credential> credential;
    // Sent as that user (with the transport's credential; not with `credential`).
    std::shared_ptr<const Impersonation> impersonate;
};

struct HttpResponse {
    long status = 0;
    std::string body;
    uint32_t retry_after_s = 0;  // the Retry-After header in seconds (0 = none, or a date)
};

// Transport failure (connect refused, TLS, timeout) -> Error::Transient.
using HttpCallback = std::function<void(Result<HttpResponse>)>;
// A streamed body: on_data gets 2xx body chunks as they arrive; on_done the
// status (for non-2xx, the error body is in the response).
using HttpDataCallback = std::function<void(std::string_view)>;

class HttpTransport {
  public:
    virtual ~HttpTransport() = default;
    // Callbacks run on the loop, later (never inside the call).
    virtual uint64_t request(HttpRequest req, HttpCallback done) = 0;
    virtual uint64_t stream(HttpRequest req, HttpDataCallback on_data, HttpCallback done) = 0;
    // The callbacks of id are never called after this; unknown ids are ignored.
    virtual void cancel(uint64_t id) = 0;
};

struct TlsConfig {
    std::string ca_file, client_cert, client_key;
    std::string bearer_token;  // sent as Authorization: Bearer
    std::string ca_data;       // PEM instead of ca_file
    // Dial connect_host:port for the URL's host:port (kubeconfig
    // tls-server-name: the URL names the certificate's name); "" = the URL's.
    std::string connect_to;
    std::string proxy_url;  // "" = none (libcurl's proxy environment is not read)
};

class ApiAuth;

class CurlTransport : public HttpTransport {
  public:
    CurlTransport(uv_loop_t *loop, TlsConfig tls);
    // Each request carries auth's current credential instead of the fixed
    // ones of TlsConfig; a 401 is reported to it, and the request sent once
    // more when it has another credential since (agent/kube/api_auth.h). auth
    // outlives the transport.
    void set_auth(ApiAuth *auth) { auth_ = auth; }
    // Once a response came over HTTP/2, at most `n` connections to the
    // server (0 = no cap, the default). Only where every request shares one
    // credential: TLS client certificates of their own (node identities) need
    // a connection each, and HTTP/1.1 one per open watch, so neither is capped.
    void set_http2_connection_cap(long n) { h2_cap_ = n; }
    ~CurlTransport() override;
    Status start();
    // Cancels everything; handles are closed asynchronously (run the loop).
    void stop();

    uint64_t request(HttpRequest req, HttpCallback done) override;
    uint64_t stream(HttpRequest req, HttpDataCallback on_data, HttpCallback done) override;
    void cancel(uint64_t id) override;
    size_t in_flight() const { return transfers_.size(); }

    struct Transfer;
    struct Impl;  // the C callbacks reach the object through it

  private:
    uint64_t add(HttpRequest req, HttpDataCallback on_data, HttpCallback done);
    void start_transfer(std::unique_ptr<Transfer> t);
    void check_messages();
    void note_http_version(void *easy);  // CURL*: caps connections once HTTP/2 is seen
    void reap();
    void on_poll(int socket, int status, int events);  // a watched socket is ready
    void kick();                                       // runs service() from the loop soon
    void service();  // adds queued transfers, removes cancelled ones

    uv_loop_t *loop_;
    TlsConfig tls_;
    ApiAuth *auth_ = nullptr;
    void *connect_to_ = nullptr;  // curl_slist* of tls_.connect_to
    void *multi_ = nullptr;       // CURLM*
    Timer timer_;                 // curl's timeout
    Timer reaper_;                // service() soon (kick)
    uint64_t next_id_ = 1;
    std::map<uint64_t, std::unique_ptr<Transfer>> transfers_;
    std::vector<uint64_t> pending_add_;
    bool stopped_ = false;
    long h2_cap_ = 0;
    bool h2_capped_ = false;
    friend struct Impl;
};

}  // namespace sk::agent
