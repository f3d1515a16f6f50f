// agent/kubelet/kubelet_auth and agent/kubelet/webhook_gate: the kubelet's request
// attributes and texts, the review bodies and answers, the bounded cache,
// and the gate's decisions with an API stand-in on a real libuv loop
// (client certificate, bearer token, allowed, denied, the API server not
// answering, caching).
#include <uv.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/kubelet/kubelet_auth.h"
#include "agent/kubelet/webhook_gate.h"
#include "tests/unit/check_json.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

START_TEST(attributes_as_the_kubelet_maps_them) {
    struct {
        const char *method, *path, *verb, *sub;
    } cases[] = {
        {"GET", "/stats/summary", "get", "stats"},
        {"GET", "/stats", "get", "stats"},
        {"GET", "/metrics/resource", "get", "metrics"},
        {"GET", "/metrics", "get", "metrics"},
        {"GET", "/metricsx", "get", "proxy"},
        {"GET", "/logs/", "get", "log"},
        {"POST", "/checkpoint/ns/p/c", "create", "checkpoint"},
        {"GET", "/containerLogs/ns/p/c", "get", "proxy"},
        {"POST", "/exec/ns/p/c", "create", "proxy"},
        {"GET", "/exec/ns/p/c", "get", "proxy"},
        {"POST", "/portForward/ns/p", "create", "proxy"},
        {"GET", "/healthz", "get", "proxy"},
        {"PUT", "/x", "update", "proxy"},
        {"PATCH", "/x", "patch", "proxy"},
        {"DELETE", "/x", "delete", "proxy"},
        {"HEAD", "/x", "", "proxy"},
    };
    for (const auto &c : cases) {
        KubeletAttributes a = kubelet_request_attributes(c.method, c.path, "n1");
        ck_assert_msg(a.verb == c.verb && a.subresource == c.sub && a.node == "n1",
                      "%s %s -> %s %s", c.method, c.path, a.verb.c_str(), a.subresource.c_str());
    }
}
END_TEST

START_TEST(review_bodies_and_answers) {
    Json::Value tr = token_review_request("tok");
    ck_assert_str_eq(tr["kind"].asCString(), "TokenReview");
    ck_assert_str_eq(tr["apiVersion"].asCString(), "authentication.k8s.io/v1");
    ck_assert_str_eq(tr["spec"]["token"].asCString(), "tok");
    auto u = token_review_user(J(R"({"status":{"authenticated":true,"user":{"username":"alice",
        "uid":"u1","groups":["g1","system:authenticated"]}}})"));
    ck_assert(u.ok());
    ck_assert_str_eq(u->name.c_str(), "alice");
    ck_assert_uint_eq(u->groups.size(), 2);
    // The API server leaves `authenticated` out when false (omitempty).
    auto no = token_review_user(J(R"({"status":{"user":{},"error":"invalid bearer token"}})"));
    ck_assert(!no.ok() && no.error() == Error::Refused);
    ck_assert_str_eq(no.message().c_str(), "invalid bearer token");
    ck_assert(token_review_user(J(R"({"kind":"Status"})")).error() == Error::Parse);
    ck_assert(token_review_user(J(R"({"status":{"authenticated":true,"user":{}}})")).error() ==
              Error::Parse);

    KubeletUser alice{"alice", "u1", {"g1"}};
    KubeletAttributes a{"get", "stats", "n1"};
    Json::Value sar = access_review_request(alice, a);
    ck_assert_str_eq(sar["kind"].asCString(), "SubjectAccessReview");
    ck_assert_str_eq(sar["spec"]["user"].asCString(), "alice");
    ck_assert_str_eq(sar["spec"]["groups"][0].asCString(), "g1");
    const Json::Value &ra = sar["spec"]["resourceAttributes"];
    ck_assert_str_eq(ra["resource"].asCString(), "nodes");
    ck_assert_str_eq(ra["subresource"].asCString(), "stats");
    ck_assert_str_eq(ra["verb"].asCString(), "get");
    ck_assert_str_eq(ra["name"].asCString(), "n1");
    ck_assert_str_eq(ra["version"].asCString(), "v1");
    std::string reason;
    auto yes =
        access_review_allowed(J(R"({"status":{"allowed":true,"reason":"RBAC: ok"}})"), &reason);
    ck_assert(yes.ok() && *yes);
    ck_assert_str_eq(reason.c_str(), "RBAC: ok");
    auto deny = access_review_allowed(J(R"({"status":{"allowed":false}})"));
    ck_assert(deny.ok() && !*deny);
    ck_assert(access_review_allowed(J(R"({"status":{}})")).error() == Error::Parse);

    const std::string forbidden = kubelet_forbidden_text("bob", a);
    ck_assert_str_eq(forbidden.c_str(),
                     "Forbidden (user=bob, verb=get, resource=nodes, subresource=stats)");
    const std::string error = kubelet_authorization_error_text("bob", a);
    ck_assert_str_eq(error.c_str(),
                     "Authorization error (user=bob, verb=get, resource=nodes, subresource=stats)");
    ck_assert_uint_eq(token_cache_key("tok").size(), 64);
    ck_assert(token_cache_key("tok") != token_cache_key("tok2"));
}
END_TEST

START_TEST(cache_expires_and_stays_bounded) {
    TtlCache<int> c(3);
    c.put("a", 1, 0, 100);
    c.put("b", 2, 0, 200);
    c.put("c", 3, 0, 300);
    ck_assert_int_eq(*c.get("a", 50), 1);
    ck_assert(!c.get("a", 100));  // expired at its TTL
    c.put("a", 1, 100, 100);
    c.put("d", 4, 100, 1000);  // full: the one expiring soonest goes (a at 200, b at 200: one)
    ck_assert_uint_eq(c.size(), 3);
    ck_assert_int_eq(*c.get("d", 150), 4);
    ck_assert_int_eq(*c.get("c", 150), 3);
    c.put("e", 5, 250, 1000);  // a and b expired by now: room without evicting c or d
    ck_assert(c.get("c", 250).has_value() && c.get("d", 250).has_value());
    ck_assert(c.get("e", 250).has_value());
    c.put("z", 9, 0, 0);  // a TTL of 0 caches nothing
    ck_assert(!c.get("z", 0));
}
END_TEST

// The gate with a stand-in API on a loop in its own thread.
struct GateEnv {
    uv_loop_t loop{};
    std::thread thread;
    std::shared_ptr<WebhookGate> gate;
    std::mutex mu;
    std::vector<std::string> paths;  // what was POSTed
    Json::Value token_answer = J(R"({"status":{"authenticated":true,"user":{"username":"tok-user",
        "groups":["readers"]}}})");
    bool allow = true;
    bool answer = true;  // false: the review never gets an answer
    int64_t now = 0;
    uv_async_t stop{};

    explicit GateEnv(WebhookGateOptions o) {
        uv_loop_init(&loop);
        o.timeout_ms = 300;
        o.now_ms = [this] { return now; };
        gate = std::make_shared<WebhookGate>(
            &loop,
            [this](const std::string &path, const Json::Value &body,
                   const WebhookGate::Done &done) {
                {
                    std::lock_guard<std::mutex> l(mu);
                    paths.push_back(path + " " + body["kind"].asString());
                }
                if (!answer) return;  // dropped: admit() times out
                if (path.find("tokenreviews") != std::string::npos)
                    done(token_answer);
                else
                    done(J(allow ? R"({"status":{"allowed":true}})"
                                 : R"({"status":{"allowed":false}})"));
            },
            o);
        ck_assert(gate->start().ok());
        uv_async_init(&loop, &stop, [](uv_async_t *a) { uv_stop(a->loop); });
        thread = std::thread([this] { uv_run(&loop, UV_RUN_DEFAULT); });
    }
    ~GateEnv() {
        uv_async_send(&stop);
        thread.join();
        gate->close();
        uv_close(reinterpret_cast<uv_handle_t *>(&stop), nullptr);
        uv_run(&loop, UV_RUN_DEFAULT);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
    }
    size_t posted() {
        std::lock_guard<std::mutex> l(mu);
        return paths.size();
    }
};

HttpRequest cert_request(const char *path) {
    HttpRequest r;
    r.method = "GET";
    r.path = path;
    r.client_verified = true;
    r.client_cn = "kube-apiserver-kubelet-client";
    r.client_groups = {"system:masters"};
    return r;
}

START_TEST(gate_certificate_allowed_then_cached) {
    GateEnv env{WebhookGateOptions{}};
    auto r = env.gate->admit(cert_request("/stats/summary"), "n1");
    ck_assert(!r.has_value());
    ck_assert_uint_eq(env.posted(), 1);
    ck_assert_str_eq(env.paths[0].c_str(),
                     "/apis/authorization.k8s.io/v1/subjectaccessreviews SubjectAccessReview");
    // Cached: no second review within the allowed TTL, a new one after it.
    ck_assert(!env.gate->admit(cert_request("/stats/summary"), "n1").has_value());
    ck_assert_uint_eq(env.posted(), 1);
    env.now += int64_t{5} * 60 * 1000;
    ck_assert(!env.gate->admit(cert_request("/stats/summary"), "n1").has_value());
    ck_assert_uint_eq(env.posted(), 2);
}
END_TEST

START_TEST(gate_denied_with_the_kubelets_text) {
    GateEnv env{WebhookGateOptions{}};
    env.allow = false;
    auto r = env.gate->admit(cert_request("/exec/ns/p/c"), "n1");
    ck_assert(r.has_value());
    ck_assert_int_eq(r->status, 403);
    ck_assert_str_eq(r->body.c_str(),
                     "Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, "
                     "subresource=proxy)");
    // Denials are cached 30 s only.
    env.allow = true;
    ck_assert_int_eq(env.gate->admit(cert_request("/exec/ns/p/c"), "n1")->status, 403);
    env.now += int64_t{30} * 1000;
    ck_assert(!env.gate->admit(cert_request("/exec/ns/p/c"), "n1").has_value());
}
END_TEST

START_TEST(gate_bearer_tokens) {
    GateEnv env{WebhookGateOptions{}};
    HttpRequest anon;
    anon.method = "GET";
    anon.path = "/stats/summary";
    auto r = env.gate->admit(anon, "n1");
    ck_assert(r.has_value() && r->status == 401);
    ck_assert_uint_eq(env.posted(), 0);  // nothing to review
    HttpRequest tok = anon;
    tok.headers = {{"authorization", "Bearer  secret-token "}};
    ck_assert(!env.gate->admit(tok, "n1").has_value());
    ck_assert_uint_eq(env.posted(), 2);  // TokenReview, then the SubjectAccessReview
    ck_assert(env.paths[0].find("TokenReview") != std::string::npos);
    ck_assert(!env.gate->admit(tok, "n1").has_value());
    ck_assert_uint_eq(env.posted(), 2);  // both cached
    // A token the API server does not know.
    env.token_answer = J(R"({"status":{"user":{},"error":"invalid bearer token"}})");
    HttpRequest bad = anon;
    bad.headers = {{"Authorization", "Bearer other"}};
    r = env.gate->admit(bad, "n1");
    ck_assert(r.has_value() && r->status == 401);
    // Without the token webhook a token is not looked at.
    WebhookGateOptions o;
    o.token_webhook = false;
    GateEnv env2{o};
    ck_assert(!env2.gate->authenticates_tokens());
    r = env2.gate->admit(tok, "n1");
    ck_assert(r.has_value() && r->status == 401);
    ck_assert_uint_eq(env2.posted(), 0);
}
END_TEST

START_TEST(gate_api_server_silent_is_500) {
    GateEnv env{WebhookGateOptions{}};
    env.answer = false;
    auto r = env.gate->admit(cert_request("/metrics/resource"), "");
    ck_assert(r.has_value());
    ck_assert_int_eq(r->status, 500);
    ck_assert_str_eq(r->body.c_str(),
                     "Authorization error (user=kube-apiserver-kubelet-client, verb=get, "
                     "resource=nodes, subresource=metrics)");
}
END_TEST

START_TEST(gate_always_allow_authenticates_only) {
    WebhookGateOptions o;
    o.authorize_webhook = false;
    GateEnv env{o};
    ck_assert(!env.gate->admit(cert_request("/exec/ns/p/c"), "n1").has_value());
    ck_assert_uint_eq(env.posted(), 0);
}
END_TEST

int main() {
    Suite *s = suite_create("kubelet_auth");
    TCase *tc = tcase_create("kubelet_auth");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, attributes_as_the_kubelet_maps_them);
    tcase_add_test(tc, review_bodies_and_answers);
    tcase_add_test(tc, cache_expires_and_stays_bounded);
    tcase_add_test(tc, gate_certificate_allowed_then_cached);
    tcase_add_test(tc, gate_denied_with_the_kubelets_text);
    tcase_add_test(tc, gate_bearer_tokens);
    tcase_add_test(tc, gate_api_server_silent_is_500);
    tcase_add_test(tc, gate_always_allow_authenticates_only);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
