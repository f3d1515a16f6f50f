// agent/kubelet/kubelet_server.h with a StreamHandler: the streaming endpoints'
// refusals (the request's, then the handler's check) and the 101 a kubelet
// answers for SPDY and for WebSocket, without a socket; without a handler,
// 404 as before.
#include <atomic>
#include <string>

#include "agent/kubelet/kubelet_server.h"
#include "tests/unit/check_main.h"

using namespace sk;

namespace {

struct FakeStreams : StreamHandler {
    Status verdict;
    std::atomic<int> starts{0};
    StreamRequest last;
    Status check(const StreamRequest &req) override {
        last = req;
        return verdict;
    }
    void start(StreamRequest, HttpUpgrade conn) override {
        starts++;
        if (conn.close) conn.close();
    }
};

Result<ContainerLogSource> no_logs(const ContainerLogRef &) {
    return fail(Error::NotFound, "no");
}

HttpRequest exec_request(const char *method, std::vector<std::pair<std::string, std::string>> h) {
    HttpRequest r;
    r.method = method;
    r.path = "/exec/ns/pod/main";
    r.query_all = {{"command", "echo"}, {"command", "hi"}, {"output", "1"}, {"error", "1"}};
    r.headers = std::move(h);
    return r;
}

const std::vector<std::pair<std::string, std::string>> kSpdy = {
    {"Connection", "Upgrade"},
    {"Upgrade", "SPDY/3.1"},
    {"X-Stream-Protocol-Version", "v4.channel.k8s.io"},
    {"X-Stream-Protocol-Version", "v3.channel.k8s.io"}};
const std::vector<std::pair<std::string, std::string>> kWs = {
    {"Connection", "Upgrade"},
    {"Upgrade", "websocket"},
    {"Sec-Websocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
    {"Sec-Websocket-Protocol", "v5.channel.k8s.io"},
    {"Sec-Websocket-Version", "13"}};

}  // namespace

START_TEST(upgrade_answers) {
    auto h = std::make_shared<FakeStreams>();
    KubeletServer k({}, no_logs, h);
    HttpResponse s = k.handle(exec_request("POST", kSpdy));
    ck_assert_int_eq(s.status, 101);
    ck_assert_sstr_eq(s.headers["Upgrade"], "SPDY/3.1");
    ck_assert_sstr_eq(s.headers["X-Stream-Protocol-Version"], "v4.channel.k8s.io");
    ck_assert(static_cast<bool>(s.upgrade));
    ck_assert(h->last.command == (std::vector<std::string>{"echo", "hi"}));
    HttpResponse w = k.handle(exec_request("GET", kWs));
    ck_assert_int_eq(w.status, 101);
    ck_assert_sstr_eq(w.headers["Upgrade"], "websocket");
    // RFC 6455's example key and accept value.
    ck_assert_sstr_eq(w.headers["Sec-WebSocket-Accept"], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    ck_assert_sstr_eq(w.headers["Sec-WebSocket-Protocol"], "v5.channel.k8s.io");
    // The upgrade goes to the handler with the request.
    w.upgrade(HttpUpgrade{});
    ck_assert_int_eq(h->starts.load(), 1);
}
END_TEST

START_TEST(refusals) {
    auto h = std::make_shared<FakeStreams>();
    KubeletServer k({}, no_logs, h);
    // The request's own refusal comes before the handler is asked.
    HttpResponse r = k.handle(exec_request("POST", {}));
    ck_assert_int_eq(r.status, 400);
    ck_assert(r.body.find("missing upgrade headers") != std::string::npos);
    h->verdict = fail(Error::NotFound, "pod ns/pod not found");
    r = k.handle(exec_request("POST", kSpdy));
    ck_assert_int_eq(r.status, 404);
    ck_assert_sstr_eq(r.body, "pod ns/pod not found\n");
    h->verdict = fail(Error::Invalid, "container main is not running");
    r = k.handle(exec_request("POST", kSpdy));
    ck_assert_int_eq(r.status, 400);
    ck_assert_sstr_eq(r.content_type, "application/json");
    ck_assert(r.body.find("\"message\":\"container main is not running\"") != std::string::npos);
    ck_assert(r.body.find("\"reason\":\"BadRequest\"") != std::string::npos);
    h->verdict = fail(Error::Unavailable, "the job's shim is not attached");
    r = k.handle(exec_request("POST", kSpdy));
    ck_assert_int_eq(r.status, 500);
    ck_assert_int_eq(h->starts.load(), 0);
    // No handler: the endpoints do not exist.
    KubeletServer none({}, no_logs);
    ck_assert_int_eq(none.handle(exec_request("POST", kSpdy)).status, 404);
}
END_TEST

int main() {
    Suite *s = suite_create("kubelet_streams");
    TCase *tc = tcase_create("streams");
    tcase_add_test(tc, upgrade_answers);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
