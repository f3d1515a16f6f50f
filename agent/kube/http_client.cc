#include <config.h>  // PACKAGE_VERSION (agent/core/agent_config.h is the agent's own)

#include "agent/kube/http_client.h"

#include <curl/curl.h>

#include <vector>

#include "agent/kube/api_auth.h"
#include "common/log.h"

namespace sk::agent {

struct CurlTransport::Transfer {
    uint64_t id = 0;
    CURL *easy = nullptr;
    curl_slist *headers = nullptr;
    HttpRequest req;
    HttpDataCallback on_data;
    HttpCallback done;
    std::string body;  // whole body (request) or error body (stream, non-2xx)
    long status = 0;
    bool cancelled = false;
    bool retried = false;     // sent again after a 401 (once at most)
    uint64_t generation = 0;  // of the credential it carries (ApiAuth)
    char errbuf[CURL_ERROR_SIZE] = "";
};

namespace {

// One socket libcurl asked to watch (curl_multi_assign's pointer): freed when
// curl removes it, also from inside the Poll's own callback.
struct PollCtx {
    Poll poll;
};

}  // namespace

struct CurlTransport::Impl {
    static int on_socket(CURL *, curl_socket_t s, int what, void *userp, void *socketp) noexcept {
        auto *self = static_cast<CurlTransport *>(userp);
        auto *ctx = static_cast<PollCtx *>(socketp);
        CURLM *multi = static_cast<CURLM *>(self->multi_);
        if (what == CURL_POLL_REMOVE) {
            if (ctx) {
                delete ctx;
                curl_multi_assign(multi, s, nullptr);
            }
            return 0;
        }
        if (!ctx) {
            ctx = new (std::nothrow) PollCtx{Poll(self->loop_, s)};
            if (!ctx) return -1;
            if (!ctx->poll) {
                delete ctx;
                return -1;
            }
            curl_multi_assign(multi, s, ctx);
        }
        int events = 0;
        if (what & CURL_POLL_IN) events |= Poll::kReadable;
        if (what & CURL_POLL_OUT) events |= Poll::kWritable;
        // The callback keeps what it needs by value: curl may free ctx from
        // inside the action.
        ctx->poll.start(events, [self, s](int status, int ev) { self->on_poll(s, status, ev); });
        return 0;
    }

    static int on_timer(CURLM *, long timeout_ms, void *userp) noexcept {
        auto *self = static_cast<CurlTransport *>(userp);
        if (timeout_ms < 0) {
            self->timer_.stop();
        } else {
            // 0 means "now"; going through the loop avoids re-entering curl.
            self->timer_.start(static_cast<uint64_t>(timeout_ms), [self] {
                int running = 0;
                curl_multi_socket_action(static_cast<CURLM *>(self->multi_), CURL_SOCKET_TIMEOUT, 0,
                                         &running);
                self->check_messages();
            });
        }
        return 0;
    }

    static size_t on_write(char *ptr, size_t size, size_t n, void *userp) noexcept {
        auto *t = static_cast<Transfer *>(userp);
        size_t len = size * n;
        if (t->cancelled) return 0;  // aborts the transfer
        if (t->status == 0) curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
        try {
            if (t->on_data && t->status >= 200 && t->status < 300) {
                t->on_data(std::string_view(ptr, len));
            } else if (t->body.size() < (64u << 20)) {
                t->body.append(ptr, len);
            }
        } catch (const std::exception &e) {
            LOG_ERROR("http: %s %s: callback failed: %s", t->req.method.c_str(), t->req.url.c_str(),
                      e.what());
            return 0;
        }
        return t->cancelled ? 0 : len;
    }
};

CurlTransport::CurlTransport(uv_loop_t *loop, TlsConfig tls) : loop_(loop), tls_(std::move(tls)) {
    if (!tls_.connect_to.empty()) connect_to_ = curl_slist_append(nullptr, tls_.connect_to.c_str());
}

CurlTransport::~CurlTransport() {
    for (auto &[id, t] : transfers_) {
        if (multi_) curl_multi_remove_handle(static_cast<CURLM *>(multi_), t->easy);
        curl_easy_cleanup(t->easy);
        curl_slist_free_all(t->headers);
    }
    transfers_.clear();
    if (multi_) curl_multi_cleanup(static_cast<CURLM *>(multi_));
    curl_slist_free_all(static_cast<curl_slist *>(connect_to_));
}

Status CurlTransport::start() {
    CURLM *m = curl_multi_init();
    if (!m) return fail(Error::Internal, "curl_multi_init failed");
    multi_ = m;
    curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, Impl::on_socket);
    curl_multi_setopt(m, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, Impl::on_timer);
    curl_multi_setopt(m, CURLMOPT_TIMERDATA, this);
    curl_multi_setopt(m, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    // No per-host cap: every virtual node holds a pod watch open for minutes.
    // Over HTTP/2 they share one connection (PIPEWAIT); over HTTP/1.1 (a
    // proxy, the test API server) each needs its own, and a cap of 8 queued
    // every other request (Lease renewals, the 9th registration) behind the
    // first 8 watches for good (bench/bench_steady.py found it).
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    // libcurl's own cap on the streams of one HTTP/2 connection (100) would
    // hide a server's higher SETTINGS_MAX_CONCURRENT_STREAMS: the server's
    // decides (kube-apiserver's --http2-max-streams-per-connection, 100 by
    // default since the HTTP/2 rapid-reset fixes).
    curl_multi_setopt(m, CURLMOPT_MAX_CONCURRENT_STREAMS, 1000L);
    timer_ = Timer(loop_);
    reaper_ = Timer(loop_);
    return {};
}

void CurlTransport::stop() {
    if (stopped_) return;
    stopped_ = true;
    for (auto &[id, t] : transfers_) {
        t->cancelled = true;
        t->done = nullptr;
        t->on_data = nullptr;
    }
    reap();
    timer_.close();
    reaper_.close();
    // Closing the multi handle makes curl call CURL_POLL_REMOVE for open sockets.
    if (multi_) curl_multi_cleanup(static_cast<CURLM *>(multi_));
    multi_ = nullptr;
}

uint64_t CurlTransport::request(HttpRequest req, HttpCallback done) {
    return add(std::move(req), nullptr, std::move(done));
}

uint64_t CurlTransport::stream(HttpRequest req, HttpDataCallback on_data, HttpCallback done) {
    return add(std::move(req), std::move(on_data), std::move(done));
}

uint64_t CurlTransport::add(HttpRequest req, HttpDataCallback on_data, HttpCallback done) {
    uint64_t id = next_id_++;
    auto t = std::make_unique<Transfer>();
    t->id = id;
    t->req = std::move(req);
    t->on_data = std::move(on_data);
    t->done = std::move(done);
    start_transfer(std::move(t));
    return id;
}

void CurlTransport::start_transfer(std::unique_ptr<Transfer> t) {
    uint64_t id = t->id;
    CURL *e = stopped_ ? nullptr : curl_easy_init();
    if (!e) {
        // Reported from the loop like any other failure (never inside the call).
        transfers_[id] = std::move(t);
        kick();
        return;
    }
    t->easy = e;
    const HttpRequest &r = t->req;
    curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, Impl::on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    if (r.timeout_ms) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout_ms));
    if (!tls_.ca_data.empty()) {
        curl_blob ca{const_cast<char *>(tls_.ca_data.data()), tls_.ca_data.size(), CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
    } else if (!tls_.ca_file.empty()) {
        curl_easy_setopt(e, CURLOPT_CAINFO, tls_.ca_file.c_str());
    }
    if (connect_to_)
        curl_easy_setopt(e, CURLOPT_CONNECT_TO, static_cast<curl_slist *>(connect_to_));
    if (!tls_.proxy_url.empty()) curl_easy_setopt(e, CURLOPT_PROXY, tls_.proxy_url.c_str());
    // The credential current now (agent/kube/api_auth.h), or the fixed one.
    Credential fixed;
    const Credential *c = &fixed;
    if (r.credential) {
        c = r.credential.get();
    } else if (auth_) {
        c = &auth_->current();
    } else {
        fixed.cert_file = tls_.client_cert;
        fixed.key_file = tls_.client_key;
        fixed.token = tls_.bearer_token;
    }
    t->generation = c->generation;
    if (!c->cert_pem.empty()) {
        curl_blob cert{const_cast<char *>(c->cert_pem.data()), c->cert_pem.size(), CURL_BLOB_COPY};
        curl_blob key{const_cast<char *>(c->key_pem.data()), c->key_pem.size(), CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
        curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
    } else if (!c->cert_file.empty()) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file.c_str());
        curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file.c_str());
    }
    curl_easy_setopt(e, CURLOPT_USERAGENT, "slurm-k8s-agent/" PACKAGE_VERSION);
    t->headers = curl_slist_append(t->headers, "Accept: application/json");
    if (!c->token.empty())
        t->headers = curl_slist_append(t->headers, ("Authorization: Bearer " + c->token).c_str());
    if (!r.content_type.empty())
        t->headers = curl_slist_append(t->headers, ("Content-Type: " + r.content_type).c_str());
    if (r.impersonate) {
        t->headers =
            curl_slist_append(t->headers, ("Impersonate-User: " + r.impersonate->user).c_str());
        for (const auto &g : r.impersonate->groups)
            t->headers = curl_slist_append(t->headers, ("Impersonate-Group: " + g).c_str());
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    if (r.method != "GET") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    if (!r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH") {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(r.body.size()));
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.c_str());
    }
    transfers_[id] = std::move(t);
    // curl refuses multi calls from inside its callbacks (CURLM_RECURSIVE_API_CALL),
    // and requests are often made from a watch's data callback: add from the loop.
    pending_add_.push_back(id);
    kick();
}

void CurlTransport::cancel(uint64_t id) {
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return;
    it->second->cancelled = true;
    it->second->done = nullptr;
    it->second->on_data = nullptr;
    // Removal may not happen inside curl's own callbacks: defer to the loop.
    kick();
}

void CurlTransport::on_poll(int s, int status, int events) {
    int flags = 0;
    if (status < 0) flags = CURL_CSELECT_ERR;
    if (events & Poll::kReadable) flags |= CURL_CSELECT_IN;
    if (events & Poll::kWritable) flags |= CURL_CSELECT_OUT;
    int running = 0;
    curl_multi_socket_action(static_cast<CURLM *>(multi_), s, flags, &running);
    check_messages();
}

void CurlTransport::kick() {
    if (reaper_ && !reaper_.active()) reaper_.start(0, [this] { service(); });
}

void CurlTransport::service() {
    reap();
    auto ids = std::move(pending_add_);
    pending_add_.clear();
    for (uint64_t id : ids) {
        auto it = transfers_.find(id);
        if (it == transfers_.end() || !it->second->easy || !multi_) continue;
        CURLMcode rc = curl_multi_add_handle(static_cast<CURLM *>(multi_), it->second->easy);
        if (rc != CURLM_OK) {
            LOG_ERROR("http: cannot start %s %s: %s", it->second->req.method.c_str(),
                      it->second->req.url.c_str(), curl_multi_strerror(rc));
            curl_easy_cleanup(it->second->easy);
            it->second->easy = nullptr;  // reported as a failure by the next reap
            kick();
        }
    }
}

void CurlTransport::reap() {
    std::vector<std::unique_ptr<Transfer>> dead;
    for (auto it = transfers_.begin(); it != transfers_.end();) {
        if (it->second->cancelled || !it->second->easy) {
            dead.push_back(std::move(it->second));
            it = transfers_.erase(it);
        } else {
            ++it;
        }
    }
    for (auto &t : dead) {
        if (multi_ && t->easy) curl_multi_remove_handle(static_cast<CURLM *>(multi_), t->easy);
        if (t->easy) curl_easy_cleanup(t->easy);
        curl_slist_free_all(t->headers);
        if (!t->easy && !t->cancelled && t->done)
            t->done(fail(Error::Transient,
                         t->req.method + " " + t->req.url + ": cannot start the request"));
    }
}

void CurlTransport::note_http_version(void *easy) {
    if (h2_cap_ <= 0 || h2_capped_) return;
    long version = 0;
    curl_easy_getinfo(static_cast<CURL *>(easy), CURLINFO_HTTP_VERSION, &version);
    if (version != CURL_HTTP_VERSION_2_0) return;
    // A server that multiplexes: from its first response on, a burst past a
    // connection's stream limit opens a few more connections, not one per
    // transfer (libcurl 7.88 did: 33 for 100 virtual nodes through an HTTP/2
    // front with kube-apiserver's 100 streams). Called outside libcurl's
    // callbacks only: there curl_multi_setopt fails (recursive API call).
    h2_capped_ = true;
    curl_multi_setopt(static_cast<CURLM *>(multi_), CURLMOPT_MAX_HOST_CONNECTIONS, h2_cap_);
}

void CurlTransport::check_messages() {
    if (!multi_) return;
    // Collect first: callbacks may add or cancel transfers.
    std::vector<std::pair<uint64_t, CURLcode>> finished;
    int left = 0;
    while (CURLMsg *msg = curl_multi_info_read(static_cast<CURLM *>(multi_), &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        Transfer *t = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char **>(&t));
        if (t) finished.push_back({t->id, msg->data.result});
    }
    for (auto [id, code] : finished) {
        auto it = transfers_.find(id);
        if (it == transfers_.end()) continue;
        std::unique_ptr<Transfer> t = std::move(it->second);
        transfers_.erase(it);
        curl_multi_remove_handle(static_cast<CURLM *>(multi_), t->easy);
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
        if (code == CURLE_OK) note_http_version(t->easy);
        HttpCallback done = std::move(t->done);
        std::string err = t->errbuf[0] ? t->errbuf : curl_easy_strerror(code);
        long status = t->status;
        curl_off_t retry_after = 0;
        if (curl_easy_getinfo(t->easy, CURLINFO_RETRY_AFTER, &retry_after) != CURLE_OK ||
            retry_after < 0)
            retry_after = 0;
        std::string body = std::move(t->body);
        curl_easy_cleanup(t->easy);
        t->easy = nullptr;
        curl_slist_free_all(t->headers);
        t->headers = nullptr;
        if (!done || t->cancelled) continue;
        const bool own = auth_ && !t->req.credential;  // carried the transport's credential
        if (own && code == CURLE_OK && status == 401) {
            // Sent once more when the credential changed since (a token
            // file rewritten, an exec plugin's new token): the request was
            // refused before anything happened, and a watch got no data.
            if (auth_->unauthorized(t->generation) && !t->retried) {
                auto again = std::make_unique<Transfer>();
                again->id = t->id;
                again->req = std::move(t->req);
                again->on_data = std::move(t->on_data);
                again->done = std::move(done);
                again->retried = true;
                start_transfer(std::move(again));
                continue;
            }
        } else if (own && code == CURLE_OK && status != 0) {
            auth_->accepted();
        }
        try {
            if (code != CURLE_OK && status != 0 && t->on_data) {
                done(fail(Error::Transient,
                          t->req.method + " " + t->req.url + ": stream ended: " + err));
            } else if (code != CURLE_OK) {
                done(fail(Error::Transient, t->req.method + " " + t->req.url + ": " + err));
            } else {
                // A date in Retry-After comes as seconds from now too (curl
                // converts it); a day at most.
                done(HttpResponse{status, std::move(body),
                                  static_cast<uint32_t>(std::min<curl_off_t>(retry_after, 86400))});
            }
        } catch (const std::exception &e) {
            LOG_ERROR("http: completion callback failed: %s", e.what());
        }
    }
}

}  // namespace sk::agent
