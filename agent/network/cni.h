// The CNI side of a pod's own network (agent/network/pod_network.h): the
// network configuration list the agent runs with the standard plugins
// Debian ships (containernetworking-plugins: bridge with host-local IPAM,
// portmap), each plugin's stdin and environment as the CNI specification
// (1.0) has a runtime give them, and their results read back. Pure
// functions; unit-tested in tests/unit/test_cni.cc.
#pragma once

#include <string>
#include <vector>

#include <json/json.h>

#include "agent/core/pod_networks.h"
#include "common/result.h"

namespace sk::agent {

constexpr const char kCniVersion[] = "1.0.0";
constexpr const char kCniNetworkName[] = "slurm-k8s";

struct CniSettings {
    std::string plugin_dir = "/usr/lib/cni";  // CNI_PATH
    std::string bridge = "sk-pods0";          // the host's pod bridge (made by the plugin)
    std::string subnet;                       // the host's pod range, "10.244.3.0/24"
    std::string ipam_dir;                     // host-local's leases (root's)
    bool masquerade = true;                   // pods reach beyond the host (ipMasq)
    unsigned mtu = 0;                         // 0 = the plugin's (the bridge's)
};

// "" or what is wrong with an IPv4 range "a.b.c.d/n" (n 8..30, no host bits).
std::string subnet_error(const std::string &cidr);
// A Linux interface name: 1..15 of [A-Za-z0-9_.-].
bool interface_name_ok(const std::string &name);

// The plugins of the chain, in order: bridge (its IPAM host-local), then
// portmap when the pod has host ports.
std::vector<Json::Value> cni_plugins(const CniSettings &s, bool host_ports);
// Plugin `plugin`'s stdin: its configuration with the network's name and
// version, the previous plugin's result (null: none) and, for portmap, the
// pod's host ports as runtimeConfig.portMappings.
std::string cni_stdin(const Json::Value &plugin, const Json::Value &prev_result,
                      const std::vector<HostPort> &ports);
// The environment of a plugin run ("ADD" or "DEL") for the pod's namespace.
std::vector<std::string> cni_env(const CniSettings &s, const std::string &command,
                                 const std::string &container_id, const std::string &netns,
                                 const std::string &pod_ns, const std::string &pod_name);
// A plugin's answer: its result on exit 0, else the error it printed (the
// specification's {code, msg, details}) or its stderr, in words.
Result<Json::Value> cni_result(int exit_code, const std::string &out, const std::string &err);
// The pod's IPv4 address in a result (its first "ips" entry, without the
// prefix length).
Result<std::string> cni_result_ip(const Json::Value &result);

}  // namespace sk::agent
