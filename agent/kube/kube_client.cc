#include "agent/kube/kube_client.h"

#include "agent/kube/api_object.h"
#include "common/daemons/json.h"

namespace sk::agent {

Failure classify_http(long status, const std::string &body, const std::string &what,
                      bool node_identity, uint32_t retry_after_s) {
    std::string reason, message;
    if (auto v = json::parse(body); v && v->isObject()) {
        reason = api::text((*v)["reason"]);
        message = api::text((*v)["message"]);
    }
    if (message.empty()) message = body.substr(0, 200);
    std::string m =
        what + ": HTTP " + std::to_string(status) + (message.empty() ? "" : ": " + message);
    switch (status) {
        case 404:
            return fail(Error::NotFound, m);
        case 409:
            return fail(reason == "AlreadyExists" ? Error::AlreadyExists : Error::Conflict, m);
        case 410:
            return fail(Error::Gone, m);
        case 401:
            return fail(Error::Unauthorized, m + " (check the agent's API credentials)");
        case 403:
            // The agent's identity may not act as this node
            // (node_identity = impersonate): its impersonation rules.
            if (message.find("cannot impersonate") != std::string::npos)
                return fail(Error::Forbidden,
                            m + " (the agent's identity may not act as this node: bind it to the "
                                "names etc/slurm-k8s-impersonation-rbac prints for its Slurm nodes "
                                "and slots, docs/admin-guide.md)");
            // A node identity's rights are the Node authorizer's and
            // NodeRestriction's, not a binding of etc/rbac.yaml.
            return fail(Error::Forbidden,
                        node_identity ? m : m + " (check the agent's RBAC: etc/rbac.yaml)");
        case 400:
        case 415:
        case 422:
            return fail(Error::Invalid, m);
        default:
            break;
    }
    if (status == 429 || status >= 500 || status == 0) {
        Failure f = fail(Error::Transient, m);
        f.retry_after_s = retry_after_s;
        return f;
    }
    return fail(Error::Invalid, m);
}

Result<Json::Value> decode_response(const Result<HttpResponse> &r, const std::string &what,
                                    bool node_identity) {
    if (!r) return fail(r.error(), r.message());
    if (r->status < 200 || r->status >= 300)
        return classify_http(r->status, r->body, what, node_identity, r->retry_after_s);
    if (r->body.empty()) return Json::Value(Json::objectValue);
    auto v = json::parse(r->body);
    if (!v) return fail(Error::Transient, what + ": malformed response: " + v.message());
    return v;
}

std::string url_escape(const std::string &s) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

void KubeClient::send(const char *method, const std::string &path, const std::string &body,
                      const char *ctype, JsonCb cb, uint64_t timeout_ms) {
    HttpRequest req;
    req.method = method;
    req.url = server_ + path;
    req.body = body;
    if (ctype) req.content_type = ctype;
    req.timeout_ms = timeout_ms;
    req.credential = credential_;
    req.impersonate = as_;
    std::string what = std::string(method) + " " + path;
    // The completion may come after this client is gone (a virtual node's
    // client dies with its node while a request is in flight): it touches
    // nothing of *this, only copies (the transport outlives its clients).
    t_.request(std::move(req), [obs = observer_, method, cb = std::move(cb), what,
                                node = acts_as_node()](Result<HttpResponse> r) {
        if (obs) obs(method, r ? static_cast<int>(r->status) : 0);
        cb(decode_response(r, what, node));
    });
}

void KubeClient::get(const std::string &path, JsonCb cb) {
    send("GET", path, "", nullptr, std::move(cb), timeout_ms_);
}
void KubeClient::post(const std::string &path, const Json::Value &body, JsonCb cb) {
    send("POST", path, json::write(body), "application/json", std::move(cb), timeout_ms_);
}
void KubeClient::put(const std::string &path, const Json::Value &body, JsonCb cb) {
    send("PUT", path, json::write(body), "application/json", std::move(cb), timeout_ms_);
}
void KubeClient::patch(const std::string &path, const Json::Value &body, const char *type,
                       JsonCb cb) {
    send("PATCH", path, json::write(body), type, std::move(cb), timeout_ms_);
}
void KubeClient::del(const std::string &path, const Json::Value &body, JsonCb cb) {
    send("DELETE", path, body.isNull() ? "" : json::write(body),
         body.isNull() ? nullptr : "application/json", std::move(cb), timeout_ms_);
}

uint64_t KubeClient::watch(const std::string &path, const EventCb &on_event, const EndCb &on_end) {
    HttpRequest req;
    req.url = server_ + path;
    req.timeout_ms = 0;
    req.credential = credential_;
    req.impersonate = as_;
    auto parser = std::make_shared<WatchParser>();
    auto failed = std::make_shared<Status>();
    auto ids = std::make_shared<uint64_t>(0);
    uint64_t id = t_.stream(
        std::move(req),
        [&t = t_, parser, failed, on_event, on_end, ids](std::string_view chunk) {
            if (!*failed) return;
            auto evs = parser->feed(chunk);
            if (!evs) {
                *failed = evs.failure();
                t.cancel(*ids);  // the transport's end callback is not called after this
                on_end(*failed);
                return;
            }
            for (const auto &e : *evs)
                on_event(e);
        },
        [obs = observer_, path, failed, on_end,
         node = credential_ != nullptr](Result<HttpResponse> r) {
            if (obs) obs("WATCH", r ? static_cast<int>(r->status) : 0);
            if (!*failed) return on_end(*failed);
            if (!r) return on_end(r.failure());
            if (r->status < 200 || r->status >= 300)
                return on_end(
                    classify_http(r->status, r->body, "watch " + path, node, r->retry_after_s));
            on_end(Status());
        });
    *ids = id;
    return id;
}

}  // namespace sk::agent
