#include "agent/kubelet/kubelet_auth.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include <cstdio>
#include "common/strings.h"

namespace sk::agent {

namespace {

bool has_prefix_path(const std::string &path, const std::string &base) {
    // The kubelet's isSubpath: the path itself or below it.
    return path == base || (path.size() > base.size() && path.compare(0, base.size(), base) == 0 &&
                            (base.back() == '/' || path[base.size()] == '/'));
}

}  // namespace

KubeletAttributes kubelet_request_attributes(const std::string &method, const std::string &path,
                                             const std::string &node) {
    KubeletAttributes a;
    a.node = node;
    if (method == "POST")
        a.verb = "create";
    else if (method == "GET")
        a.verb = "get";
    else if (method == "PUT")
        a.verb = "update";
    else if (method == "PATCH")
        a.verb = "patch";
    else if (method == "DELETE")
        a.verb = "delete";
    if (has_prefix_path(path, "/stats"))
        a.subresource = "stats";
    else if (has_prefix_path(path, "/metrics"))
        a.subresource = "metrics";
    else if (has_prefix_path(path, "/logs"))
        a.subresource = "log";
    else if (has_prefix_path(path, "/checkpoint"))
        a.subresource = "checkpoint";
    else
        a.subresource = "proxy";
    return a;
}

Json::Value token_review_request(const std::string &token) {
    Json::Value r(Json::objectValue);
    r["apiVersion"] = "authentication.k8s.io/v1";
    r["kind"] = "TokenReview";
    r["spec"]["token"] = token;
    return r;
}

Result<KubeletUser> token_review_user(const Json::Value &answer) {
    if (!answer.isObject() || !answer["status"].isObject())
        return fail(Error::Parse, "the TokenReview answer has no status");
    const Json::Value &st = answer["status"];
    // Go's omitempty: a review that did not authenticate has no
    // `authenticated` at all.
    if (!st["authenticated"].isNull() && !st["authenticated"].isBool())
        return fail(Error::Parse, "the TokenReview answer's status.authenticated is not a bool");
    if (!st["authenticated"].asBool()) {
        std::string why = st["error"].isString() ? st["error"].asString() : "";
        return fail(Error::Refused, why.empty() ? "token not authenticated" : why);
    }
    const Json::Value &u = st["user"];
    if (!u.isObject() || !u["username"].isString() || u["username"].asString().empty())
        return fail(Error::Parse, "the TokenReview answer names no user");
    KubeletUser user;
    user.name = u["username"].asString();
    if (u["uid"].isString()) user.uid = u["uid"].asString();
    if (u["groups"].isArray())
        for (const auto &g : u["groups"])
            if (g.isString()) user.groups.push_back(g.asString());
    return user;
}

Json::Value access_review_request(const KubeletUser &user, const KubeletAttributes &attrs) {
    Json::Value r(Json::objectValue);
    r["apiVersion"] = "authorization.k8s.io/v1";
    r["kind"] = "SubjectAccessReview";
    Json::Value &spec = r["spec"];
    spec["user"] = user.name;
    if (!user.uid.empty()) spec["uid"] = user.uid;
    Json::Value groups(Json::arrayValue);
    for (const auto &g : user.groups)
        groups.append(g);
    spec["groups"] = groups;
    Json::Value &ra = spec["resourceAttributes"];
    ra["verb"] = attrs.verb;
    ra["group"] = "";
    ra["version"] = "v1";
    ra["resource"] = "nodes";
    ra["subresource"] = attrs.subresource;
    ra["name"] = attrs.node;
    return r;
}

Result<bool> access_review_allowed(const Json::Value &answer, std::string *reason) {
    if (!answer.isObject() || !answer["status"].isObject() || !answer["status"]["allowed"].isBool())
        return fail(Error::Parse, "the SubjectAccessReview answer has no status.allowed");
    if (reason)
        *reason =
            answer["status"]["reason"].isString() ? answer["status"]["reason"].asString() : "";
    return answer["status"]["allowed"].asBool();
}

std::string kubelet_forbidden_text(const std::string &user, const KubeletAttributes &attrs) {
    return "Forbidden (user=" + user + ", verb=" + attrs.verb +
           ", resource=nodes, subresource=" + attrs.subresource + ")";
}

std::string kubelet_authorization_error_text(const std::string &user,
                                             const KubeletAttributes &attrs) {
    return "Authorization error (user=" + user + ", verb=" + attrs.verb +
           ", resource=nodes, subresource=" + attrs.subresource + ")";
}

std::string token_cache_key(const std::string &token) {
    unsigned char digest[32];
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, token.data(), token.size(), digest) != 0)
        return "";  // no key: not cached
    return hex_encode(digest, sizeof digest);
}

}  // namespace sk::agent
