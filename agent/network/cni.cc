#include "agent/network/cni.h"

#include <arpa/inet.h>

#include <cstdlib>

#include "common/daemons/json.h"

namespace sk::agent {

std::string subnet_error(const std::string &cidr) {
    size_t slash = cidr.find('/');
    if (slash == std::string::npos) return "'" + cidr + "' is not a range a.b.c.d/n";
    std::string addr = cidr.substr(0, slash), len = cidr.substr(slash + 1);
    struct in_addr a {};
    if (inet_pton(AF_INET, addr.c_str(), &a) != 1) return "'" + addr + "' is not an IPv4 address";
    char *end = nullptr;
    long n = strtol(len.c_str(), &end, 10);
    if (len.empty() || *end || n < 8 || n > 30)
        return "the prefix length of '" + cidr + "' must be 8 to 30";
    uint32_t host = ntohl(a.s_addr) & (n == 32 ? 0u : (0xffffffffu >> n));
    if (host != 0) return "'" + cidr + "' has host bits set (its network address first)";
    return "";
}

bool interface_name_ok(const std::string &name) {
    if (name.empty() || name.size() > 15 || name == "." || name == "..") return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    return true;
}

std::vector<Json::Value> cni_plugins(const CniSettings &s, bool host_ports) {
    Json::Value bridge(Json::objectValue);
    bridge["type"] = "bridge";
    bridge["bridge"] = s.bridge;
    bridge["isGateway"] = true;  // the bridge holds the range's first address: pods' default route
    bridge["ipMasq"] = s.masquerade;
    bridge["hairpinMode"] = true;  // a pod reaches itself through its hostPort
    if (s.mtu) bridge["mtu"] = s.mtu;
    Json::Value ipam(Json::objectValue);
    ipam["type"] = "host-local";
    Json::Value range(Json::objectValue);
    range["subnet"] = s.subnet;
    ipam["ranges"] = Json::Value(Json::arrayValue);
    ipam["ranges"].append(Json::Value(Json::arrayValue));
    ipam["ranges"][0].append(range);
    Json::Value route(Json::objectValue);
    route["dst"] = "0.0.0.0/0";
    ipam["routes"] = Json::Value(Json::arrayValue);
    ipam["routes"].append(route);
    ipam["dataDir"] = s.ipam_dir;
    bridge["ipam"] = ipam;
    std::vector<Json::Value> v{bridge};
    if (host_ports) {
        Json::Value portmap(Json::objectValue);
        portmap["type"] = "portmap";
        portmap["capabilities"]["portMappings"] = true;
        v.push_back(portmap);
    }
    return v;
}

std::string cni_stdin(const Json::Value &plugin, const Json::Value &prev_result,
                      const std::vector<HostPort> &ports) {
    Json::Value in = plugin;
    in["cniVersion"] = kCniVersion;
    in["name"] = kCniNetworkName;
    if (!prev_result.isNull()) in["prevResult"] = prev_result;
    if (plugin["capabilities"]["portMappings"].asBool()) {
        Json::Value maps(Json::arrayValue);
        for (const auto &p : ports) {
            Json::Value m(Json::objectValue);
            m["hostPort"] = Json::UInt(p.host_port);
            m["containerPort"] = Json::UInt(p.container_port);
            m["protocol"] = p.protocol;
            if (!p.host_ip.empty()) m["hostIP"] = p.host_ip;
            maps.append(m);
        }
        in["runtimeConfig"]["portMappings"] = maps;
        in.removeMember("capabilities");
    }
    return json::write(in);
}

std::vector<std::string> cni_env(const CniSettings &s, const std::string &command,
                                 const std::string &container_id, const std::string &netns,
                                 const std::string &pod_ns, const std::string &pod_name) {
    return {"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + container_id, "CNI_NETNS=" + netns,
            "CNI_IFNAME=eth0", "CNI_PATH=" + s.plugin_dir,
            // What a kubelet passes; the standard plugins ignore them.
            "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=" + pod_ns + ";K8S_POD_NAME=" + pod_name +
                ";K8S_POD_INFRA_CONTAINER_ID=" + container_id,
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
}

Result<Json::Value> cni_result(int exit_code, const std::string &out, const std::string &err) {
    auto v = json::parse(out);
    if (exit_code == 0) {
        if (!v || !v->isObject())
            return fail(Error::Parse,
                        "the plugin's result is not a JSON object: " + out.substr(0, 200));
        return *v;
    }
    std::string why;
    if (v && v->isObject() && (*v)["msg"].isString()) {
        why = (*v)["msg"].asString();
        if ((*v)["details"].isString() && !(*v)["details"].asString().empty())
            why += ": " + (*v)["details"].asString();
    } else {
        why = err.empty() ? out : err;
        while (!why.empty() && (why.back() == '\n' || why.back() == ' '))
            why.pop_back();
        if (why.empty()) why = "exit code " + std::to_string(exit_code);
    }
    return fail(Error::Io, why.substr(0, 1024));
}

Result<std::string> cni_result_ip(const Json::Value &result) {
    const Json::Value &ips = result["ips"];
    if (ips.isArray())
        for (const auto &ip : ips) {
            std::string a = ip["address"].isString() ? ip["address"].asString() : "";
            std::string addr = a.substr(0, a.find('/'));
            struct in_addr in {};
            if (inet_pton(AF_INET, addr.c_str(), &in) == 1) return addr;
        }
    return fail(Error::Parse, "the network's result names no IPv4 address");
}

}  // namespace sk::agent
