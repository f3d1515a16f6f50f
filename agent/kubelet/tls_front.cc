#include "agent/kubelet/tls_front.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "common/log.h"

namespace sk {

// A byte queue of bounded size with a read offset: appends at the tail,
// consumes at the head, compacts when the tail reaches the end.
class RelayBuffer {
  public:
    explicit RelayBuffer(size_t cap) : cap_(cap) {}
    size_t size() const { return tail_ - head_; }
    bool empty() const { return head_ == tail_; }
    size_t room() const { return cap_ - size(); }
    const char *data() const { return buf_.data() + head_; }
    // Where up to room() bytes may be written; commit(n) then keeps n.
    char *reserve() {
        if (buf_.size() < cap_) buf_.resize(cap_);
        if (head_ > 0) {
            memmove(buf_.data(), buf_.data() + head_, size());
            tail_ -= head_;
            head_ = 0;
        }
        return buf_.data() + tail_;
    }
    void commit(size_t n) { tail_ += n; }
    void consume(size_t n) {
        head_ += n;
        if (head_ == tail_) head_ = tail_ = 0;
    }
    void clear() { head_ = tail_ = 0; }

  private:
    size_t cap_;
    std::vector<char> buf_;  // allocated at the first reserve()
    size_t head_ = 0, tail_ = 0;
};

struct TlsFront::Creds {
    gnutls_certificate_credentials_t cred = nullptr;
    ~Creds() {
        if (cred) gnutls_certificate_free_credentials(cred);
    }
};

struct TlsFront::Conn {
    explicit Conn(size_t cap) : to_app(cap), to_client(cap) {}
    ~Conn() {
        if (session) gnutls_deinit(session);
    }
    std::shared_ptr<Creds> creds;  // what the session uses: kept while it lives
    uint64_t id = 0;
    int tcp = -1;      // the client's socket (the front's)
    int app = -1;      // the front's end of the socket pair
    int handed = -1;   // the daemon's end (its number, for peer())
    std::string from;  // the client's address, for log lines
    gnutls_session_t session = nullptr;
    bool handshaken = false;
    RelayBuffer to_app;       // plaintext from the client, not yet written to app
    RelayBuffer to_client;    // plaintext from app, not yet sent as records
    size_t pending_send = 0;  // a record GnuTLS holds (EAGAIN): sent again first
    bool client_eof = false;  // the client's side ended (close_notify, FIN)
    bool app_eof = false;     // app's side ended (read 0)
    bool app_hup = false;     // app is closed entirely (POLLHUP): no longer polled
    bool tcp_gone = false;    // the client's socket failed or hung up both ways
    bool tcp_rdhup = false;   // the client's FIN arrived (perhaps not read yet)
    bool app_wr_shut = false;
    bool tcp_wr_shut = false;
    short tcp_events = 0, app_events = 0;  // what the last step waits for
};

namespace {

bool set_nonblock_cloexec(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return false;
    return fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
}

std::string addr_text(const sockaddr *a) {
    char buf[INET6_ADDRSTRLEN] = "?";
    if (a->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(a)->sin_addr, buf, sizeof buf);
    else if (a->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(a)->sin6_addr, buf, sizeof buf);
    return buf;
}

// "" when the client's certificate verified (and *peer has its subject CN
// and O values), else the reason; asked only when a client CA is configured.
std::string verify_client(gnutls_session_t session, TlsPeer *peer) {
    unsigned status = 0;
    int rc = gnutls_certificate_verify_peers2(session, &status);
    if (rc == GNUTLS_E_NO_CERTIFICATE_FOUND) return "no client certificate";
    if (rc != GNUTLS_E_SUCCESS) return std::string("verification failed: ") + gnutls_strerror(rc);
    if (status != 0) {
        gnutls_datum_t out{};
        std::string why = "client certificate not trusted";
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0) {
            why += std::string(": ") + reinterpret_cast<const char *>(out.data);
            gnutls_free(out.data);
        }
        return why;
    }
    unsigned n = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(session, &n);
    if (!certs || n == 0) return "no client certificate";
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) != 0) return "out of memory";
    if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) == 0) {
        char buf[256];
        size_t len = sizeof buf;
        if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, buf, &len) == 0)
            peer->cn.assign(buf, len);
        for (unsigned i = 0; i < 16; i++) {
            len = sizeof buf;
            if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, i, 0, buf,
                                              &len) != 0)
                break;
            peer->organizations.emplace_back(buf, len);
        }
    }
    gnutls_x509_crt_deinit(crt);
    return "";
}

bool again(ssize_t rc) {
    return rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED;
}

std::string waiting_text(const ServingCredentials::Pair &p) {
    return p.waiting.empty() ? std::string("none was given") : p.waiting;
}

// The largest plaintext GnuTLS puts in one record.
constexpr size_t kRecord = 16384;

}  // namespace

TlsFront::TlsFront(TlsFrontConfig config, int listen_fd, TlsHandOff hand_off)
    : config_(std::move(config)), listen_fd_(listen_fd), hand_off_(std::move(hand_off)) {}

TlsFront::~TlsFront() {
    stop();
}

ServingCredentials::ServingCredentials(std::string cert_pem, std::string key_pem) {
    set(std::move(cert_pem), std::move(key_pem));
}

void ServingCredentials::set(std::string cert_pem, std::string key_pem) {
    std::lock_guard<std::mutex> lock(mu_);
    pair_.cert_pem = std::move(cert_pem);
    pair_.key_pem = std::move(key_pem);
    pair_.waiting.clear();
    pair_.generation = ++generation_;
}

void ServingCredentials::set_waiting(std::string why) {
    std::lock_guard<std::mutex> lock(mu_);
    pair_.waiting = std::move(why);
}

ServingCredentials::Pair ServingCredentials::current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pair_;
}

Result<std::shared_ptr<TlsFront::Creds>> TlsFront::make_creds(
    const ServingCredentials::Pair &pair) const {
    auto creds = std::make_shared<Creds>();
    if (gnutls_certificate_allocate_credentials(&creds->cred) != GNUTLS_E_SUCCESS)
        return fail(Error::Internal, config_.name + ": cannot allocate TLS credentials");
    std::string cert_pem = pair.cert_pem, key_pem = pair.key_pem;
    gnutls_datum_t cert{reinterpret_cast<unsigned char *>(cert_pem.data()),
                        static_cast<unsigned>(cert_pem.size())};
    gnutls_datum_t key{reinterpret_cast<unsigned char *>(key_pem.data()),
                       static_cast<unsigned>(key_pem.size())};
    int rc = gnutls_certificate_set_x509_key_mem(creds->cred, &cert, &key, GNUTLS_X509_FMT_PEM);
    if (rc != GNUTLS_E_SUCCESS)
        return fail(Error::InvalidArgument,
                    config_.name +
                        ": the serving certificate and key are not usable: " + gnutls_strerror(rc));
    if (!config_.ca_pem.empty()) {
        std::string ca_pem = config_.ca_pem;
        gnutls_datum_t ca{reinterpret_cast<unsigned char *>(ca_pem.data()),
                          static_cast<unsigned>(ca_pem.size())};
        rc = gnutls_certificate_set_x509_trust_mem(creds->cred, &ca, GNUTLS_X509_FMT_PEM);
        if (rc <= 0)
            return fail(Error::InvalidArgument,
                        config_.name + ": the client CA holds no usable certificate" +
                            (rc < 0 ? std::string(": ") + gnutls_strerror(rc) : std::string()));
    }
    return creds;
}

std::shared_ptr<TlsFront::Creds> TlsFront::current_creds() {
    if (config_.serving->generation() == creds_generation_) return creds_;
    auto pair = config_.serving->current();
    creds_generation_ = pair.generation;
    auto creds = make_creds(pair);
    if (!creds) {
        // The controller checks a pair before it sets it: this is a bug or
        // an exhausted host. The pair before stays in use.
        LOG_ERROR("[%s] %s", config_.name.c_str(), creds.message().c_str());
        return creds_;
    }
    LOG_VERBOSE("[%s] serving certificate %llu in use", config_.name.c_str(),
                static_cast<unsigned long long>(pair.generation));
    creds_ = std::move(*creds);
    return creds_;
}

Status TlsFront::start() {
    if (running_) return fail(Error::Internal, config_.name + ": TLS front already started");
    if (!config_.serving) return fail(Error::Internal, config_.name + ": no serving credentials");
    auto pair = config_.serving->current();
    std::shared_ptr<Creds> creds;
    if (pair.generation) {
        auto c = make_creds(pair);
        if (!c) return c.failure();
        creds = std::move(*c);
    } else if (!config_.ca_pem.empty()) {
        // No pair yet: the client CA is still checked now, not at the first pair.
        gnutls_certificate_credentials_t probe = nullptr;
        if (gnutls_certificate_allocate_credentials(&probe) != GNUTLS_E_SUCCESS)
            return fail(Error::Internal, config_.name + ": cannot allocate TLS credentials");
        std::string ca_pem = config_.ca_pem;
        gnutls_datum_t ca{reinterpret_cast<unsigned char *>(ca_pem.data()),
                          static_cast<unsigned>(ca_pem.size())};
        int rc = gnutls_certificate_set_x509_trust_mem(probe, &ca, GNUTLS_X509_FMT_PEM);
        gnutls_certificate_free_credentials(probe);
        if (rc <= 0)
            return fail(Error::InvalidArgument,
                        config_.name + ": the client CA holds no usable certificate" +
                            (rc < 0 ? std::string(": ") + gnutls_strerror(rc) : std::string()));
    }
    if (pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0)
        return fail(Error::Io, config_.name + ": pipe: " + strerror(errno));
    creds_ = std::move(creds);
    creds_generation_ = pair.generation;
    running_ = true;
    thread_ = std::thread([this] { run(); });
    return {};
}

void TlsFront::stop() {
    if (!running_.exchange(false)) return;
    ssize_t w = write(wake_[1], "x", 1);
    (void)w;  // the pipe is empty but for this: it cannot be full
    thread_.join();
    for (auto &[id, c] : conns_)
        close_conn(*c);
    conns_.clear();
    close(wake_[0]);
    close(wake_[1]);
    wake_[0] = wake_[1] = -1;
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    creds_.reset();
}

std::optional<TlsPeer> TlsFront::peer(int fd) const {
    std::lock_guard<std::mutex> lock(peers_mu_);
    auto it = peers_.find(fd);
    if (it == peers_.end()) return std::nullopt;
    return it->second.peer;
}

void TlsFront::close_conn(Conn &c) {
    if (c.handshaken) {
        std::lock_guard<std::mutex> lock(peers_mu_);
        auto it = peers_.find(c.handed);
        if (it != peers_.end() && it->second.owner == c.id) peers_.erase(it);
    }
    if (c.tcp >= 0) close(c.tcp);
    if (c.app >= 0) close(c.app);
    c.tcp = c.app = -1;
    open_--;
}

void TlsFront::accept_all() {
    for (;;) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        int fd = accept4(listen_fd_, reinterpret_cast<sockaddr *>(&ss), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                // EMFILE and the like: the client waits in the backlog; the
                // next round tries again.
                LOG_WARN("[%s] accept: %s", config_.name.c_str(), strerror(errno));
            return;
        }
        std::shared_ptr<Creds> creds = current_creds();
        if (!creds) {
            // No serving certificate yet (a CSR not yet approved): the
            // client sees the connection closed, as a kubelet without one
            // fails its handshakes.
            timespec now{};
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - refusal_logged_ >= 10 || refusal_logged_ == 0) {
                refusal_logged_ = now.tv_sec;
                LOG_WARN("[%s] closed a connection from %s: no serving certificate yet (%s)",
                         config_.name.c_str(), addr_text(reinterpret_cast<sockaddr *>(&ss)).c_str(),
                         waiting_text(config_.serving->current()).c_str());
            }
            close(fd);
            continue;
        }
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
            LOG_WARN("[%s] socketpair: %s; dropping a client", config_.name.c_str(),
                     strerror(errno));
            close(fd);
            continue;
        }
        auto c = std::make_unique<Conn>(std::max<size_t>(config_.relay_buffer, kRecord));
        c->id = next_id_++;
        c->tcp = fd;
        c->app = sv[0];
        c->handed = sv[1];
        c->from = addr_text(reinterpret_cast<sockaddr *>(&ss));
        int rc = gnutls_init(&c->session, GNUTLS_SERVER | GNUTLS_NONBLOCK);
        if (rc == GNUTLS_E_SUCCESS) rc = gnutls_set_default_priority(c->session);
        if (rc == GNUTLS_E_SUCCESS)
            rc = gnutls_credentials_set(c->session, GNUTLS_CRD_CERTIFICATE, creds->cred);
        c->creds = std::move(creds);
        if (rc != GNUTLS_E_SUCCESS) {
            LOG_WARN("[%s] TLS session: %s; dropping a client", config_.name.c_str(),
                     gnutls_strerror(rc));
            close(fd);
            close(sv[0]);
            close(sv[1]);
            continue;
        }
        // Asked, not required: a client without one gets the kubelet's
        // 401 from the server, not a failed handshake (agent/kubelet/http_server.h).
        if (!config_.ca_pem.empty())
            gnutls_certificate_server_set_request(c->session, GNUTLS_CERT_REQUEST);
        gnutls_transport_set_int(c->session, fd);
        open_++;
        // The daemon owns sv[1] from here, also when it refuses it.
        if (!hand_off_(sv[1], reinterpret_cast<sockaddr *>(&ss), len)) {
            LOG_VERBOSE("[%s] the server refused a connection from %s (connection limits)",
                        config_.name.c_str(), c->from.c_str());
            c->handed = -1;
            close_conn(*c);
            continue;
        }
        if (step(*c))
            conns_.emplace(c->id, std::move(c));
        else
            close_conn(*c);
    }
}

bool TlsFront::step(Conn &c) {
    c.tcp_events = c.app_events = 0;
    if (!c.handshaken) {
        // The server closed its end (its handshake timeout, its limits, a
        // stop) before the client finished: nothing to wait for.
        if (c.app_hup) return false;
        int rc = gnutls_handshake(c.session);
        if (again(rc)) {
            c.tcp_events = gnutls_record_get_direction(c.session) ? POLLOUT : POLLIN;
            return true;
        }
        if (rc != GNUTLS_E_SUCCESS) {
            if (!gnutls_error_is_fatal(rc)) {  // a warning alert: go on
                c.tcp_events = POLLIN;
                return true;
            }
            LOG_VERBOSE("[%s] TLS handshake with %s failed: %s", config_.name.c_str(),
                        c.from.c_str(), gnutls_strerror(rc));
            return false;
        }
        TlsPeer p;
        if (!config_.ca_pem.empty()) p.refused = verify_client(c.session, &p);
        {
            std::lock_guard<std::mutex> lock(peers_mu_);
            peers_[c.handed] = PeerEntry{c.id, std::move(p)};
        }
        c.handshaken = true;
    }

    bool tcp_read_wait = false, tcp_write_wait = false;
    bool app_read_wait = false, app_write_wait = false;
    bool tcp_dir_write = false;  // a blocked record read waits for the socket to be writable
    for (bool progress = true; progress;) {
        progress = false;
        tcp_read_wait = tcp_write_wait = app_read_wait = app_write_wait = false;

        // client -> app
        if (!c.client_eof && c.to_app.room() > 0) {
            char *dst = c.to_app.reserve();
            ssize_t n = gnutls_record_recv(c.session, dst, c.to_app.room());
            if (n > 0) {
                c.to_app.commit(static_cast<size_t>(n));
                progress = true;
            } else if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
                c.client_eof = true;  // close_notify, or a FIN without one
                progress = true;
            } else if (again(n)) {
                tcp_read_wait = true;
                tcp_dir_write = gnutls_record_get_direction(c.session) == 1;
            } else if (n == GNUTLS_E_REHANDSHAKE || !gnutls_error_is_fatal(static_cast<int>(n))) {
                // A renegotiation request or a warning alert: not served, not fatal.
                progress = true;
            } else {
                LOG_VERBOSE("[%s] TLS from %s: %s", config_.name.c_str(), c.from.c_str(),
                            gnutls_strerror(static_cast<int>(n)));
                return false;
            }
        }
        if (!c.to_app.empty()) {
            ssize_t w = send(c.app, c.to_app.data(), c.to_app.size(), MSG_NOSIGNAL);
            if (w > 0) {
                c.to_app.consume(static_cast<size_t>(w));
                progress = true;
            } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                app_write_wait = true;
            } else if (w < 0 && errno == EINTR) {
                progress = true;
            } else {
                // The server no longer reads (it closed): what the client
                // sends now has nowhere to go.
                c.to_app.clear();
                c.client_eof = true;
                progress = true;
            }
        }
        // The client ended and the server does not take what is left: drop
        // it, so that the server sees the end (tls_front.h). With the buffer
        // full the FIN is not even read: POLLRDHUP tells.
        bool app_stuck = app_write_wait || c.to_app.room() == 0;
        if (!c.client_eof && c.tcp_rdhup && c.to_app.room() == 0) c.client_eof = true;
        if (c.client_eof && !c.to_app.empty() && app_stuck) {
            LOG_VERBOSE("[%s] %s closed; %zu bytes the server did not read are dropped",
                        config_.name.c_str(), c.from.c_str(), c.to_app.size());
            c.to_app.clear();
        }
        if (c.client_eof && c.to_app.empty() && !c.app_wr_shut) {
            shutdown(c.app, SHUT_WR);
            c.app_wr_shut = true;
        }

        // app -> client
        if (!c.app_eof && c.pending_send == 0 && c.to_client.room() > 0) {
            char *dst = c.to_client.reserve();
            ssize_t n = recv(c.app, dst, c.to_client.room(), 0);
            if (n > 0) {
                c.to_client.commit(static_cast<size_t>(n));
                progress = true;
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                app_read_wait = true;
            } else {
                // 0: the server's end; EINTR: again; another error: the
                // server's end too.
                if (n == 0 || errno != EINTR) c.app_eof = true;
                progress = true;
            }
        }
        if (!c.to_client.empty()) {
            // After EAGAIN GnuTLS holds the record: the same call sends it.
            size_t len = c.pending_send ? c.pending_send : std::min(c.to_client.size(), kRecord);
            ssize_t n = gnutls_record_send(c.session, c.to_client.data(), len);
            if (n > 0) {
                c.to_client.consume(static_cast<size_t>(n));
                c.pending_send = 0;
                progress = true;
            } else if (again(n)) {
                c.pending_send = len;
                tcp_write_wait = true;
            } else {
                LOG_VERBOSE("[%s] TLS to %s: %s", config_.name.c_str(), c.from.c_str(),
                            gnutls_strerror(static_cast<int>(n)));
                return false;
            }
        }
        if (c.app_eof && c.to_client.empty() && !c.tcp_wr_shut) {
            // close_notify without waiting for the client's (SHUT_WR), then FIN.
            int rc = gnutls_bye(c.session, GNUTLS_SHUT_WR);
            if (again(rc)) {
                tcp_write_wait = true;
            } else {
                shutdown(c.tcp, SHUT_WR);
                c.tcp_wr_shut = true;
                progress = true;
            }
        }
    }

    // Over when both ways ended, or when the server is gone and everything
    // it sent went out (the client has no one left to talk to).
    if (c.tcp_wr_shut && c.client_eof && c.to_app.empty()) return false;
    if (c.tcp_wr_shut && c.app_hup) return false;

    if (tcp_read_wait) c.tcp_events |= tcp_dir_write ? POLLOUT : POLLIN;
    if (!c.client_eof && !c.tcp_rdhup) c.tcp_events |= POLLRDHUP;
    if (tcp_write_wait) c.tcp_events |= POLLOUT;
    if (app_read_wait) c.app_events |= POLLIN;
    if (app_write_wait) c.app_events |= POLLOUT;
    return true;
}

void TlsFront::run() {
    // Named for ps -L, top -H and perf: the kubelet endpoint's TLS.
    (void)pthread_setname_np(pthread_self(), "sk-tls");
    std::vector<pollfd> fds;
    std::vector<Conn *> owner;  // per pollfd from index 2: its connection
    while (running_) {
        fds.clear();
        owner.clear();
        fds.push_back({wake_[0], POLLIN, 0});
        fds.push_back({listen_fd_, POLLIN, 0});
        for (auto &[id, c] : conns_) {
            fds.push_back({c->tcp, c->tcp_events, 0});
            owner.push_back(c.get());
            // A socket pair end that hung up reports POLLHUP whatever is
            // asked: it is not polled again (its data is still read in step).
            fds.push_back({c->app_hup ? -1 : c->app, c->app_events, 0});
            owner.push_back(c.get());
        }
        int n = poll(fds.data(), fds.size(), -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            LOG_ERROR("[%s] TLS front: poll: %s", config_.name.c_str(), strerror(errno));
            return;
        }
        if (fds[0].revents) return;  // stop()
        std::vector<Conn *> ready;
        for (size_t i = 2; i < fds.size(); i++) {
            if (!fds[i].revents) continue;
            Conn *c = owner[i - 2];
            if (fds[i].fd == c->app && (fds[i].revents & (POLLHUP | POLLERR))) c->app_hup = true;
            // Nothing more can reach the client, and POLLHUP would be
            // reported on every round.
            if (fds[i].fd == c->tcp && (fds[i].revents & (POLLHUP | POLLERR))) c->tcp_gone = true;
            if (fds[i].fd == c->tcp && (fds[i].revents & POLLRDHUP)) c->tcp_rdhup = true;
            if (ready.empty() || ready.back() != c) ready.push_back(c);
        }
        for (Conn *c : ready) {
            if (c->tcp_gone || !step(*c)) {
                uint64_t id = c->id;
                close_conn(*c);
                conns_.erase(id);
            }
        }
        if (fds[1].revents) accept_all();
    }
}

Result<int> tcp_listen(const std::string &address, uint16_t port, uint16_t *bound_port) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    int family = AF_INET6;
    if (address.empty()) {
        auto *v6 = reinterpret_cast<sockaddr_in6 *>(&ss);
        v6->sin6_family = AF_INET6;
        v6->sin6_addr = in6addr_any;
        v6->sin6_port = htons(port);
        len = sizeof *v6;
    } else {
        auto *v4 = reinterpret_cast<sockaddr_in *>(&ss);
        auto *v6 = reinterpret_cast<sockaddr_in6 *>(&ss);
        if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
            family = AF_INET;
            v4->sin_family = AF_INET;
            v4->sin_port = htons(port);
            len = sizeof *v4;
        } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons(port);
            len = sizeof *v6;
        } else {
            return fail(Error::InvalidArgument,
                        "bind address '" + address + "' is not an IP address");
        }
    }
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0) return fail(Error::Io, std::string("socket: ") + strerror(errno));
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // "" listens on IPv4 too (dual stack), as libmicrohttpd's
    // MHD_USE_DUAL_STACK does.
    if (address.empty()) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (bind(fd, reinterpret_cast<sockaddr *>(&ss), len) != 0 || listen(fd, 128) != 0 ||
        !set_nonblock_cloexec(fd)) {
        int err = errno;
        close(fd);
        return fail(Error::Io, std::string(strerror(err)));
    }
    sockaddr_storage got{};
    socklen_t glen = sizeof got;
    getsockname(fd, reinterpret_cast<sockaddr *>(&got), &glen);
    if (bound_port)
        *bound_port =
            ntohs(got.ss_family == AF_INET ? reinterpret_cast<sockaddr_in *>(&got)->sin_port
                                           : reinterpret_cast<sockaddr_in6 *>(&got)->sin6_port);
    return fd;
}

}  // namespace sk
