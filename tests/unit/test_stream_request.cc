// agent/kubelet/stream_request.h: the kubelet's /exec, /attach and /portForward
// requests as a 1.28 API server relays kubectl 1.28 (SPDY) and 1.32
// (WebSocket) to the node (the request lines and headers recorded in
// tests/kube/kubectl_streams.sh), and the kubelet's refusals.
#include <string>

#include "agent/kubelet/stream_request.h"
#include "tests/unit/check_main.h"

using namespace sk;

namespace {

const Pairs kSpdy128 = {
    {"Connection", "Upgrade"},
    {"Upgrade", "SPDY/3.1"},
    {"X-Stream-Protocol-Version", "v4.channel.k8s.io"},
    {"X-Stream-Protocol-Version", "v3.channel.k8s.io"},
    {"X-Stream-Protocol-Version", "v2.channel.k8s.io"},
    {"X-Stream-Protocol-Version", "channel.k8s.io"},
};
const Pairs kWs132 = {
    {"Connection", "Upgrade"},
    {"Sec-Websocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
    {"Sec-Websocket-Protocol", "v5.channel.k8s.io"},
    {"Sec-Websocket-Version", "13"},
    {"Upgrade", "websocket"},
};

}  // namespace

START_TEST(exec_spdy_from_kubectl_128) {
    auto p = parse_stream_request(
        "POST", "/exec/facts-ns/facts-pod/c",
        {{"command", "echo"}, {"command", "hi"}, {"error", "1"}, {"output", "1"}}, kSpdy128);
    ck_assert(p.ok);
    ck_assert(p.request.kind == StreamKind::Exec);
    ck_assert_sstr_eq(p.request.ns, "facts-ns");
    ck_assert_sstr_eq(p.request.pod, "facts-pod");
    ck_assert_sstr_eq(p.request.container, "c");
    ck_assert(p.request.command == (std::vector<std::string>{"echo", "hi"}));
    ck_assert(!p.request.in && p.request.out && p.request.err && !p.request.tty);
    ck_assert(p.request.transport == StreamTransport::Spdy);
    ck_assert_sstr_eq(p.request.protocol, "v4.channel.k8s.io");
}
END_TEST

START_TEST(exec_websocket_from_kubectl_132) {
    auto p = parse_stream_request(
        "GET", "/exec/facts-ns/facts-pod/c",
        {{"command", "sh"}, {"input", "1"}, {"output", "1"}, {"tty", "1"}}, kWs132);
    ck_assert(p.ok);
    ck_assert(p.request.transport == StreamTransport::WebSocket);
    ck_assert_sstr_eq(p.request.protocol, "v5.channel.k8s.io");
    ck_assert_sstr_eq(p.request.websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
    ck_assert(p.request.in && p.request.out && !p.request.err && p.request.tty);
    // A v4-only WebSocket client gets v4; header names in any case.
    Pairs v4 = kWs132;
    v4[2] = {"sec-websocket-protocol", "v4.channel.k8s.io, base64.channel.k8s.io"};
    auto q = parse_stream_request("GET", "/exec/n/p/c", {{"command", "x"}, {"output", "1"}}, v4);
    ck_assert(q.ok && q.request.protocol == "v4.channel.k8s.io");
}
END_TEST

START_TEST(attach_and_port_forward) {
    auto a =
        parse_stream_request("POST", "/attach/n/p/c", {{"error", "1"}, {"output", "1"}}, kSpdy128);
    ck_assert(a.ok && a.request.kind == StreamKind::Attach && a.request.command.empty());
    // tty drops stderr, as the kubelet does.
    auto t = parse_stream_request("POST", "/attach/n/p/c",
                                  {{"error", "1"}, {"input", "1"}, {"tty", "1"}}, kSpdy128);
    ck_assert(t.ok && t.request.tty && !t.request.err && t.request.in);
    Pairs pf = {{"Connection", "Upgrade"},
                {"Upgrade", "SPDY/3.1"},
                {"X-Stream-Protocol-Version", "portforward.k8s.io"}};
    auto f = parse_stream_request("POST", "/portForward/n/p", {}, pf);
    ck_assert(f.ok && f.request.kind == StreamKind::PortForward && f.request.ports.empty());
    ck_assert_sstr_eq(f.request.protocol, "portforward.k8s.io");
    Pairs wpf = kWs132;
    wpf[2] = {"Sec-Websocket-Protocol", "v4.channel.k8s.io"};
    auto w = parse_stream_request("GET", "/portForward/n/p", {{"port", "80"}, {"port", "443,8080"}},
                                  wpf);
    ck_assert(w.ok && w.request.ports == (std::vector<uint16_t>{80, 443, 8080}));
}
END_TEST

// The refusals, each with the kubelet's status and text.
START_TEST(refusals) {
    struct Case {
        const char *method, *path;
        Pairs query, headers;
        int status;
        const char *body_has;
    } cases[] = {
        {"POST",
         "/exec/n/p",
         {{"command", "x"}, {"output", "1"}},
         kSpdy128,
         404,
         "404 page not found"},
        {"POST", "/exec/n/p/c/d", {{"command", "x"}, {"output", "1"}}, kSpdy128, 404, "404"},
        {"POST", "/exec//p/c", {{"command", "x"}, {"output", "1"}}, kSpdy128, 404, "404"},
        {"PUT", "/exec/n/p/c", {{"command", "x"}, {"output", "1"}}, kSpdy128, 404, "404"},
        {"POST", "/run/n/p/c", {{"command", "x"}}, kSpdy128, 404, "404"},
        {"POST",
         "/exec/n/p/c",
         {{"command", "x"}},
         kSpdy128,
         400,
         "you must specify at least 1 of stdin, stdout, stderr"},
        {"POST",
         "/exec/n/p/c",
         {{"command", "x"}, {"output", "true"}},
         kSpdy128,
         400,
         "at least 1 of stdin"},
        {"POST", "/exec/n/p/c", {{"output", "1"}}, kSpdy128, 400, "you must specify a command"},
        {"GET", "/portForward/n/p", {{"port", "0"}}, kWs132, 400, "invalid port '0'"},
        {"GET", "/portForward/n/p", {{"port", "70000"}}, kWs132, 400, "invalid port '70000'"},
        {"GET", "/portForward/n/p", {{"port", "http"}}, kWs132, 400, "invalid port 'http'"},
        {"POST",
         "/exec/n/p/c",
         {{"command", "x"}, {"output", "1"}},
         {},
         400,
         "unable to upgrade: missing upgrade headers in request"},
        {"POST",
         "/exec/n/p/c",
         {{"command", "x"}, {"output", "1"}},
         {{"Upgrade", "SPDY/3.1"}, {"X-Stream-Protocol-Version", "v4.channel.k8s.io"}},
         400,
         "missing upgrade headers"},
        {"POST",
         "/exec/n/p/c",
         {{"command", "x"}, {"output", "1"}},
         {{"Connection", "Upgrade"}, {"Upgrade", "h2c"}},
         400,
         "unsupported protocol 'h2c'"},
        {"POST",
         "/exec/n/p/c",
         {{"command", "x"}, {"output", "1"}},
         {{"Connection", "Upgrade"}, {"Upgrade", "SPDY/3.1"}},
         400,
         "unable to upgrade: X-Stream-Protocol-Version is required"},
        {"POST",
         "/exec/n/p/c",
         {{"command", "x"}, {"output", "1"}},
         {{"Connection", "Upgrade"},
          {"Upgrade", "SPDY/3.1"},
          {"X-Stream-Protocol-Version", "v3.channel.k8s.io"}},
         403,
         "unable to upgrade: unable to negotiate protocol: client supports [v3.channel.k8s.io], "
         "server accepts [v4.channel.k8s.io]"},
        {"GET",
         "/exec/n/p/c",
         {{"command", "x"}, {"output", "1"}},
         {{"Connection", "Upgrade"},
          {"Upgrade", "websocket"},
          {"Sec-WebSocket-Protocol", "v5.channel.k8s.io"}},
         400,
         "no Sec-WebSocket-Key"},
        {"GET",
         "/portForward/n/p",
         {},
         {{"Connection", "Upgrade"},
          {"Upgrade", "websocket"},
          {"Sec-WebSocket-Key", "k"},
          {"Sec-WebSocket-Protocol", "SPDY/3.1+portforward.k8s.io"}},
         403,
         "client supports [SPDY/3.1+portforward.k8s.io], server accepts [v4.channel.k8s.io "
         "channel.k8s.io]"},
    };
    for (const auto &c : cases) {
        auto p = parse_stream_request(c.method, c.path, c.query, c.headers);
        ck_assert_msg(!p.ok, "%s %s accepted", c.method, c.path);
        ck_assert_msg(p.refusal.status == c.status, "%s %s: %d (%s)", c.method, c.path,
                      p.refusal.status, p.refusal.body.c_str());
        ck_assert_msg(p.refusal.body.find(c.body_has) != std::string::npos, "'%s' lacks '%s'",
                      p.refusal.body.c_str(), c.body_has);
        ck_assert(p.not_found == (c.status == 404));
    }
}
END_TEST

int main() {
    Suite *s = suite_create("stream_request");
    TCase *tc = tcase_create("requests");
    tcase_add_test(tc, exec_spdy_from_kubectl_128);
    tcase_add_test(tc, exec_websocket_from_kubectl_132);
    tcase_add_test(tc, attach_and_port_forward);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
