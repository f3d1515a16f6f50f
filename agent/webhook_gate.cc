#include "agent/webhook_gate.h"

#include <strings.h>

#include <atomic>
#include <chrono>

#include "common/log.h"

namespace sk::agent {

struct WebhookGate::Pending {
    std::string path;
    Json::Value body;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Result<Json::Value> result = fail(Error::Unavailable, "no answer");

    void complete(Result<Json::Value> r) {
        std::lock_guard<std::mutex> l(mu);
        if (done) return;
        result = std::move(r);
        done = true;
        cv.notify_all();
    }
};

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
    : loop_(loop),
      post_(std::move(post)),
      options_(std::move(options)),
      users_(options_.max_cache_entries),
      decisions_(options_.max_cache_entries) {}

WebhookGate::~WebhookGate() {
    // Normally closed already (the daemon's teardown).
    if (async_) close();
}

int64_t WebhookGate::now() const {
    if (options_.now_ms) return options_.now_ms();
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

Status WebhookGate::start() {
    async_ = new uv_async_t;
    async_->data = this;
    if (int rc = uv_async_init(
            loop_, async_, [](uv_async_t *a) { static_cast<WebhookGate *>(a->data)->on_async(); });
        rc != 0) {
        delete async_;
        async_ = nullptr;
        return fail(Error::Io, std::string("uv_async_init: ") + uv_strerror(rc));
    }
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    return {};
}

void WebhookGate::close() {
    std::deque<std::shared_ptr<Pending>> left;
    {
        std::lock_guard<std::mutex> l(mu_);
        open_ = false;
        left.swap(queue_);
    }
    for (auto &p : left)
        p->complete(fail(Error::Unavailable, "the agent is stopping"));
    if (async_) {
        async_->data = nullptr;
        uv_close(reinterpret_cast<uv_handle_t *>(async_),
                 [](uv_handle_t *h) { delete reinterpret_cast<uv_async_t *>(h); });
        async_ = nullptr;
    }
}

Result<Json::Value> WebhookGate::review(const std::string &path, const Json::Value &body) {
    auto p = std::make_shared<Pending>();
    p->path = path;
    p->body = body;
    {
        std::lock_guard<std::mutex> l(mu_);
        if (!open_) return fail(Error::Unavailable, "the agent is not serving");
        queue_.push_back(p);
        uv_async_send(async_);  // under mu_: close() cannot free the handle meanwhile
    }
    reviews_++;
    std::unique_lock<std::mutex> l(p->mu);
    if (!p->cv.wait_for(l, std::chrono::milliseconds(options_.timeout_ms),
                        [&p] { return p->done; }))
        return fail(Error::Unavailable, "the API server did not answer within " +
                                            std::to_string(options_.timeout_ms / 1000) + " s");
    return p->result;
}

void WebhookGate::on_async() {
    std::deque<std::shared_ptr<Pending>> todo;
    {
        std::lock_guard<std::mutex> l(mu_);
        todo.swap(queue_);
    }
    for (auto &p : todo)
        post_(p->path, p->body, [p](Result<Json::Value> r) { p->complete(std::move(r)); });
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
