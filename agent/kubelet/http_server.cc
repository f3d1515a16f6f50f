#include "agent/kubelet/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <optional>

#include "agent/kubelet/tls_front.h"
#include "common/fs.h"
#include "common/log.h"

namespace sk {
namespace {

// A file the admin names (a symlink is followed), 1 MiB at most.
Result<std::string> read_pem(const std::string &path, const char *what) {
    auto text = read_file(path, size_t{1} << 20, Links::Follow);
    if (!text)
        return fail(Error::Io,
                    std::string("cannot read ") + what + " " + path + ": " + text.message());
    if (text->find("-----BEGIN") == std::string::npos)
        return fail(Error::InvalidArgument, std::string(what) + " " + path + " is not a PEM file");
    return text;
}

void mhd_logger(void *cls, const char *fmt, va_list ap) {
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    LOG_VERBOSE("[%s] libmicrohttpd: %s", static_cast<const char *>(cls), buf);
}

MHD_Result collect_query(void *cls, MHD_ValueKind, const char *key, const char *value) {
    auto *m = static_cast<std::map<std::string, std::string> *>(cls);
    (*m)[key ? key : ""] = value ? value : "";
    return MHD_YES;
}

MHD_Result collect_pairs(void *cls, MHD_ValueKind, const char *key, const char *value) {
    static_cast<std::vector<std::pair<std::string, std::string>> *>(cls)->emplace_back(
        key ? key : "", value ? value : "");
    return MHD_YES;
}

// Per connection, from MHD's STARTED to CLOSED notification: what an
// upgrade response hands its connection to.
struct ConnState {
    std::function<void(HttpUpgrade)> upgrade;
};

struct StreamCtx {
    std::shared_ptr<HttpStream> stream;
    HttpServer *server;
    MHD_Connection *conn;
};

}  // namespace

struct HttpServer::Upgraded {
    std::mutex mu;
    MHD_UpgradeResponseHandle *urh = nullptr;  // null once closed
};

void HttpServer::close_upgrades() {
    std::vector<std::shared_ptr<Upgraded>> all;
    {
        std::lock_guard<std::mutex> lock(upgrades_mu_);
        all.swap(upgrades_);
    }
    for (auto &u : all) {
        std::lock_guard<std::mutex> lock(u->mu);
        if (u->urh) MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
        u->urh = nullptr;
    }
}

struct HttpServerGlue {
    static void notify_connection(void *, MHD_Connection *, void **socket_context,
                                  MHD_ConnectionNotificationCode toe) noexcept {
        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
            *socket_context = new (std::nothrow) ConnState;
        } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
            delete static_cast<ConnState *>(*socket_context);
            *socket_context = nullptr;
        }
    }

    static ConnState *conn_state(MHD_Connection *conn) {
        const MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return info ? static_cast<ConnState *>(info->socket_context) : nullptr;
    }

    static void on_upgrade(void *cls, MHD_Connection *conn, void *, const char *extra_in,
                           size_t extra_in_size, MHD_socket sock,
                           MHD_UpgradeResponseHandle *urh) noexcept {
        auto *self = static_cast<HttpServer *>(cls);
        auto u = std::make_shared<HttpServer::Upgraded>();
        u->urh = urh;
        std::function<void(HttpUpgrade)> fn;
        if (ConnState *st = conn_state(conn)) fn = std::move(st->upgrade);
        {
            std::lock_guard<std::mutex> lock(self->upgrades_mu_);
            self->upgrades_.push_back(u);
        }
        HttpUpgrade h;
        h.fd = sock;
        h.early.assign(extra_in ? extra_in : "", extra_in ? extra_in_size : 0);
        h.close = [self, u] {
            {
                std::lock_guard<std::mutex> lock(u->mu);
                if (!u->urh) return;
                MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
                u->urh = nullptr;
            }
            std::lock_guard<std::mutex> lock(self->upgrades_mu_);
            auto &v = self->upgrades_;
            v.erase(std::remove(v.begin(), v.end(), u), v.end());
        };
        if (self->stopping() || !fn) {
            h.close();
            return;
        }
        try {
            fn(std::move(h));
        } catch (const std::exception &e) {
            LOG_ERROR("[%s] upgrade failed: %s", self->config_.name.c_str(), e.what());
        }
    }

    static ssize_t read_stream(void *cls, uint64_t, char *buf, size_t max) {
        auto *ctx = static_cast<StreamCtx *>(cls);
        try {
            if (ctx->server->stopping()) return MHD_CONTENT_READER_END_OF_STREAM;
            ssize_t n = ctx->stream->read(buf, max);
            if (n > 0) return n;
            if (n < 0) return MHD_CONTENT_READER_END_OF_STREAM;
            // Nothing yet. A 0 alone would make MHD's polling thread call
            // again at once (a busy loop, microhttpd.h on
            // MHD_ContentReaderCallback): park the connection instead.
            return ctx->server->park(ctx->conn) ? 0 : MHD_CONTENT_READER_END_OF_STREAM;
        } catch (const std::exception &e) {
            LOG_ERROR("[http] stream failed: %s", e.what());
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }

    static void free_stream(void *cls) { delete static_cast<StreamCtx *>(cls); }

    static MHD_Result on_request(void *cls, MHD_Connection *conn, const char *url,
                                 const char *method, const char *, const char *,
                                 size_t *upload_data_size, void **) noexcept {
        auto *self = static_cast<HttpServer *>(cls);
        // No request here has a body; refuse one instead of buffering it.
        if (*upload_data_size != 0) return MHD_NO;
        try {
            return handle(self, conn, url, method);
        } catch (const std::exception &e) {
            LOG_ERROR("[%s] request %s %s failed: %s", self->config_.name.c_str(), method, url,
                      e.what());
            return MHD_NO;
        }
    }

    static MHD_Result handle(HttpServer *self, MHD_Connection *conn, const char *url,
                             const char *method) {
        HttpRequest req;
        req.method = method;
        req.path = url;
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_query, &req.query);
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_pairs, &req.query_all);
        MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_pairs, &req.headers);
        if (const MHD_ConnectionInfo *fdi =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD))
            req.fd = fdi->connect_fd;
        HttpResponse resp;
        if (self->front_) {
            // The front checked the certificate before any byte of the
            // request reached us (agent/kubelet/tls_front.h).
            std::optional<TlsPeer> peer = self->front_->peer(req.fd);
            std::string why = !peer ? "no TLS session" : peer->refused;
            if (peer && why.empty() && !self->ca_pem_.empty()) {
                req.client_verified = true;
                req.client_cn = peer->cn;
                req.client_groups = peer->organizations;
            }
            if (!why.empty() && self->config_.pass_unverified && peer) {
                LOG_VERBOSE(
                    "[%s] %s %s: no verified client certificate (%s): the handler "
                    "authenticates it",
                    self->config_.name.c_str(), method, url, why.c_str());
            } else if (!why.empty()) {
                LOG_INFO("[%s] %s %s refused: %s", self->config_.name.c_str(), method, url,
                         why.c_str());
                resp = http_text(401, "Unauthorized\n");
            }
        }
        if (resp.status != 401) resp = self->handler_(req);
        // The connection authenticated (or is plain) and sent a request: from
        // now on the keep-alive timeout holds instead of the handshake one.
        // One the handler refused (401) keeps the short one.
        if (resp.status != 401)
            MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                      self->config_.idle_timeout_s);
        return queue(self, conn, resp);
    }

    static MHD_Result queue(HttpServer *self, MHD_Connection *conn, const HttpResponse &r) {
        MHD_Response *m;
        if (r.upgrade && r.status == 101) {
            ConnState *st = conn_state(conn);
            if (!st) return MHD_NO;
            st->upgrade = r.upgrade;
            m = MHD_create_response_for_upgrade(&HttpServerGlue::on_upgrade, self);
            if (!m) return MHD_NO;
            // An upgraded connection ends itself (its holder's close()).
            MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
        } else if (r.stream) {
            auto *ctx = new StreamCtx{r.stream, self, conn};
            m = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, static_cast<size_t>(32 * 1024),
                                                  read_stream, ctx, free_stream);
            if (!m) {
                delete ctx;
                return MHD_NO;
            }
            // A stream (kubectl logs -f) may stay quiet for long; the idle
            // timeout is for keep-alive connections and would cut it after
            // idle_timeout_s. Streams end themselves (source ended, peer gone).
            MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
        } else {
            m = MHD_create_response_from_buffer(r.body.size(), const_cast<char *>(r.body.data()),
                                                MHD_RESPMEM_MUST_COPY);
            if (!m) return MHD_NO;
        }
        MHD_add_response_header(m, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
        for (const auto &[k, v] : r.headers)
            MHD_add_response_header(m, k.c_str(), v.c_str());
        MHD_Result rc = MHD_queue_response(conn, static_cast<unsigned>(r.status), m);
        MHD_destroy_response(m);
        return rc;
    }
};

HttpResponse http_text(int status, std::string body) {
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    return r;
}

HttpServer::HttpServer(HttpServerConfig config, HttpHandler handler)
    : config_(std::move(config)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() {
    stop();
}

namespace {

// The calling thread's nice value set to `nice` for the scope (a new thread
// inherits its creator's), the old one put back at its end; lowering it back
// needs CAP_SYS_NICE, which root has (a failure is logged: the thread then
// runs at the lower priority).
class ScopedThreadNice {
  public:
    explicit ScopedThreadNice(std::optional<int> nice) {
        if (!nice) return;
        errno = 0;
        old_ = getpriority(PRIO_PROCESS, 0);
        if (errno != 0 || old_ == *nice) return;
        set_ = setpriority(PRIO_PROCESS, 0, *nice) == 0;
    }
    ~ScopedThreadNice() {
        if (set_ && setpriority(PRIO_PROCESS, 0, old_) != 0)
            LOG_WARN("cannot put the nice value %d back: %s", old_, strerror(errno));
    }
    ScopedThreadNice(const ScopedThreadNice &) = delete;
    ScopedThreadNice &operator=(const ScopedThreadNice &) = delete;

  private:
    int old_ = 0;
    bool set_ = false;
};

}  // namespace

Status HttpServer::start() {
    if (daemon_) return fail(Error::Internal, config_.name + " server already started");
    ScopedThreadNice nice(config_.thread_nice);
    // A fixed pool of polling threads (not a thread per connection): what
    // an idle or half-open socket costs does not grow into threads. Streams
    // park their connection while they have nothing to send (park()).
    // poll(): the connections of a thread are few (max_connections over
    // threads), and poll() needs no descriptor of its own.
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
    if (config_.tls) {
        if (config_.serving) {
            serving_ = config_.serving;
        } else {
            if (config_.cert_file.empty() || config_.key_file.empty())
                return fail(Error::InvalidArgument,
                            config_.name + ": TLS needs a serving certificate and key file");
            auto cert = read_pem(config_.cert_file, "serving certificate");
            if (!cert.ok()) return cert.failure();
            auto key = read_pem(config_.key_file, "serving key");
            if (!key.ok()) return key.failure();
            serving_ = std::make_shared<ServingCredentials>(std::move(*cert), std::move(*key));
        }
        if (!config_.client_ca_file.empty()) {
            auto ca = read_pem(config_.client_ca_file, "client CA");
            if (!ca.ok()) return ca.failure();
            ca_pem_ = std::move(*ca);
        }
        // The daemon never listens itself: the front accepts, runs TLS and
        // hands it the plaintext (agent/kubelet/tls_front.h says why).
        flags |= MHD_USE_NO_LISTEN_SOCKET;
    }

    struct sockaddr_storage ss {};
    socklen_t sslen = 0;
    if (config_.tls) {
        // The front's socket; the daemon's address options stay unset.
    } else if (!config_.bind_address.empty()) {
        auto *v4 = reinterpret_cast<sockaddr_in *>(&ss);
        auto *v6 = reinterpret_cast<sockaddr_in6 *>(&ss);
        if (inet_pton(AF_INET, config_.bind_address.c_str(), &v4->sin_addr) == 1) {
            v4->sin_family = AF_INET;
            v4->sin_port = htons(config_.port);
            sslen = sizeof *v4;
        } else if (inet_pton(AF_INET6, config_.bind_address.c_str(), &v6->sin6_addr) == 1) {
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons(config_.port);
            sslen = sizeof *v6;
            flags |= MHD_USE_IPv6;
        } else {
            return fail(Error::InvalidArgument, config_.name + ": bind address '" +
                                                    config_.bind_address +
                                                    "' is not an IP address");
        }
    } else {
        flags |= MHD_USE_DUAL_STACK;
    }

    MHD_OptionItem opts[13];
    int n = 0;
    opts[n++] = {MHD_OPTION_NOTIFY_CONNECTION,
                 reinterpret_cast<intptr_t>(&HttpServerGlue::notify_connection), this};
    opts[n++] = {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(mhd_logger),
                 const_cast<char *>(config_.name.c_str())};
    opts[n++] = {MHD_OPTION_CONNECTION_LIMIT, static_cast<intptr_t>(config_.max_connections),
                 nullptr};
    if (config_.max_connections_per_address)
        opts[n++] = {MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                     static_cast<intptr_t>(config_.max_connections_per_address), nullptr};
    // Every connection starts with the short budget; HttpServerGlue::handle
    // switches to idle_timeout_s once a request came.
    opts[n++] = {MHD_OPTION_CONNECTION_TIMEOUT, static_cast<intptr_t>(config_.handshake_timeout_s),
                 nullptr};
    if (config_.threads > 1)
        opts[n++] = {MHD_OPTION_THREAD_POOL_SIZE, static_cast<intptr_t>(config_.threads), nullptr};
    if (sslen) opts[n++] = {MHD_OPTION_SOCK_ADDR, 0, &ss};
    opts[n++] = {MHD_OPTION_END, 0, nullptr};

    int listen_fd = -1;
    uint16_t front_port = 0;
    if (config_.tls) {
        auto fd = tcp_listen(config_.bind_address, config_.port, &front_port);
        if (!fd.ok()) {
            std::string where = (config_.bind_address.empty() ? "*" : config_.bind_address) + ":" +
                                std::to_string(config_.port);
            return fail(Error::Io,
                        config_.name + ": cannot listen on " + where + ": " + fd.message());
        }
        listen_fd = *fd;
    }

    stopping_ = false;
    park_closed_ = false;
    daemon_ =
        MHD_start_daemon(flags, config_.tls ? 0 : config_.port, nullptr, nullptr,
                         &HttpServerGlue::on_request, this, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!daemon_) {
        int err = errno;
        if (listen_fd >= 0) close(listen_fd);
        std::string where = (config_.bind_address.empty() ? "*" : config_.bind_address) + ":" +
                            std::to_string(config_.port);
        return fail(Error::Io, config_.name + ": cannot listen on " + where + ": " +
                                   (err ? strerror(err) : "libmicrohttpd refused the settings") +
                                   (config_.tls ? " (check the certificate and key)" : ""));
    }
    if (config_.tls) {
        TlsFrontConfig fc;
        fc.name = config_.name;
        fc.serving = serving_;
        fc.ca_pem = ca_pem_;
        front_ = std::make_unique<TlsFront>(
            std::move(fc), listen_fd, [this](int fd, const sockaddr *addr, socklen_t len) {
                return MHD_add_connection(daemon_, fd, addr, len) == MHD_YES;
            });
        Status st = front_->start();
        if (!st.ok()) {
            front_.reset();  // closes listen_fd
            MHD_stop_daemon(daemon_);
            daemon_ = nullptr;
            return st;
        }
        port_ = front_port;
    } else {
        const MHD_DaemonInfo *info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
        port_ = info ? info->port : config_.port;
    }
    waker_ = std::thread([this] { waker(); });
    LOG_INFO("[%s] listening on port %u (%s%s)", config_.name.c_str(), port_,
             config_.tls ? "https" : "http",
             config_.tls && !ca_pem_.empty() ? ", client certificates required" : "");
    return {};
}

void HttpServer::stop() {
    if (!daemon_) return;
    stopping_ = true;
    {
        // MHD must not be stopped with suspended connections
        // (microhttpd.h, MHD_suspend_connection): resume them all; their
        // readers then see stopping() and end.
        std::lock_guard<std::mutex> lock(park_mu_);
        park_closed_ = true;
        for (MHD_Connection *c : parked_)
            MHD_resume_connection(c);
        parked_.clear();
    }
    park_cv_.notify_all();
    waker_.join();
    // No new connection from here; the open ones end (their plaintext ends
    // read EOF in the daemon).
    if (front_) front_->stop();
    // MHD must not be stopped with upgraded connections open (microhttpd.h).
    close_upgrades();
    MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
    front_.reset();
}

bool HttpServer::park(MHD_Connection *conn) {
    std::lock_guard<std::mutex> lock(park_mu_);
    if (park_closed_) return false;
    // Allowed from within a content reader (microhttpd.h); resumed by
    // waker() or stop(), both under park_mu_, never twice.
    MHD_suspend_connection(conn);
    parked_.push_back(conn);
    return true;
}

void HttpServer::waker() {
    std::unique_lock<std::mutex> lock(park_mu_);
    while (!park_closed_) {
        park_cv_.wait_for(lock, std::chrono::milliseconds(std::max(1, config_.stream_poll_ms)));
        for (MHD_Connection *c : parked_)
            MHD_resume_connection(c);
        parked_.clear();
    }
}

bool HttpServer::peer_closed(int fd, int wait_ms) {
    if (fd < 0) {
        if (wait_ms > 0) poll(nullptr, 0, wait_ms);
        return false;
    }
    // POLLIN is not asked for: a client may send more bytes (TLS records,
    // a pipelined request) without going away, which would make this spin.
    struct pollfd p {};
    p.fd = fd;
    p.events = POLLRDHUP;
    int rc = poll(&p, 1, wait_ms);
    return rc > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

}  // namespace sk
