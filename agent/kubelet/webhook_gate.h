// The kubelet endpoint's gate (agent/kubelet/kubelet_server.h RequestGate) as a
// kubelet's `--authentication-token-webhook` and
// `--authorization-mode=Webhook` (agent/kubelet/kubelet_auth.h has the rules and
// texts):
//   1. who: a verified client certificate (CN, O), else, with
//      token_webhook, the bearer token of `Authorization: Bearer ...` as
//      the API server's TokenReview names it; else 401 Unauthorized;
//   2. may they: with authorize_webhook, a SubjectAccessReview on `nodes`
//      (the request's verb and subresource, the node's name); denied ->
//      403, the API server not answering -> 500 (both with the kubelet's
//      text); without it, any authenticated client may (AlwaysAllow).
// Answers are cached as a kubelet caches them (authentication 2 min,
// allowed 5 min, denied 30 s; bounded entries), so a burst of scrapes or
// log lines costs one review.
//
// Threads: admit() runs in the HTTP server's threads and waits (at most
// timeout_ms) for the review, which runs on the agent's loop through
// `post` (the agent's API client). start() and close() on the loop.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/kubelet/kubelet_auth.h"
#include "agent/kubelet/kubelet_server.h"
#include "agent/kubelet/loop_calls.h"

namespace sk::agent {

struct WebhookGateOptions {
    bool token_webhook = true;      // bearer tokens through TokenReview
    bool authorize_webhook = true;  // SubjectAccessReview; false = AlwaysAllow
    int timeout_ms = 10000;         // one review's bound, as seen from admit()
    int64_t authn_ttl_ms = int64_t{2} * 60 * 1000;
    int64_t allowed_ttl_ms = int64_t{5} * 60 * 1000;
    int64_t denied_ttl_ms = int64_t{30} * 1000;
    size_t max_cache_entries = 4096;
    std::function<int64_t()> now_ms;  // monotonic ms; default: steady clock
};

class WebhookGate : public RequestGate, public std::enable_shared_from_this<WebhookGate> {
  public:
    using Done = std::function<void(Result<Json::Value>)>;
    // Loop thread: POSTs body to the API path and calls done once.
    using Post = std::function<void(const std::string &path, const Json::Value &body, Done done)>;

    WebhookGate(uv_loop_t *loop, Post post, WebhookGateOptions options);
    WebhookGate(const WebhookGate &) = delete;
    WebhookGate &operator=(const WebhookGate &) = delete;

    Status start();  // loop thread
    // Loop thread, once no admit() can come (the servers stopped): waiting
    // reviews fail (their requests get 401/500), the async handle closes.
    void close();

    std::optional<sk::HttpResponse> admit(const sk::HttpRequest &req,
                                          const std::string &node) override;
    bool authenticates_tokens() const override { return options_.token_webhook; }

    // Reviews sent to the API server so far (tests, metrics).
    uint64_t reviews() const { return reviews_.load(); }

  private:
    // Any thread but the loop's: the review's answer, or Unavailable.
    Result<Json::Value> review(const std::string &path, const Json::Value &body);
    int64_t now() const;

    Post post_;
    WebhookGateOptions options_;
    LoopCalls<Json::Value> calls_;
    TtlCache<KubeletUser> users_;
    TtlCache<bool> decisions_;
    std::atomic<uint64_t> reviews_{0};
};

}  // namespace sk::agent
