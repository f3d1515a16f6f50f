// Who may use the kubelet endpoint, decided as a kubelet decides it with
// `--authentication-token-webhook` and `--authorization-mode=Webhook`
// (its server's auth filter): the client is a verified client certificate
// (user = its CN, groups = its O values) or a bearer token the API server
// vouches for (TokenReview); what it asks is mapped onto the `nodes`
// resource (verb from the method, subresource from the path: stats,
// metrics, log, proxy) and the API server answers whether it may
// (SubjectAccessReview). The answers are what the kubelet sends: 401
// `Unauthorized`, 403 `Forbidden (user=..., verb=..., resource=nodes,
// subresource=...)`, 500 `Authorization error (...)` when the API server
// could not be asked.
//
// Pure: the review bodies, their answers, the attributes of a request, the
// messages and a bounded cache; agent/kubelet/webhook_gate.h asks the API server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/result.h"

namespace sk::agent {

struct KubeletUser {
    std::string name;
    std::string uid;
    std::vector<std::string> groups;
};

// What a request to the kubelet endpoint asks of the `nodes` resource.
struct KubeletAttributes {
    std::string verb;         // create, get, update, patch, delete ("" for another method)
    std::string subresource;  // stats, metrics, log, checkpoint, proxy
    std::string node;         // the node the endpoint serves; "" = every node (a shared port)
};

// The kubelet's mapping: POST create, GET get, PUT update, PATCH patch,
// DELETE delete; /stats/... stats, /metrics... metrics, /logs/... log,
// /checkpoint/... checkpoint, everything else (containerLogs, exec, attach,
// portForward, healthz) proxy.
KubeletAttributes kubelet_request_attributes(const std::string &method, const std::string &path,
                                             const std::string &node);

// authentication.k8s.io/v1 TokenReview for a bearer token (no audiences:
// the API server's own, as a kubelet's webhook asks).
Json::Value token_review_request(const std::string &token);
// The API server's answer: the user when authenticated; Error::Refused
// (with the server's error text) when not (`authenticated` false or absent,
// as the API server leaves it out); Error::Parse for an answer that is not
// a TokenReview status.
Result<KubeletUser> token_review_user(const Json::Value &answer);

// authorization.k8s.io/v1 SubjectAccessReview for the user and attributes.
Json::Value access_review_request(const KubeletUser &user, const KubeletAttributes &attrs);
// allowed (true/false), with the reason the server gave; Error::Parse when
// the answer has no status.allowed.
Result<bool> access_review_allowed(const Json::Value &answer, std::string *reason = nullptr);

// The kubelet's texts.
std::string kubelet_forbidden_text(const std::string &user, const KubeletAttributes &attrs);
std::string kubelet_authorization_error_text(const std::string &user,
                                             const KubeletAttributes &attrs);

// A thread-safe map of answers that expire, bounded: past max_entries the
// expired ones go first, then the one that expires soonest. Times in ms of
// any monotonic clock the caller passes.
template <class V>
class TtlCache {
  public:
    explicit TtlCache(size_t max_entries) : max_(max_entries ? max_entries : 1) {}

    std::optional<V> get(const std::string &key, int64_t now_ms) {
        std::lock_guard<std::mutex> l(mu_);
        auto it = map_.find(key);
        if (it == map_.end()) return std::nullopt;
        if (it->second.expires_ms <= now_ms) {
            map_.erase(it);
            return std::nullopt;
        }
        return it->second.value;
    }

    void put(const std::string &key, V value, int64_t now_ms, int64_t ttl_ms) {
        if (ttl_ms <= 0) return;
        std::lock_guard<std::mutex> l(mu_);
        if (map_.size() >= max_ && map_.find(key) == map_.end()) {
            for (auto it = map_.begin(); it != map_.end();)
                it = it->second.expires_ms <= now_ms ? map_.erase(it) : std::next(it);
            if (map_.size() >= max_) {
                auto soonest = map_.begin();
                for (auto it = map_.begin(); it != map_.end(); ++it)
                    if (it->second.expires_ms < soonest->second.expires_ms) soonest = it;
                map_.erase(soonest);
            }
        }
        map_[key] = Entry{std::move(value), now_ms + ttl_ms};
    }

    size_t size() const {
        std::lock_guard<std::mutex> l(mu_);
        return map_.size();
    }

  private:
    struct Entry {
        V value;
        int64_t expires_ms;
    };
    size_t max_;
    mutable std::mutex mu_;
    std::map<std::string, Entry> map_;
};

// A cache key for a token that does not keep the token itself (SHA-256).
std::string token_cache_key(const std::string &token);

}  // namespace sk::agent
