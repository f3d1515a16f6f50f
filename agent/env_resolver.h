// Resolves a pod's env references and configMap/secret volumes into plain
// values before the pod goes to the shim (the shim never sees the API).
// Two phases so that the fetching (async, I/O) stays outside: list what is
// needed, fetch it, then resolve purely.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include <json/json.h>

#include "common/result.h"

namespace sk::agent {

// (kind, name) in the pod's namespace; kind is "configmaps" or "secrets".
using ObjectRef = std::pair<std::string, std::string>;

std::set<ObjectRef> referenced_objects(const Json::Value &pod);

// The fetched objects; a ref absent from the map did not exist (404).
using FetchedObjects = std::map<ObjectRef, Json::Value>;

struct NodeFacts {
    std::string node_name, node_ip;
    uint32_t cpus = 1;  // allocatable, for resourceFieldRef without a limit
    uint64_t memory_mib = 1024;
};

// pod_run body: {"pod": pod with every env valueFrom replaced by "value",
// "files": {volume: {path: base64}}}. A missing required object or key fails
// (Invalid) with the message the kubelet would show
// ("configmap \"cfg\" not found", "couldn't find key k in Secret ns/s").
Result<Json::Value> resolve_pod(const Json::Value &pod, const FetchedObjects &objects,
                                const NodeFacts &node);

// Kubernetes quantity ("500m", "2", "1Gi", "1e3") in milli-units.
Result<int64_t> parse_quantity_milli(const std::string &q);

}  // namespace sk::agent
