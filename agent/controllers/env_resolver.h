// Resolves a pod's env references and configMap/secret volumes into plain
// values before the pod goes to the shim (the shim never sees the API).
// Two phases so that the fetching (async, I/O) stays outside: list what is
// needed, fetch it, then resolve purely.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <json/json.h>

#include "common/daemons/shim_protocol.h"
#include "common/result.h"

namespace sk::agent {

// (kind, name) in the pod's namespace; kind is "configmaps" or "secrets".
using ObjectRef = std::pair<std::string, std::string>;

std::set<ObjectRef> referenced_objects(const Json::Value &pod);
// Those of the pod's volumes only (configMap, secret, projected sources).
std::set<ObjectRef> volume_objects(const Json::Value &pod);

// The fetched objects; a ref absent from the map did not exist (404).
// Service account tokens for projected volumes are kept beside them under
// token_ref(volume, path): the TokenRequest the API answered.
using FetchedObjects = std::map<ObjectRef, Json::Value>;

// A projected volume's serviceAccountToken source: the TokenRequest the
// agent makes for it (as the kubelet does, bound to the pod).
constexpr const char *kTokenKind = "serviceaccounts/token";
struct TokenNeed {
    ObjectRef ref;                // token_ref(volume, path)
    std::string service_account;  // spec.serviceAccountName, "default" when unset
    std::string audience;         // "" = the API server's own
    int64_t expiration_s = 3600;
};
ObjectRef token_ref(const std::string &volume, const std::string &path);
std::vector<TokenNeed> token_requests(const Json::Value &pod);
// POST body for .../serviceaccounts/SA/token: audiences, expirationSeconds,
// boundObjectRef = the pod (name and uid).
Json::Value token_request_body(const Json::Value &pod, const TokenNeed &need);
// Where it is POSTed; Invalid when the namespace or ServiceAccount name is
// not a name (the API server validates both; the agent does not rely on it
// for a path).
Result<std::string> token_request_path(const std::string &ns, const TokenNeed &need);

struct NodeFacts {
    std::string node_name, node_ip;
    uint32_t cpus = 1;  // allocatable, for resourceFieldRef without a limit
    uint64_t memory_mib = 1024;
    // The API server as pods reach it: KUBERNETES_SERVICE_HOST/PORT ("" =
    // not set). See api_endpoint.
    std::string api_host = {}, api_port = {};
    // The pod's own network's address (agent/core/pod_networks.h); "" = the
    // node's (status.podIP is node_ip then).
    std::string pod_ip = {};
};

// Host and port of an API server URL ("https://10.0.0.1:6443",
// "https://[fd00::1]", "https://api.example.org:443/prefix"), as in-cluster
// clients take them from KUBERNETES_SERVICE_HOST/PORT. The kubelet puts the
// `kubernetes` Service's clusterIP there, which routes only through
// kube-proxy; a Slurm node has none, so pods get the address the agent
// itself reaches the API server at. nullopt: no usable URL.
std::optional<std::pair<std::string, std::string>> api_endpoint(const std::string &url);

// What the runtime runs (proto::PodRun, made by proto::make_pod_run): the
// pod with every env valueFrom replaced by "value" and
// status.hostIP/podIP/podIPs the node's IP (when node_ip is set), the files
// of its volumes ({volume: {path: bytes}}: ConfigMap keys, Secret keys
// decoded, downwardAPI items, projected tokens), pull_auth() when not "". A
// missing required object or key fails (Invalid) with the message the
// kubelet would show ("configmap \"cfg\" not found", "couldn't find key k in
// Secret ns/s"); so does a pod the shim would refuse (no metadata.uid, too
// many files).
Result<proto::PodRun> resolve_pod(const Json::Value &pod, const FetchedObjects &objects,
                                  const NodeFacts &node);

// For a running pod's refresh: the files of its configMap and secret volumes
// and of the configMap and secret sources of its projected volumes, as
// resolve_pod gives them, from objects fetched again. Token and downwardAPI
// files are not in it (tokens are renewed on their own schedule). A volume
// whose object or key is gone now is left out: its files keep their
// contents, as a kubelet keeps them.
proto::PodFiles object_volume_files(const Json::Value &pod, const FetchedObjects &objects);

// The credentials of the pod's imagePullSecrets that exist, merged into one
// containers-auth.json(5) document, as the kubelet merges them (the first
// secret naming a registry wins): kubernetes.io/dockerconfigjson
// (.dockerconfigjson, {"auths": {...}}) and kubernetes.io/dockercfg
// (.dockercfg, the registries at the top level); an entry with username and
// password but no "auth" gets auth = base64(username:password). "" when the
// pod names none or none of them exists; *missing gets the names of those
// absent or not readable as registry credentials.
std::string pull_auth(const Json::Value &pod, const FetchedObjects &objects,
                      std::vector<std::string> *missing);

// Kubernetes quantity ("500m", "2", "1Gi", "1e3") in milli-units.
Result<int64_t> parse_quantity_milli(const std::string &q);

}  // namespace sk::agent
