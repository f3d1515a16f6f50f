// A pod's volumes that are paths of the node: hostPath volumes, and
// persistentVolumeClaim volumes whose claim is bound to a PersistentVolume
// with a hostPath, local or nfs source (the shared file systems of an HPC
// site, mounted on every node). The agent reads the claims and their
// volumes as a kubelet does (the Node authorizer lets a node get the claims
// of the pods bound to it, and the volumes bound to those), decides here
// whether the pod may mount them (agent.conf volume_roots), and hands the
// shim the paths (proto::HostVolume), which it mounts as the job's user:
// nothing is opened or mounted by root on the pod's behalf, and the job's
// user reads and writes only what its own permissions allow.
//
// Pure: the objects come fetched, the node's mounts as /proc/self/mountinfo
// text.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <json/json.h>

#include "agent/controllers/env_resolver.h"
#include "common/daemons/shim_protocol.h"
#include "common/result.h"

namespace sk::agent {

constexpr const char *kClaimKind = "persistentvolumeclaims";
constexpr const char *kVolumeKind = "persistentvolumes";  // cluster-scoped

// ("persistentvolumeclaims", claimName) of each persistentVolumeClaim
// volume of the pod.
std::set<ObjectRef> claim_refs(const Json::Value &pod);
// ("persistentvolumes", spec.volumeName) of each fetched claim of the pod
// that names its volume.
std::set<ObjectRef> bound_volume_refs(const Json::Value &pod, const FetchedObjects &objects);

// An NFS file system mounted on the node: "server:/export" and where.
struct NfsMount {
    std::string source, mount_point;
};
// The nfs and nfs4 mounts of a /proc/self/mountinfo text (octal escapes
// in the mount point decoded).
std::vector<NfsMount> nfs_mounts(std::string_view mountinfo);

// The pod's hostPath and claim volumes, each at or below one of `roots`
// (clean absolute paths, agent.conf volume_roots). Fails with
//  - Refused: what the pod may not have here, saying why and what to do
//    (a path outside the roots, no roots at all, a PersistentVolume of
//    another source, an nfs export this node has not mounted);
//  - NotFound: what may come (a claim missing or not bound yet, its
//    volume missing or bound to another claim), in the kubelet's words;
//    the start is retried.
Result<proto::HostVolumes> resolve_host_volumes(const Json::Value &pod,
                                                const FetchedObjects &objects,
                                                const std::vector<std::string> &roots,
                                                const std::vector<NfsMount> &nfs);

// The pod's emptyDir volumes of medium Memory and the size of each tmpfs,
// as a kubelet sizes it: its sizeLimit, at most what the pod may use (the
// sum of its containers' memory limits when each has one, else
// `node_bytes`, the memory the job lends the node). Refused: a sizeLimit
// that is not a quantity.
struct MemoryVolumeSize {
    std::string volume;
    uint64_t bytes = 0;
};
Result<std::vector<MemoryVolumeSize>> memory_volumes(const Json::Value &pod, uint64_t node_bytes);

}  // namespace sk::agent
