// Typed-enough Kubernetes API calls over an HttpTransport, with the error
// classification every controller decides on: NotFound (recreate),
// AlreadyExists, Conflict (re-read), Gone (relist), Invalid, Unauthorized,
// Forbidden, Transient (retry with back-off).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <json/json.h>

#include "agent/kube/http_client.h"
#include "agent/kube/watch_parser.h"
#include "common/result.h"

namespace sk::agent {

// HTTP status + Status body -> Failure (what names the call for the log).
// node_identity: the request went out under a virtual node's own identity
// (a 403 then names no RBAC binding: the Node authorizer decided).
// retry_after_s: the response's Retry-After, kept in a 429's or 5xx's Failure.
Failure classify_http(long status, const std::string &body, const std::string &what,
                      bool node_identity = false, uint32_t retry_after_s = 0);
// 2xx -> parsed JSON body; else the classified failure.
Result<Json::Value> decode_response(const Result<HttpResponse> &r, const std::string &what,
                                    bool node_identity = false);

std::string url_escape(const std::string &s);

constexpr const char *kStrategicMerge = "application/strategic-merge-patch+json";
constexpr const char *kMergePatch = "application/merge-patch+json";

class KubeClient {
  public:
    using JsonCb = std::function<void(Result<Json::Value>)>;
    using EventCb = std::function<void(const WatchEvent &)>;
    using EndCb = std::function<void(Status)>;  // ok = the server closed the stream

    KubeClient(HttpTransport &transport, std::string server, uint64_t timeout_ms)
        : t_(transport), server_(std::move(server)), timeout_ms_(timeout_ms) {}

    void get(const std::string &path, JsonCb cb);
    void post(const std::string &path, const Json::Value &body, JsonCb cb);
    void put(const std::string &path, const Json::Value &body, JsonCb cb);
    void patch(const std::string &path, const Json::Value &body, const char *type, JsonCb cb);
    void del(const std::string &path, const Json::Value &body, JsonCb cb);
    // Streams watch events of path (which carries ?watch=1...). A malformed
    // event ends the watch with Parse; an ERROR event is delivered as one.
    uint64_t watch(const std::string &path, const EventCb &on_event, const EndCb &on_end);
    void cancel(uint64_t id) { t_.cancel(id); }
    // Called on every answer: verb (GET, POST, PUT, PATCH, DELETE, WATCH) and
    // HTTP status, 0 for a transport failure (metrics).
    using ResponseObserver = std::function<void(const char *verb, int code)>;
    void set_observer(ResponseObserver o) { observer_ = std::move(o); }
    const ResponseObserver &observer() const { return observer_; }
    // Every request from now on presents c instead of the transport's own
    // credential (a virtual node's identity); null = the transport's.
    void set_credential(std::shared_ptr<const Credential> c) { credential_ = std::move(c); }
    bool has_credential() const { return credential_ != nullptr; }
    // Every request acts as that user (node_identity = impersonate), with
    // the transport's credential; null = as the credential's own user.
    void set_impersonation(std::shared_ptr<const Impersonation> as) { as_ = std::move(as); }
    // The requests go out as a node (its certificate, or impersonating it):
    // the Node authorizer's and NodeRestriction's rules apply, not RBAC's.
    bool acts_as_node() const { return credential_ != nullptr || as_ != nullptr; }
    HttpTransport &transport() const { return t_; }
    const std::string &server() const { return server_; }
    uint64_t timeout_ms() const { return timeout_ms_; }

    static std::string node(const std::string &n) { return "/api/v1/nodes/" + n; }
    static std::string node_status(const std::string &n) { return node(n) + "/status"; }
    static std::string lease(const std::string &n) {
        return "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + n;
    }
    static std::string leases() {
        return "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    }
    static std::string pod(const std::string &ns, const std::string &n) {
        return "/api/v1/namespaces/" + ns + "/pods/" + n;
    }
    static std::string pods_on_node(const std::string &node_name) {
        return "/api/v1/pods?fieldSelector=" + url_escape("spec.nodeName=" + node_name);
    }
    static std::string events(const std::string &ns) {
        return "/api/v1/namespaces/" + ns + "/events";
    }
    // DeleteOptions that delete only the object with this uid (a re-created
    // one of the same name is left); null (no body) for an empty uid.
    static Json::Value uid_precondition(const std::string &uid) {
        if (uid.empty()) return Json::Value();
        Json::Value b(Json::objectValue);
        b["preconditions"]["uid"] = uid;
        return b;
    }

  private:
    void send(const char *method, const std::string &path, const std::string &body,
              const char *ctype, JsonCb cb, uint64_t timeout_ms);
    HttpTransport &t_;
    ResponseObserver observer_;
    std::shared_ptr<const Credential> credential_;
    std::shared_ptr<const Impersonation> as_;
    std::string server_;
    uint64_t timeout_ms_;
};

}  // namespace sk::agent
