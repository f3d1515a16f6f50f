#include "agent/controllers/env_resolver.h"

#include <cmath>
#include <cstdio>

#include "agent/kube/api_object.h"
#include "common/daemons/base64.h"
#include "common/daemons/json.h"
#include "common/k8s_names.h"

namespace sk::agent {
namespace {

void add_env_refs(const Json::Value &containers, std::set<ObjectRef> *out) {
    auto name_of = [](const Json::Value &obj, const char *ref) {
        return api::text(api::field(api::field(obj, ref), "name"));
    };
    for (const auto &c : api::items(containers)) {
        for (const auto &e : api::items(api::field(c, "env"))) {
            const Json::Value &vf = api::object(api::field(e, "valueFrom"));
            if (vf.isMember("configMapKeyRef"))
                out->insert({"configmaps", name_of(vf, "configMapKeyRef")});
            if (vf.isMember("secretKeyRef")) out->insert({"secrets", name_of(vf, "secretKeyRef")});
        }
        for (const auto &ef : api::items(api::field(c, "envFrom"))) {
            if (api::object(ef).isMember("configMapRef"))
                out->insert({"configmaps", name_of(ef, "configMapRef")});
            if (api::object(ef).isMember("secretRef"))
                out->insert({"secrets", name_of(ef, "secretRef")});
        }
    }
}

// Secret data is base64 on the wire, ConfigMap data plain: return plain.
Result<std::string> lookup_key(const FetchedObjects &objs, const std::string &kind,
                               const std::string &name, const std::string &key, bool optional,
                               const std::string &ns, bool *found) {
    *found = false;
    const char *what = kind == "secrets" ? "secret" : "configmap";
    auto it = objs.find({kind, name});
    if (it == objs.end()) {
        if (optional) return std::string();
        return fail(Error::Invalid, std::string(what) + " \"" + name + "\" not found");
    }
    const Json::Value &data = it->second["data"];
    if (data.isMember(key) && data[key].isString()) {
        *found = true;
        if (kind == "secrets") return base64_decode(data[key].asString());
        return data[key].asString();
    }
    if (optional) return std::string();
    return fail(Error::Invalid, "couldn't find key " + key + " in " +
                                    (kind == "secrets" ? "Secret " : "ConfigMap ") + ns + "/" +
                                    name);
}

Result<std::string> field_ref(const Json::Value &pod, const std::string &path,
                              const NodeFacts &node) {
    const Json::Value &md = pod["metadata"];
    if (path == "metadata.name") return md["name"].asString();
    if (path == "metadata.namespace") return md["namespace"].asString();
    if (path == "metadata.uid") return md["uid"].asString();
    if (path == "spec.nodeName") return node.node_name;
    if (path == "spec.serviceAccountName") return pod["spec"]["serviceAccountName"].asString();
    if (path == "status.hostIP" || path == "status.hostIPs") return node.node_ip;
    if (path == "status.podIP" || path == "status.podIPs")
        return node.pod_ip.empty() ? node.node_ip : node.pod_ip;
    for (const char *m : {"labels", "annotations"}) {
        std::string pre = std::string("metadata.") + m + "['";
        if (path.compare(0, pre.size(), pre) == 0 && path.size() > pre.size() + 2 &&
            path.compare(path.size() - 2, 2, "']") == 0) {
            std::string key = path.substr(pre.size(), path.size() - pre.size() - 2);
            return md[m][key].asString();
        }
    }
    return fail(Error::Invalid, "unsupported fieldRef fieldPath \"" + path + "\"");
}

Result<std::string> resource_ref(const Json::Value &container, const Json::Value &ref,
                                 const NodeFacts &node) {
    std::string res = ref["resource"].asString();
    auto dot = res.find('.');
    if (dot == std::string::npos) return fail(Error::Invalid, "bad resourceFieldRef " + res);
    std::string section = res.substr(0, dot), name = res.substr(dot + 1);
    if (section != "limits" && section != "requests")
        return fail(Error::Invalid, "bad resourceFieldRef " + res);
    const Json::Value &r = container["resources"];
    std::string q = r[section][name].asString();
    if (q.empty() && section == "requests") q = r["limits"][name].asString();
    int64_t milli;
    if (!q.empty()) {
        auto m = parse_quantity_milli(q);
        if (!m) return m.failure();
        milli = *m;
    } else if (name == "cpu") {
        milli = static_cast<int64_t>(node.cpus) * 1000;
    } else if (name == "memory") {
        milli = static_cast<int64_t>(node.memory_mib) * 1024 * 1024 * 1000;
    } else {
        return fail(Error::Invalid, "unsupported resourceFieldRef " + res);
    }
    int64_t div = 1000;
    if (ref.isMember("divisor")) {
        auto d = parse_quantity_milli(ref["divisor"].asString());
        if (!d || *d <= 0) return fail(Error::Invalid, "bad divisor in resourceFieldRef " + res);
        div = *d;
    }
    return std::to_string((milli + div - 1) / div);  // the kubelet rounds up
}

// A volume's files: path -> bytes (proto::PodFiles' inner map).
using VolumeFiles = std::map<std::string, std::string>;

// A key of a ConfigMap (its text) or a Secret (base64, as the API gives it)
// as the file's bytes.
Result<std::string> object_value(const Json::Value &data, const std::string &key, bool secret,
                                 const std::string &name) {
    std::string raw = data[key].asString();
    if (!secret) return raw;
    auto bytes = base64_decode(raw);
    if (!bytes)
        return fail(Error::Invalid,
                    "key " + key + " of secret \"" + name + "\" is not valid base64");
    return *bytes;
}

// The keys of a ConfigMap or Secret source (a volume or a projected source)
// as files: its items, or all its keys.
Status add_object_files(const Json::Value &src, bool secret, const std::string &name,
                        const FetchedObjects &objs, VolumeFiles *entries) {
    auto it = objs.find({secret ? "secrets" : "configmaps", name});
    if (it == objs.end()) {
        if (src["optional"].asBool()) return {};
        return fail(Error::Invalid,
                    std::string(secret ? "secret" : "configmap") + " \"" + name + "\" not found");
    }
    const Json::Value &data = it->second["data"];
    if (src.isMember("items")) {
        for (const auto &item : src["items"]) {
            std::string k = item["key"].asString();
            if (!data.isMember(k))
                return fail(Error::Invalid, "couldn't find key " + k + " in " + name);
            auto v = object_value(data, k, secret, name);
            if (!v) return v.failure();
            (*entries)[item["path"].asString()] = std::move(*v);
        }
    } else {
        for (const auto &k : data.getMemberNames()) {
            auto v = object_value(data, k, secret, name);
            if (!v) return v.failure();
            (*entries)[k] = std::move(*v);
        }
    }
    return {};
}

// metadata.labels / metadata.annotations as a downwardAPI file holds them:
// key="value" lines, sorted by key, the value quoted as Go's %q does.
std::string key_value_lines(const Json::Value &map) {
    std::string out;
    for (const auto &k : map.getMemberNames()) {  // jsoncpp sorts the names
        std::string v = map[k].asString(), q;
        for (unsigned char ch : v) {
            if (ch == '"' || ch == '\\') {
                q += '\\';
                q += static_cast<char>(ch);
            } else if (ch == '\n') {
                q += "\\n";
            } else if (ch == '\t') {
                q += "\\t";
            } else if (ch < 0x20 || ch == 0x7f) {
                char b[8];
                snprintf(b, sizeof b, "\\x%02x", ch);
                q += b;
            } else {
                q += static_cast<char>(ch);
            }
        }
        out += (out.empty() ? "" : "\n") + k + "=\"" + q + "\"";
    }
    return out;
}

// A downwardAPI item (a volume's or a projected source's): fieldRef or
// resourceFieldRef of a named container.
Result<std::string> downward_item(const Json::Value &pod, const Json::Value &item,
                                  const NodeFacts &node) {
    if (item.isMember("fieldRef")) {
        std::string path = item["fieldRef"]["fieldPath"].asString();
        if (path == "metadata.labels" || path == "metadata.annotations")
            return key_value_lines(pod["metadata"][path.substr(9)]);
        return field_ref(pod, path, node);
    }
    if (item.isMember("resourceFieldRef")) {
        const Json::Value &ref = item["resourceFieldRef"];
        std::string cname = ref["containerName"].asString();
        for (const char *list : {"containers", "initContainers"})
            for (const auto &c : api::items(pod["spec"][list]))
                if (c["name"].asString() == cname) return resource_ref(c, ref, node);
        return fail(Error::Invalid, "resourceFieldRef: no container \"" + cname + "\"");
    }
    return fail(Error::Invalid, "downwardAPI item " + item["path"].asString() +
                                    ": neither fieldRef nor resourceFieldRef");
}

Status add_downward_files(const Json::Value &pod, const Json::Value &items, const NodeFacts &node,
                          VolumeFiles *entries) {
    for (const auto &item : api::items(items)) {
        auto v = downward_item(pod, item, node);
        if (!v) return v.failure();
        (*entries)[item["path"].asString()] = std::move(*v);
    }
    return {};
}

// A secret or configMap volume (`source` false: its secretName) or projected
// source (true: its name): its files into *entries, the outcome in *st.
// False when `v` is neither kind.
bool add_secret_or_config_map(const Json::Value &v, bool source, const FetchedObjects &objs,
                              VolumeFiles *entries, Status *st) {
    if (v.isMember("secret")) {
        const Json::Value &sec = v["secret"];
        *st = add_object_files(sec, true, sec[source ? "name" : "secretName"].asString(), objs,
                               entries);
        return true;
    }
    if (v.isMember("configMap")) {
        *st = add_object_files(v["configMap"], false, v["configMap"]["name"].asString(), objs,
                               entries);
        return true;
    }
    return false;
}

Result<proto::PodFiles> volume_files(const Json::Value &pod, const FetchedObjects &objs,
                                     const NodeFacts &node) {
    proto::PodFiles files;
    for (const auto &v : pod["spec"]["volumes"]) {
        std::string vname = v["name"].asString();
        VolumeFiles entries;
        Status st;
        if (add_secret_or_config_map(v, false, objs, &entries, &st)) {
            // done
        } else if (v.isMember("downwardAPI")) {
            st = add_downward_files(pod, v["downwardAPI"]["items"], node, &entries);
        } else if (v.isMember("projected")) {
            for (const auto &src : api::items(v["projected"]["sources"])) {
                if (add_secret_or_config_map(src, true, objs, &entries, &st)) {
                    // done
                } else if (src.isMember("downwardAPI")) {
                    st = add_downward_files(pod, src["downwardAPI"]["items"], node, &entries);
                } else if (src.isMember("serviceAccountToken")) {
                    std::string path = src["serviceAccountToken"]["path"].asString();
                    auto it = objs.find(token_ref(vname, path));
                    if (it == objs.end() || !it->second["status"]["token"].isString())
                        st = fail(Error::Invalid, "volume " + vname + ": no token for " + path +
                                                      " (the TokenRequest gave none)");
                    else
                        entries[path] = it->second["status"]["token"].asString();
                } else {
                    st = fail(Error::Invalid, "volume " + vname +
                                                  ": projected sources may be secret, configMap, "
                                                  "downwardAPI or serviceAccountToken");
                }
                if (!st) break;
            }
        } else {
            continue;
        }
        if (!st) return st.failure();
        files[vname] = entries;
    }
    return files;
}

}  // namespace

proto::PodFiles object_volume_files(const Json::Value &pod, const FetchedObjects &objs) {
    proto::PodFiles files;
    for (const auto &v : api::items(pod["spec"]["volumes"])) {
        VolumeFiles entries;
        Status st;
        if (add_secret_or_config_map(v, false, objs, &entries, &st)) {
            // done
        } else if (v.isMember("projected")) {
            for (const auto &src : api::items(v["projected"]["sources"]))
                if (add_secret_or_config_map(src, true, objs, &entries, &st) && !st) break;
        } else {
            continue;
        }
        if (st && !entries.empty()) files[v["name"].asString()] = entries;
    }
    return files;
}

std::set<ObjectRef> volume_objects(const Json::Value &pod) {
    std::set<ObjectRef> out;
    for (const auto &v : api::items(api::field(api::field(pod, "spec"), "volumes"))) {
        const Json::Value &cm = api::field(v, "configMap");
        const Json::Value &sec = api::field(v, "secret");
        if (api::object(v).isMember("configMap"))
            out.insert({"configmaps", api::text(api::field(cm, "name"))});
        if (api::object(v).isMember("secret"))
            out.insert({"secrets", api::text(api::field(sec, "secretName"))});
        for (const auto &src : api::items(api::field(api::field(v, "projected"), "sources"))) {
            if (api::object(src).isMember("configMap"))
                out.insert(
                    {"configmaps", api::text(api::field(api::field(src, "configMap"), "name"))});
            if (api::object(src).isMember("secret"))
                out.insert({"secrets", api::text(api::field(api::field(src, "secret"), "name"))});
        }
    }
    return out;
}

std::set<ObjectRef> referenced_objects(const Json::Value &pod) {
    std::set<ObjectRef> out = volume_objects(pod);
    const Json::Value &spec = api::field(pod, "spec");
    add_env_refs(api::field(spec, "containers"), &out);
    add_env_refs(api::field(spec, "initContainers"), &out);
    for (const auto &ref : api::items(api::field(spec, "imagePullSecrets")))
        if (!api::text(api::field(ref, "name")).empty())
            out.insert({"secrets", api::text(api::field(ref, "name"))});
    return out;
}

std::string pull_auth(const Json::Value &pod, const FetchedObjects &objects,
                      std::vector<std::string> *missing) {
    Json::Value auths(Json::objectValue);
    for (const auto &ref : api::items(api::field(api::field(pod, "spec"), "imagePullSecrets"))) {
        std::string name = api::text(api::field(ref, "name"));
        if (name.empty()) continue;
        auto it = objects.find({"secrets", name});
        const Json::Value *data = it == objects.end() ? nullptr : &api::field(it->second, "data");
        std::string type = it == objects.end() ? "" : api::text(api::field(it->second, "type"));
        const char *key = type == "kubernetes.io/dockercfg" ? ".dockercfg" : ".dockerconfigjson";
        Result<std::string> raw = fail(Error::NotFound, "absent");
        if (data && api::field(*data, key).isString())
            raw = base64_decode(api::text(api::field(*data, key)));
        Result<Json::Value> doc = raw ? json::parse(*raw) : Result<Json::Value>(raw.failure());
        const Json::Value *regs = nullptr;
        if (doc && doc->isObject())
            regs = type == "kubernetes.io/dockercfg" ? &*doc : &api::field(*doc, "auths");
        if (!regs || !regs->isObject()) {
            if (missing) missing->push_back(name);
            continue;
        }
        for (const auto &reg : regs->getMemberNames()) {
            const Json::Value &e = (*regs)[reg];
            if (auths.isMember(reg) || !e.isObject()) continue;
            Json::Value entry(Json::objectValue);
            if (e["auth"].isString())
                entry["auth"] = e["auth"];
            else if (e["username"].isString() && e["password"].isString())
                entry["auth"] =
                    base64_encode(e["username"].asString() + ":" + e["password"].asString());
            else
                continue;
            auths[reg] = entry;
        }
    }
    if (auths.empty()) return "";
    Json::Value out(Json::objectValue);
    out["auths"] = auths;
    return json::write(out);
}

ObjectRef token_ref(const std::string &volume, const std::string &path) {
    return {kTokenKind, volume + "/" + path};
}

std::vector<TokenNeed> token_requests(const Json::Value &pod) {
    std::vector<TokenNeed> out;
    const Json::Value &spec = api::field(pod, "spec");
    std::string sa = api::text(api::field(spec, "serviceAccountName"));
    if (sa.empty()) sa = "default";  // what the ServiceAccount admission sets
    for (const auto &v : api::items(api::field(spec, "volumes")))
        for (const auto &src : api::items(api::field(api::field(v, "projected"), "sources"))) {
            const Json::Value &t = api::field(src, "serviceAccountToken");
            if (!t.isObject()) continue;
            TokenNeed n;
            n.ref = token_ref(api::text(api::field(v, "name")), api::text(api::field(t, "path")));
            n.service_account = sa;
            n.audience = api::text(api::field(t, "audience"));
            const Json::Value &exp = api::field(t, "expirationSeconds");
            n.expiration_s = exp.isIntegral() ? exp.asInt64() : 3600;
            out.push_back(n);
        }
    return out;
}

Result<std::string> token_request_path(const std::string &ns, const TokenNeed &need) {
    if (!k8s::is_dns1123_label(ns) || !k8s::is_dns1123_subdomain(need.service_account))
        return fail(Error::Invalid, "serviceAccountName \"" + need.service_account.substr(0, 64) +
                                        "\" in namespace \"" + ns.substr(0, 64) +
                                        "\" is not a valid name");
    return "/api/v1/namespaces/" + ns + "/serviceaccounts/" + need.service_account + "/token";
}

Json::Value token_request_body(const Json::Value &pod, const TokenNeed &need) {
    Json::Value b(Json::objectValue);
    b["apiVersion"] = "authentication.k8s.io/v1";
    b["kind"] = "TokenRequest";
    if (!need.audience.empty()) b["spec"]["audiences"].append(need.audience);
    b["spec"]["expirationSeconds"] = Json::Int64(need.expiration_s);
    Json::Value &ref = b["spec"]["boundObjectRef"];
    ref["apiVersion"] = "v1";
    ref["kind"] = "Pod";
    ref["name"] = api::object_meta(pod).name;
    ref["uid"] = api::object_meta(pod).uid;
    return b;
}

namespace {

Result<proto::PodRun> resolve_fields(const Json::Value &pod_in, const FetchedObjects &objs,
                                     const NodeFacts &node) {
    Json::Value pod = pod_in;
    std::string ns = pod["metadata"]["namespace"].asString();
    for (const char *list : {"initContainers", "containers"}) {
        if (!pod["spec"].isMember(list)) continue;
        for (auto &c : pod["spec"][list]) {
            Json::Value env(Json::arrayValue);
            // The API server for in-cluster clients, before everything of the
            // pod's own (which may override it), as the kubelet sets it.
            if (!node.api_host.empty()) {
                for (const char *k : {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
                                      "KUBERNETES_SERVICE_PORT_HTTPS"}) {
                    Json::Value e(Json::objectValue);
                    e["name"] = k;
                    e["value"] =
                        k == std::string("KUBERNETES_SERVICE_HOST") ? node.api_host : node.api_port;
                    env.append(e);
                }
            }
            // envFrom first: explicit env entries override them, as in the kubelet.
            for (const auto &ef : c["envFrom"]) {
                bool secret = ef.isMember("secretRef");
                const Json::Value &ref = secret ? ef["secretRef"] : ef["configMapRef"];
                std::string kind = secret ? "secrets" : "configmaps";
                auto it = objs.find({kind, ref["name"].asString()});
                if (it == objs.end()) {
                    if (ref["optional"].asBool()) continue;
                    return fail(Error::Invalid, std::string(secret ? "secret" : "configmap") +
                                                    " \"" + ref["name"].asString() +
                                                    "\" not found");
                }
                for (const auto &k : it->second["data"].getMemberNames()) {
                    Json::Value e(Json::objectValue);
                    e["name"] = ef["prefix"].asString() + k;
                    std::string raw = it->second["data"][k].asString();
                    if (secret) {
                        auto d = base64_decode(raw);
                        if (!d) return d.failure();
                        raw = *d;
                    }
                    e["value"] = raw;
                    env.append(e);
                }
            }
            for (const auto &e : c["env"]) {
                Json::Value out(Json::objectValue);
                out["name"] = e["name"];
                if (!e.isMember("valueFrom")) {
                    out["value"] = e["value"].asString();
                    env.append(out);
                    continue;
                }
                const Json::Value &vf = e["valueFrom"];
                Result<std::string> v = std::string();
                bool found = true;
                if (vf.isMember("configMapKeyRef") || vf.isMember("secretKeyRef")) {
                    bool secret = vf.isMember("secretKeyRef");
                    const Json::Value &r = secret ? vf["secretKeyRef"] : vf["configMapKeyRef"];
                    v = lookup_key(objs, secret ? "secrets" : "configmaps", r["name"].asString(),
                                   r["key"].asString(), r["optional"].asBool(), ns, &found);
                } else if (vf.isMember("fieldRef")) {
                    v = field_ref(pod_in, vf["fieldRef"]["fieldPath"].asString(), node);
                } else if (vf.isMember("resourceFieldRef")) {
                    v = resource_ref(c, vf["resourceFieldRef"], node);
                } else {
                    v = fail(Error::Invalid,
                             "env " + e["name"].asString() + ": unsupported valueFrom");
                }
                if (!v) return v.failure();
                if (!found) continue;  // optional and absent: the variable is not set
                out["value"] = *v;
                env.append(out);
            }
            c.removeMember("envFrom");
            if (env.size() || c.isMember("env")) c["env"] = env;
        }
    }
    auto files = volume_files(pod, objs, node);
    if (!files) return files.failure();
    // The pod's addresses, as the agent reports them (pod_status_patch.h):
    // the shim's probes dial status.podIP when they name no host, as a
    // kubelet does. The rest of the status is the API server's.
    if (!node.node_ip.empty()) {
        if (!pod["status"].isObject()) pod["status"] = Json::Value(Json::objectValue);
        Json::Value &st = pod["status"];
        st["hostIP"] = node.node_ip;
        st["podIP"] = node.pod_ip.empty() ? node.node_ip : node.pod_ip;
        Json::Value ip(Json::objectValue);
        ip["ip"] = st["podIP"];
        st["podIPs"] = Json::Value(Json::arrayValue);
        st["podIPs"].append(ip);
    }
    return proto::make_pod_run(std::move(pod), std::move(*files), pull_auth(pod_in, objs, nullptr));
}

}  // namespace

// The pod comes from the API server: a field of an unexpected JSON type (an
// env list that is a string, a name that is an object) makes jsoncpp throw.
// That is a pod the kubelet would refuse too, not a reason to abandon the
// controller's callback.
Result<proto::PodRun> resolve_pod(const Json::Value &pod, const FetchedObjects &objs,
                                  const NodeFacts &node) {
    try {
        return resolve_fields(pod, objs, node);
    } catch (const Json::Exception &e) {
        return fail(Error::Invalid, std::string("malformed pod object: ") + e.what());
    }
}

std::optional<std::pair<std::string, std::string>> api_endpoint(const std::string &url) {
    auto scheme = url.find("://");
    if (scheme == std::string::npos) return std::nullopt;
    std::string rest = url.substr(scheme + 3);
    if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
    std::string host, port = url.compare(0, scheme, "http") == 0 ? "80" : "443";
    if (!rest.empty() && rest[0] == '[') {  // [IPv6]:port
        auto close = rest.find(']');
        if (close == std::string::npos) return std::nullopt;
        host = rest.substr(1, close - 1);
        if (close + 1 < rest.size()) {
            if (rest[close + 1] != ':') return std::nullopt;
            port = rest.substr(close + 2);
        }
    } else {
        auto colon = rest.rfind(':');
        host = rest.substr(0, colon);
        if (colon != std::string::npos) port = rest.substr(colon + 1);
    }
    if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    return std::make_pair(host, port);
}

Result<int64_t> parse_quantity_milli(const std::string &q) {
    size_t i = 0;
    while (i < q.size() && (isdigit(static_cast<unsigned char>(q[i])) || q[i] == '.'))
        i++;
    std::string num = q.substr(0, i), suf = q.substr(i);
    if (num.empty() || num == "." || num.find('.') != num.rfind('.'))
        return fail(Error::Invalid, "'" + q + "' is not a quantity");
    double v = std::stod(num);
    double mult;
    if (suf.empty())
        mult = 1;
    else if (suf == "m")
        mult = 1e-3;
    else if (suf == "k")
        mult = 1e3;
    else if (suf == "M")
        mult = 1e6;
    else if (suf == "G")
        mult = 1e9;
    else if (suf == "T")
        mult = 1e12;
    else if (suf == "P")
        mult = 1e15;
    else if (suf == "Ki")
        mult = 1024.0;
    else if (suf == "Mi")
        mult = 1024.0 * 1024;
    else if (suf == "Gi")
        mult = 1024.0 * 1024 * 1024;
    else if (suf == "Ti")
        mult = 1024.0 * 1024 * 1024 * 1024;
    else if (suf == "Pi")
        mult = 1024.0 * 1024 * 1024 * 1024 * 1024;
    else if (suf.size() > 1 && (suf[0] == 'e' || suf[0] == 'E') &&
             suf.find_first_not_of("0123456789", 1) == std::string::npos && suf.size() < 4)
        mult = std::pow(10.0, std::stoi(suf.substr(1)));
    else
        return fail(Error::Invalid, "'" + q + "' has an unknown suffix");
    double milli = std::ceil(v * mult * 1000.0 - 1e-6);
    if (milli > 9e18) return fail(Error::Invalid, "'" + q + "' is too large");
    return static_cast<int64_t>(milli);
}

}  // namespace sk::agent
