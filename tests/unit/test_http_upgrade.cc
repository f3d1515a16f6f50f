// agent/kubelet/http_server.h: a 101 response hands the connection to its upgrade
// callback (HttpUpgrade): the bytes after the request, both directions, the
// holder's close(), and a server stop with an upgraded connection open.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <errno.h>
#include <stdio.h>

#include <gnutls/gnutls.h>
#include <stdlib.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/kubelet/http_server.h"
#include "tests/unit/check_main.h"

using namespace sk;

namespace {

int connect_to(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    return fd;
}

// Reads until `want` is in what came, or EOF, or 10 s; returns all of it.
std::string read_until(int fd, const std::string &want) {
    std::string got;
    char buf[4096];
    for (int i = 0; i < 1000 && got.find(want) == std::string::npos; i++) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 10) <= 0) continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
    }
    return got;
}

// Reads until EOF (true) or 10 s (false).
bool reads_eof(int fd) {
    char buf[4096];
    for (int i = 0; i < 1000; i++) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 10) <= 0) continue;
        if (read(fd, buf, sizeof buf) <= 0) return true;
    }
    return false;
}

// The handed fd is non-blocking: a write may take part of the bytes.
void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            pollfd pf{fd, POLLOUT, 0};
            (void)poll(&pf, 1, 1000);
            continue;
        }
        if (w <= 0) return;
        p += w;
        n -= static_cast<size_t>(w);
    }
}

// The holder: echoes what it reads (early bytes first) until the client's
// EOF, then closes; or, with hold, keeps the connection until told.
struct Echo {
    std::vector<std::thread> threads;
    std::atomic<bool> hold{false};
    std::atomic<bool> saw_eof{false};  // a holder read the client's EOF
    std::function<void()> held_close;
    std::atomic<int> held_fd{-1};
    std::mutex mu;

    void take(const HttpUpgrade &u) {
        if (hold) {
            std::lock_guard<std::mutex> lock(mu);
            held_close = u.close;
            held_fd = u.fd;
            return;
        }
        threads.emplace_back([this, u] {
            std::string out = "early[" + u.early + "]";
            write_all(u.fd, out.data(), out.size());
            char buf[4096];
            for (;;) {
                pollfd p{u.fd, POLLIN, 0};
                if (poll(&p, 1, 10000) <= 0) break;
                ssize_t n = read(u.fd, buf, sizeof buf);
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                if (n == 0) saw_eof = true;
                if (n <= 0) break;
                write_all(u.fd, buf, static_cast<size_t>(n));
            }
            u.close();
        });
    }
    ~Echo() {
        for (auto &t : threads)
            t.join();
    }
};

HttpServerConfig plain() {
    HttpServerConfig c;
    c.bind_address = "127.0.0.1";
    c.port = 0;
    return c;
}

// A directory with a self-signed serving certificate (cert.pem, key.pem).
std::string self_signed_dir() {
    char dir[] = "/tmp/sk-upgrade-XXXXXX";
    ck_assert(mkdtemp(dir) != nullptr);
    std::string d = dir;
    std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-subj /CN=test -days 1 -keyout " +
        d + "/key.pem -out " + d + "/cert.pem >/dev/null 2>&1";
    // NOLINTNEXTLINE(cert-env33-c): a fixed command line on the test's own files
    ck_assert_int_eq(system(cmd.c_str()), 0);
    return d;
}

HttpServerConfig tls_config(const std::string &d) {
    HttpServerConfig c = plain();
    c.tls = true;
    c.cert_file = d + "/cert.pem";
    c.key_file = d + "/key.pem";
    return c;
}

const char kUpgrade[] =
    "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test-echo\r\n"
    "X-Offer: a\r\nX-Offer: b\r\n\r\n";

}  // namespace

START_TEST(upgrade_relays_both_ways) {
    Echo echo;
    std::vector<std::pair<std::string, std::string>> seen_headers, seen_query;
    HttpServer srv(plain(), [&](const HttpRequest &req) {
        if (req.path != "/echo") return http_text(404, "no\n");
        seen_headers = req.headers;
        seen_query = req.query_all;
        HttpResponse r;
        r.status = 101;
        r.headers = {{"Upgrade", "test-echo"}};  // MHD adds Connection: Upgrade
        r.upgrade = [&](const HttpUpgrade &u) { echo.take(u); };
        return r;
    });
    ck_assert(srv.start().ok());
    int fd = connect_to(srv.port());
    // The request, then bytes right behind it in the same write: they come
    // back as the holder's "early" bytes.
    std::string req = std::string(kUpgrade).replace(4, 5, "/echo?command=a&command=b");
    req += "hello";
    ck_assert(write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size()));
    std::string got = read_until(fd, "]");  // the 101, then the holder's first bytes
    ck_assert_msg(got.rfind("HTTP/1.1 101", 0) == 0, "%s", got.c_str());
    ck_assert_msg(got.find("early[hello]") != std::string::npos, "%s", got.c_str());
    std::string more = "ping-pong";
    ck_assert(write(fd, more.data(), more.size()) == static_cast<ssize_t>(more.size()));
    std::string echoed = read_until(fd, "ping-pong");
    ck_assert_msg(echoed.find("ping-pong") != std::string::npos, "got '%s' after '%s'",
                  echoed.c_str(), got.c_str());
    // Repeated headers and query arguments are all kept, in order.
    int offers = 0;
    for (const auto &[k, v] : seen_headers)
        offers += k == "X-Offer";
    ck_assert_int_eq(offers, 2);
    ck_assert_uint_eq(seen_query.size(), 2);
    ck_assert_sstr_eq(seen_query[0].second, "a");
    ck_assert_sstr_eq(seen_query[1].second, "b");
    // The client's EOF ends the holder, whose close() ends the connection.
    shutdown(fd, SHUT_WR);
    ck_assert(reads_eof(fd));
    close(fd);
    srv.stop();
}
END_TEST

// A stop with an upgraded connection still held: the connection is closed,
// stop() returns, and the holder's late close() does nothing more.
START_TEST(stop_closes_held_upgrades) {
    Echo echo;
    echo.hold = true;
    HttpServer srv(plain(), [&](const HttpRequest &) {
        HttpResponse r;
        r.status = 101;
        r.headers = {{"Upgrade", "test-echo"}};  // MHD adds Connection: Upgrade
        r.upgrade = [&](const HttpUpgrade &u) { echo.take(u); };
        return r;
    });
    ck_assert(srv.start().ok());
    int fd = connect_to(srv.port());
    ck_assert(write(fd, kUpgrade, sizeof kUpgrade - 1) ==
              static_cast<ssize_t>(sizeof kUpgrade - 1));
    ck_assert(read_until(fd, "\r\n\r\n").rfind("HTTP/1.1 101", 0) == 0);
    for (int i = 0; i < 1000; i++) {
        std::lock_guard<std::mutex> lock(echo.mu);
        if (echo.held_close) break;
        usleep(10000);
    }
    srv.stop();
    ck_assert(reads_eof(fd));
    close(fd);
    std::lock_guard<std::mutex> lock(echo.mu);
    ck_assert(static_cast<bool>(echo.held_close));
    echo.held_close();  // after the stop: nothing happens
}
END_TEST

// A TLS client over fd (no verification: the test's own self-signed server).
struct TlsClient {
    gnutls_session_t s{};
    gnutls_certificate_credentials_t cred{};
    explicit TlsClient(int fd) {
        gnutls_certificate_allocate_credentials(&cred);
        gnutls_init(&s, GNUTLS_CLIENT);
        gnutls_set_default_priority(s);
        gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
        gnutls_transport_set_int(s, fd);
        gnutls_handshake_set_timeout(s, 10000);
        int rc;
        do
            rc = gnutls_handshake(s);
        while (rc < 0 && gnutls_error_is_fatal(rc) == 0);
        ck_assert_msg(rc == 0, "handshake: %s", gnutls_strerror(rc));
    }
    ~TlsClient() {
        gnutls_deinit(s);
        gnutls_certificate_free_credentials(cred);
    }
    void send(const std::string &b) {
        for (size_t off = 0; off < b.size();) {  // a record at a time
            ssize_t n = gnutls_record_send(s, b.data() + off, b.size() - off);
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) continue;
            ck_assert_msg(n > 0, "send: %s", gnutls_strerror(static_cast<int>(n)));
            off += static_cast<size_t>(n);
        }
    }
    std::string read_until(const std::string &want) {
        std::string got;
        char buf[4096];
        while (got.find(want) == std::string::npos) {
            ssize_t n = gnutls_record_recv(s, buf, sizeof buf);
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) continue;
            if (n <= 0) break;
            got.append(buf, static_cast<size_t>(n));
        }
        return got;
    }
};

// Over TLS (the kubelet endpoint's mode) the holder gets one end of a socket
// pair that the server's thread relays: the same contract.
START_TEST(upgrade_over_tls) {
    std::string d = self_signed_dir();
    Echo echo;
    HttpServerConfig c = tls_config(d);
    HttpServer srv(c, [&](const HttpRequest &) {
        HttpResponse r;
        r.status = 101;
        r.headers = {{"Upgrade", "test-echo"}};
        r.upgrade = [&](const HttpUpgrade &u) { echo.take(u); };
        return r;
    });
    ck_assert(srv.start().ok());
    int fd = connect_to(srv.port());
    {
        TlsClient t(fd);
        t.send(std::string(kUpgrade) + "hello");
        std::string got = t.read_until("]");
        ck_assert_msg(got.rfind("HTTP/1.1 101", 0) == 0, "%s", got.c_str());
        ck_assert_msg(got.find("early[hello]") != std::string::npos ||
                          got.find("early[]") != std::string::npos,
                      "%s", got.c_str());
        std::string big(200000, 'z');
        t.send(big);
        // All of it comes back, through both relays (the server's TLS one and the echo).
        std::string back;
        while (back.size() < big.size()) {
            std::string more = t.read_until("z");
            if (more.empty()) break;
            back += more;
        }
        ck_assert_uint_eq(back.size(), big.size());
        ck_assert(back == big);
    }
    ck_assert(!echo.saw_eof);
    close(fd);
    // The client's close reads as EOF on the holder's fd (the TLS front
    // passes it on), so the holder ends without a timer of its own.
    for (int i = 0; i < 500 && !echo.saw_eof; i++)
        usleep(10000);
    ck_assert_msg(echo.saw_eof, "the client's close did not reach the holder");
    srv.stop();
    // NOLINTNEXTLINE(cert-env33-c): a fixed command line on the test's own files
    ck_assert_int_eq(system(("rm -rf " + d).c_str()), 0);
}
END_TEST

// A holder that stopped reading (a paused relay) while the client sends
// more than every buffer holds, then dies (an abortive close, as a killed
// client with data in flight): the holder still sees the client's end on
// its fd (what it did not read is dropped), so a session never waits for
// ever behind bytes nobody will answer. (A FIN stuck behind data the
// server's TCP window does not take never arrives: no server can see it.)
START_TEST(tls_client_gone_while_holder_does_not_read) {
    std::string d = self_signed_dir();
    Echo echo;
    echo.hold = true;
    HttpServerConfig c = tls_config(d);
    HttpServer srv(c, [&](const HttpRequest &) {
        HttpResponse r;
        r.status = 101;
        r.headers = {{"Upgrade", "test-echo"}};
        r.upgrade = [&](const HttpUpgrade &u) { echo.take(u); };
        return r;
    });
    ck_assert(srv.start().ok());
    int fd = connect_to(srv.port());
    {
        TlsClient t(fd);
        t.send(kUpgrade);
        ck_assert(t.read_until("\r\n\r\n").rfind("HTTP/1.1 101", 0) == 0);
        for (int i = 0; i < 1000 && echo.held_fd < 0; i++)
            usleep(10000);
        ck_assert_int_ge(echo.held_fd, 0);
        // Send until every buffer on the way is full (the holder reads
        // nothing): a send that waited 1 s ends it.
        timeval tv{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        std::string chunk(16384, 'q');
        size_t sent = 0;
        for (int i = 0; i < 4096; i++) {
            ssize_t n = gnutls_record_send(t.s, chunk.data(), chunk.size());
            if (n <= 0) break;
            sent += static_cast<size_t>(n);
        }
        ck_assert_uint_gt(sent, size_t{64} * 1024);  // more than the front buffers
        ck_assert(!HttpServer::peer_closed(echo.held_fd, 0));
    }
    linger abort{1, 0};  // close() sends RST, as a killed process's socket may
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    close(fd);
    ck_assert_msg(HttpServer::peer_closed(echo.held_fd, 10000),
                  "the holder does not see the client's end while it does not read");
    {
        std::lock_guard<std::mutex> lock(echo.mu);
        echo.held_close();
    }
    srv.stop();
    // NOLINTNEXTLINE(cert-env33-c): a fixed command line on the test's own files
    ck_assert_int_eq(system(("rm -rf " + d).c_str()), 0);
}
END_TEST

int main() {
    Suite *s = suite_create("http_upgrade");
    TCase *tc = tcase_create("upgrade");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, upgrade_relays_both_ways);
    tcase_add_test(tc, stop_closes_held_upgrades);
    tcase_add_test(tc, upgrade_over_tls);
    tcase_add_test(tc, tls_client_gone_while_holder_does_not_read);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
