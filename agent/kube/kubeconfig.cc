#include "agent/kube/kubeconfig.h"

#include <memory>

#include <json/json.h>

#include "common/daemons/base64.h"
#include "common/daemons/yaml.h"
#include "common/strings.h"

namespace sk::agent {

namespace {

std::string str(const Json::Value &o, const char *key) {
    const Json::Value &v = o[key];
    return v.isString() ? v.asString() : "";
}

std::string resolve(const std::string &p, const std::string &dir) {
    if (p.empty() || p[0] == '/') return p;
    return dir + "/" + p;
}

// The entry named `name` of a kubeconfig list (clusters, users, contexts):
// its inner object (entry[field]), or null.
const Json::Value *named(const Json::Value &root, const char *list, const std::string &name,
                         const char *field) {
    const Json::Value &l = root[list];
    if (!l.isArray()) return nullptr;
    for (const auto &e : l)
        if (e.isObject() && str(e, "name") == name && e[field].isObject()) return &e[field];
    return nullptr;
}

// `KEY-data` (base64 PEM) wins over `KEY` (a path, relative to the
// kubeconfig's directory), as kubectl reads them.
Status data_or_file(const Json::Value &o, const std::string &key, const std::string &dir,
                    std::string *data, std::string *file) {
    std::string b64 = str(o, (key + "-data").c_str());
    if (b64.empty()) {
        *file = resolve(str(o, key.c_str()), dir);
        return {};
    }
    std::string compact;
    for (char ch : b64)
        if (ch != '\n' && ch != '\r' && ch != ' ') compact += ch;
    auto raw = base64_decode(compact);
    if (!raw) return fail(Error::InvalidArgument, key + "-data: not base64");
    *data = *raw;
    return {};
}

Status read_cluster(const Json::Value &c, const std::string &dir, ApiCredentials *a) {
    a->server = str(c, "server");
    if (a->server.empty()) return fail(Error::InvalidArgument, "its cluster has no server");
    if (str(c, "insecure-skip-tls-verify") == "true")
        return fail(Error::InvalidArgument,
                    "insecure-skip-tls-verify is not supported: the agent always verifies the "
                    "API server (give certificate-authority or certificate-authority-data)");
    if (auto st = data_or_file(c, "certificate-authority", dir, &a->ca_data, &a->ca_file); !st)
        return st;
    a->tls_server_name = str(c, "tls-server-name");
    a->proxy_url = str(c, "proxy-url");
    return {};
}

Status read_exec(const Json::Value &e, const std::string &dir, ExecPlugin *x) {
    x->api_version = str(e, "apiVersion");
    if (x->api_version != "client.authentication.k8s.io/v1" &&
        x->api_version != "client.authentication.k8s.io/v1beta1")
        return fail(Error::InvalidArgument,
                    "exec: apiVersion '" + x->api_version +
                        "' is not supported (client.authentication.k8s.io/v1 or v1beta1)");
    x->command = str(e, "command");
    if (x->command.empty()) return fail(Error::InvalidArgument, "exec: no command");
    // kubectl's rule: a relative path (one with a '/') is relative to the
    // kubeconfig; a bare name is looked up in PATH.
    if (x->command.find('/') != std::string::npos)
        x->command =
            resolve(starts_with(x->command, "./") ? x->command.substr(2) : x->command, dir);
    for (const auto &arg : e["args"])
        if (arg.isString()) x->args.push_back(arg.asString());
    for (const auto &kv : e["env"]) {
        if (!kv.isObject() || str(kv, "name").empty())
            return fail(Error::InvalidArgument, "exec: env entries need a name and a value");
        x->env.emplace_back(str(kv, "name"), str(kv, "value"));
    }
    x->provide_cluster_info = str(e, "provideClusterInfo") == "true";
    if (str(e, "interactiveMode") == "Always")
        return fail(Error::InvalidArgument,
                    "exec: interactiveMode Always needs a terminal, which the agent has not "
                    "(use Never or IfAvailable)");
    return {};
}

Status read_user(const Json::Value &u, const std::string &dir, ApiCredentials *a) {
    if (u.isMember("auth-provider"))
        return fail(Error::InvalidArgument,
                    "auth-provider is not supported (kubectl removed it in 1.26): use an exec "
                    "credential plugin (exec:)");
    if (!str(u, "username").empty() || !str(u, "password").empty())
        return fail(Error::InvalidArgument,
                    "username/password (basic authentication) is not supported by Kubernetes");
    if (!str(u, "as").empty() || u.isMember("as-groups") || u.isMember("as-user-extra"))
        return fail(Error::InvalidArgument, "impersonation (as:) is not supported for the agent");
    a->token = str(u, "token");
    a->token_file = resolve(str(u, "tokenFile"), dir);
    if (auto st = data_or_file(u, "client-certificate", dir, &a->client_cert_data, &a->client_cert);
        !st)
        return st;
    if (auto st = data_or_file(u, "client-key", dir, &a->client_key_data, &a->client_key); !st)
        return st;
    bool has_cert = !a->client_cert.empty() || !a->client_cert_data.empty();
    bool has_key = !a->client_key.empty() || !a->client_key_data.empty();
    if (has_cert != has_key)
        return fail(Error::InvalidArgument,
                    "a client certificate needs its key (client-certificate and client-key, or "
                    "their -data)");
    if (u["exec"].isObject())
        if (auto st = read_exec(u["exec"], dir, &a->exec); !st) return st;
    if (!a->has_credential())
        return fail(Error::InvalidArgument,
                    "its user has no credential (token, tokenFile, client-certificate, exec)");
    return {};
}

}  // namespace

Result<ApiCredentials> parse_kubeconfig(std::string_view text, const std::string &dir,
                                        const std::string &context) {
    auto root = parse_yaml(text);
    if (!root) return fail(Error::InvalidArgument, "kubeconfig: " + root.message());
    if (!root->isObject()) return fail(Error::InvalidArgument, "kubeconfig: not a mapping");
    ApiCredentials a;
    a.context = context.empty() ? str(*root, "current-context") : context;
    if (a.context.empty())
        return fail(Error::InvalidArgument,
                    "kubeconfig: no current-context; set one or name it with kubeconfig_context");
    const Json::Value *ctx = named(*root, "contexts", a.context, "context");
    if (!ctx)
        return fail(Error::InvalidArgument, "kubeconfig: no context named '" + a.context + "'");
    std::string cluster = str(*ctx, "cluster"), user = str(*ctx, "user");
    const Json::Value *c = named(*root, "clusters", cluster, "cluster");
    if (!c)
        return fail(Error::InvalidArgument, "kubeconfig: context '" + a.context +
                                                "' names cluster '" + cluster +
                                                "', which is not in clusters");
    const Json::Value *u = named(*root, "users", user, "user");
    if (!u)
        return fail(Error::InvalidArgument, "kubeconfig: context '" + a.context + "' names user '" +
                                                user + "', which is not in users");
    if (auto st = read_cluster(*c, dir, &a); !st)
        return fail(Error::InvalidArgument,
                    "kubeconfig: cluster '" + cluster + "': " + st.message());
    if (auto st = read_user(*u, dir, &a); !st)
        return fail(Error::InvalidArgument, "kubeconfig: user '" + user + "': " + st.message());
    return a;
}

}  // namespace sk::agent
