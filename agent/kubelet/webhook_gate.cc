#include "agent/kubelet/webhook_gate.h"

#include <strings.h>

#include <atomic>
#include <chrono>

#include "common/log.h"

namespace sk::agent {

namespace {

std::string bearer_token(const sk::HttpRequest &req) {
    for (const auto &[k, v] : req.headers) {
        if (k.size() != 13 || strncasecmp(k.c_str(), "Authorization", 13) != 0) continue;
        if (v.size() > 7 && strncasecmp(v.c_str(), "Bearer ", 7) == 0) {
            std::string t = v.substr(7);
            while (!t.empty() && t.front() == ' ')
                t.erase(0, 1);
            while (!t.empty() && t.back() == ' ')
                t.pop_back();
            return t;
        }
    }
    return "";
}

sk::HttpResponse text(int status, std::string body) {
    return http_text(status, std::move(body));
}

std::string decision_key(const KubeletUser &u, const KubeletAttributes &a) {
    // Unambiguous: no field holds a newline (names and groups are from a
    // certificate or the API server, which has none in them; the
    // attributes are ours).
    std::string k = u.name + "\n" + u.uid + "\n";
    for (const auto &g : u.groups)
        k += g + "\n";
    return k + "\n" + a.verb + "\n" + a.subresource + "\n" + a.node;
}

}  // namespace

WebhookGate::WebhookGate(uv_loop_t *loop, Post post, WebhookGateOptions options)
    : post_(std::move(post)),
      options_(std::move(options)),
      calls_(loop),
      users_(options_.max_cache_entries),
      decisions_(options_.max_cache_entries) {}

int64_t WebhookGate::now() const {
    if (options_.now_ms) return options_.now_ms();
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

Status WebhookGate::start() {
    return calls_.start();
}

void WebhookGate::close() {
    calls_.close("the agent is stopping");
}

Result<Json::Value> WebhookGate::review(const std::string &path, const Json::Value &body) {
    reviews_++;
    return calls_.call(
        [this, path, body](LoopCalls<Json::Value>::Done done) {
            post_(path, body, std::move(done));
        },
        options_.timeout_ms,
        "the API server did not answer within " + std::to_string(options_.timeout_ms / 1000) + " s",
        "the agent is not serving");
}

std::optional<sk::HttpResponse> WebhookGate::admit(const sk::HttpRequest &req,
                                                   const std::string &node) {
    // 1. who
    KubeletUser user;
    if (req.client_verified) {
        user.name = req.client_cn;
        user.groups = req.client_groups;
    } else {
        std::string token = options_.token_webhook ? bearer_token(req) : "";
        if (token.empty()) return text(401, "Unauthorized");
        std::string key = token_cache_key(token);
        std::optional<KubeletUser> cached = key.empty() ? std::nullopt : users_.get(key, now());
        if (cached) {
            user = *cached;
        } else {
            auto answer =
                review("/apis/authentication.k8s.io/v1/tokenreviews", token_review_request(token));
            auto u =
                answer.ok() ? token_review_user(*answer) : Result<KubeletUser>(answer.failure());
            if (!u.ok()) {
                LOG_INFO("[kubelet] %s %s: bearer token not authenticated: %s", req.method.c_str(),
                         req.path.c_str(), u.message().c_str());
                return text(401, "Unauthorized");
            }
            user = *u;
            if (!key.empty()) users_.put(key, user, now(), options_.authn_ttl_ms);
        }
    }
    if (!options_.authorize_webhook) return std::nullopt;

    // 2. may they
    KubeletAttributes attrs = kubelet_request_attributes(req.method, req.path, node);
    std::string key = decision_key(user, attrs);
    std::optional<bool> allowed = decisions_.get(key, now());
    if (!allowed) {
        auto answer = review("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                             access_review_request(user, attrs));
        std::string reason;
        auto a =
            answer.ok() ? access_review_allowed(*answer, &reason) : Result<bool>(answer.failure());
        if (!a.ok()) {
            LOG_WARN("[kubelet] %s %s: cannot authorize user %s: %s", req.method.c_str(),
                     req.path.c_str(), user.name.c_str(), a.message().c_str());
            return text(500, kubelet_authorization_error_text(user.name, attrs));
        }
        allowed = *a;
        decisions_.put(key, *a, now(), *a ? options_.allowed_ttl_ms : options_.denied_ttl_ms);
        if (!*a)
            LOG_INFO("[kubelet] %s %s: user %s may not %s nodes/%s%s%s", req.method.c_str(),
                     req.path.c_str(), user.name.c_str(), attrs.verb.c_str(),
                     attrs.subresource.c_str(), reason.empty() ? "" : ": ", reason.c_str());
    }
    if (!*allowed) return text(403, kubelet_forbidden_text(user.name, attrs));
    return std::nullopt;
}

}  // namespace sk::agent
