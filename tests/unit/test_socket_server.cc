// agent/socket_server.h on a real uv loop and a real unix socket: a slot
// held by a connection whose peer has gone is free for the next peer, even
// when the loop takes the new connection before it reads that EOF.
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <memory>
#include <string>

#include "agent/socket_server.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

namespace {

int connect_to(const std::string &path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un a = {};
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    ck_assert_int_eq(connect(fd, reinterpret_cast<struct sockaddr *>(&a), sizeof a), 0);
    return fd;
}

// Runs the loop until `done` or 2 s.
template <class F>
bool run_until(uv_loop_t *loop, F done) {
    for (int i = 0; i < 2000 && !done(); i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return done();
}

// Whether the server answered fd with a refusal (a reply line of id 0) by now
// (peeked: the reply stays for the next look).
bool refused(int fd) {
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT | MSG_PEEK);
    return n > 0 && std::string(buf, static_cast<size_t>(n)).find("too many connections") !=
                        std::string::npos;
}

}  // namespace

// Two slots per uid. Both peers connect and are accepted; a third connects,
// then the first two close, and only then does the loop run: it takes the
// listener's event (ready first) before the two EOFs. The two gone peers are
// let go at that moment and the third is admitted, not refused.
START_TEST(gone_peers_free_their_slots) {
    char dir[] = "/tmp/sk-sockserv-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    std::string path = std::string(dir) + "/agent.sock";
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    SocketLimits limits;
    limits.max_per_uid = 2;
    limits.max_connections = 2;
    {
        SocketServer server(
            &loop, path, 0600, limits, [](const PeerCred &) { return PeerStanding{}; },
            [](const std::shared_ptr<Connection> &, const proto::Request &) {});
        ck_assert(server.start().ok());
        int a = connect_to(path), b = connect_to(path);
        ck_assert(run_until(&loop, [&] { return server.connections() == 2; }));
        int c = connect_to(path);  // in the backlog: the listener is ready
        close(a);                  // then the two EOFs
        close(b);
        ck_assert(run_until(&loop, [&] { return server.connections() == 1; }));
        uv_run(&loop, UV_RUN_NOWAIT);
        ck_assert_msg(!refused(c), "the newcomer was refused while the gone peers held the slots");
        // Still two slots: a fourth gets in beside the third, a fifth is refused.
        int d = connect_to(path);
        ck_assert(run_until(&loop, [&] { return server.connections() == 2; }));
        int e = connect_to(path);
        ck_assert(run_until(&loop, [&] { return refused(e); }));
        ck_assert_uint_eq(server.connections(), 2);
        close(c);
        close(d);
        close(e);
        server.stop();
    }
    uv_run(&loop, UV_RUN_DEFAULT);  // the handles' close callbacks
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    rmdir(dir);
}
END_TEST

int main() {
    Suite *s = suite_create("socket_server");
    TCase *tc = tcase_create("admission");
    tcase_add_test(tc, gone_peers_free_their_slots);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
