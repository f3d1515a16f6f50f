// AgentClient against a real unix socket served by a thread of this test:
// ok and error replies, an absent agent, a silent agent (the bound holds), a
// closed connection, a reply to the wrong request, a refusal of the
// connection (an error reply of id 0, common/daemons/protocol.h), read or not.
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "common/daemons/agent_client.h"
#include "tests/unit/check_main.h"

using namespace sk;

enum class Mode { Ok, Error, Silent, Close, WrongId, Refuse, RefuseUnread };

struct Server {
    std::string path;
    int fd = -1;
    std::thread th;
    std::string got;  // the request line received
};

static void serve(Server *s, Mode mode) {
    int c = accept(s->fd, nullptr, nullptr);
    if (c < 0) return;
    static const std::string kRefusal =
        "{\"id\":0,\"ok\":false,\"error\":\"unavailable\",\"message\":\"too many "
        "connections from uid 65534 (max_connections_per_uid=16)\"}\n";
    if (mode == Mode::RefuseUnread) {  // as the agent does at accept: answer, close, never read
        (void)!write(c, kRefusal.data(), kRefusal.size());
        close(c);
        return;
    }
    char buf[4096];
    ssize_t n = read(c, buf, sizeof buf);
    if (n > 0) s->got.assign(buf, static_cast<size_t>(n));
    std::string reply;
    switch (mode) {
        case Mode::Ok:
            reply = "{\"id\":1,\"ok\":true,\"body\":{\"node_name\":\"slurm-n1-7\"}}\n";
            break;
        case Mode::Error:
            reply = "{\"id\":1,\"ok\":false,\"error\":\"forbidden\",\"message\":\"peer uid 5\"}\n";
            break;
        case Mode::WrongId:
            reply = "{\"id\":9,\"ok\":true,\"body\":{}}\n";
            break;
        case Mode::Silent:
            sleep(1);  // usleep() takes < 1 s (POSIX): 1.5 s as 1 s + 500 ms
            usleep(500 * 1000);
            break;
        case Mode::Refuse:
            reply = kRefusal;
            break;
        case Mode::Close:
        case Mode::RefuseUnread:
            break;
    }
    if (!reply.empty()) (void)!write(c, reply.data(), reply.size());
    close(c);
}

static void start(Server *s, Mode mode) {
    s->path = sk_test_tmpdir("/tmp/sk-agentc-XXXXXX") + "/a.sock";
    s->fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    ck_assert_uint_lt(s->path.size(), sizeof sa.sun_path);
    memcpy(sa.sun_path, s->path.c_str(), s->path.size() + 1);
    ck_assert_int_eq(bind(s->fd, reinterpret_cast<struct sockaddr *>(&sa), sizeof sa), 0);
    ck_assert_int_eq(listen(s->fd, 4), 0);
    s->th = std::thread(serve, s, mode);
}

static double elapsed(struct timespec a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
}

struct Case {
    Mode mode;
    bool ok;
    Error err;
    const char *in_message;
};
static const Case kCases[] = {
    {Mode::Ok, true, Error::Internal, ""},
    {Mode::Error, false, Error::Forbidden, "peer uid 5"},
    {Mode::Silent, false, Error::Timeout, "timeout"},
    {Mode::Close, false, Error::Unavailable, "closed"},
    {Mode::WrongId, false, Error::Parse, "expected 1"},
    {Mode::Refuse, false, Error::Unavailable, "agent: too many connections from uid 65534"},
    {Mode::RefuseUnread, false, Error::Unavailable, "agent: too many connections from uid 65534"},
};
START_TEST(client_table) {
    const auto &c = kCases[_i];
    Server s;
    start(&s, c.mode);
    AgentClient client(s.path, 300);
    Json::Value body(Json::objectValue);
    body["job_id"] = 7;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    auto r = client.call("register", body);
    double took = elapsed(t0);
    s.th.join();
    close(s.fd);
    ck_assert_msg(r.ok() == c.ok, "case %d: %s", _i, r.ok() ? "ok" : r.message().c_str());
    ck_assert_msg(took < 1.0, "the 300 ms bound held (took %.2f s)", took);
    if (c.mode != Mode::RefuseUnread)
        ck_assert_msg(s.got.find("\"op\":\"register\"") != std::string::npos, "sent: %s",
                      s.got.c_str());
    if (c.ok) {
        ck_assert_sstr_eq((*r)["node_name"].asString(), "slurm-n1-7");
    } else {
        ck_assert_sstr_eq(std::string(to_string(r.error())), std::string(to_string(c.err)));
        ck_assert_msg(r.message().find(c.in_message) != std::string::npos, "'%s'",
                      r.message().c_str());
    }
}
END_TEST

START_TEST(absent_agent) {
    AgentClient client("/tmp/sk-no-such-dir/agent.sock", 300);
    auto r = client.call("status", Json::Value(Json::objectValue));
    ck_assert(!r.ok());
    ck_assert(r.error() == Error::Unavailable);
    ck_assert(r.message().find("slurm-k8s-agent running") != std::string::npos);
}
END_TEST

int main() {
    Suite *s = suite_create("agent_client");
    TCase *tc = tcase_create("client");
    tcase_set_timeout(tc, 10);
    tcase_add_loop_test(tc, client_table, 0, TABLE_SIZE(kCases));
    tcase_add_test(tc, absent_agent);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
