// Pure builders of the Node and Lease objects of one virtual node, shaped like
// what a real kubelet v1.28 writes (recorded Node and Lease objects).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/daemons/protocol.h"
#include "common/k8s_names.h"

namespace sk::agent {

constexpr const char *kLabelPrefix = "slurm-k8s/";
constexpr const char *kJobTaintKey = "slurm-k8s/job";
constexpr const char *kEndingTaintKey = "slurm-k8s/job-ending";
constexpr const char *kEndedTaintKey = "slurm-k8s/job-ended";
// TaintNodesByCondition's taint on every Node created: the scheduler places
// nothing there until the controller-manager lifts it after Ready is posted.
constexpr const char *kNotReadyTaintKey = "node.kubernetes.io/not-ready";
// On a Node whose end-time cordon set spec.unschedulable (it was schedulable
// before): the uncordon may clear it. Without it the flag is someone else's.
constexpr const char *kEndCordonAnnotation = "slurm-k8s/end-cordon";
// While the job is suspended (scontrol suspend): NoSchedule, and Ready=False
// with kSuspendedReason; kSuspendCordonAnnotation as kEndCordonAnnotation.
constexpr const char *kSuspendedTaintKey = "slurm-k8s/job-suspended";
constexpr const char *kSuspendCordonAnnotation = "slurm-k8s/suspend-cordon";
constexpr const char *kSuspendedReason = "JobSuspended";

// Everything a Node object is built from: the job and the site configuration.
struct NodeSpecInput {
    std::string node_name;
    proto::RegisterRequest job;
    std::string cluster;
    std::string node_address;   // InternalIP
    std::string node_hostname;  // Hostname address; "" = none (agent/core/node_address.h)
    // The host's pod range (agent.conf pod_cidr with pod_network = cni):
    // spec.podCIDR(s), from which the other hosts route to its pods; "" = none.
    std::string pod_cidr;
    uint32_t kubelet_port = 10250;
    std::map<std::string, std::string> site_labels;
    std::vector<k8s::Taint> site_taints;
    uint32_t max_pods = 110;
    uint32_t host_cpus = 1;           // used when the job gives no CPU count
    uint64_t host_memory_mib = 1024;  // used when the job gives no memory
    // ephemeral-storage: the size of the file system that holds the pods'
    // directories and logs (shim_state_dir); 0 = not reported.
    uint64_t ephemeral_storage_bytes = 0;
    std::vector<std::string> site_namespaces;  // agent.conf allowed_namespaces
    std::string agent_version;
    std::string kernel_version, os_image, machine_id, boot_id, architecture = "amd64";
};

// The namespaces whose pods may run on a job's nodes: the job's own list
// (--k8s-namespace), else the site's default (allowed_namespaces); {"*"} =
// any, {} = none.
std::vector<std::string> effective_namespaces(const proto::RegisterRequest &job,
                                              const std::vector<std::string> &site);
bool namespace_allowed(const std::vector<std::string> &effective, const std::string &ns);
// Why a pod of `ns` is refused on the nodes of `job_id` (effective as above).
std::string namespace_refusal(const std::vector<std::string> &effective, const std::string &ns,
                              uint32_t job_id);
// The annotation kNamespacesAnnotation says who may run there, for
// `kubectl describe node`: "rl,serving", "*", or why none may.
constexpr const char *kNamespacesAnnotation = "slurm-k8s/namespaces";
std::string namespaces_annotation(const std::vector<std::string> &effective);

// Labels: slurm-k8s/{job-id,user,partition,slurm-node,cluster}, hostname,
// instance type, os/arch, the site's and the user's (the user's cannot
// override the slurm-k8s/ ones).
std::map<std::string, std::string> node_labels(const NodeSpecInput &in);
// The job's taints, or slurm-k8s/job=<id>:NoSchedule when it sent none, plus
// the site's.
std::vector<k8s::Taint> node_taints(const NodeSpecInput &in);
// Why a Node is not Ready: the Ready condition's reason and message.
struct NotReadyWhy {
    std::string reason = "KubeletNotReady";
    std::string message = "slurm-k8s agent is not ready";
};
// The 4 conditions in the kubelet's order; Ready True, or False with why.
Json::Value node_conditions(bool ready, int64_t heartbeat_s, int64_t transition_s,
                            const NotReadyWhy &why = {});
// Full Node for POST /api/v1/nodes (status included: the POST keeps it).
Json::Value build_node(const NodeSpecInput &in, int64_t now_s);
// Strategic-merge body for PATCH nodes/NAME/status: conditions (all 4, by
// type), capacity, allocatable, addresses, daemonEndpoints, nodeInfo.
Json::Value build_node_status_patch(const NodeSpecInput &in, bool ready, int64_t now_s,
                                    int64_t transition_s, const NotReadyWhy &why = {});
// Merge-patch body for PATCH nodes/NAME: unschedulable and the taint list
// (current taints + extra, no duplicates by key+effect), guarded by the
// resourceVersion read with them.
Json::Value build_cordon_patch(const Json::Value &current_node, const k8s::Taint &extra);
// The cordon ahead of the job's end (and while it is suspended, with
// kSuspendCordonAnnotation): build_cordon_patch, plus the annotation when
// the Node was schedulable until now.
Json::Value build_end_cordon_patch(const Json::Value &current_node, const k8s::Taint &taint,
                                   const char *annotation = kEndCordonAnnotation);
// Undoes build_end_cordon_patch (the end moved away, the job resumed): drops
// the taints with taint's key and effect, clears unschedulable only when the
// annotation says this cordon set it, drops the annotation. When the other
// slurm-k8s cordon (end or suspension) still holds the Node, unschedulable
// stays and passes to it (its annotation). Null: nothing to undo.
Json::Value build_end_uncordon_patch(const Json::Value &current_node, const k8s::Taint &taint,
                                     const char *annotation = kEndCordonAnnotation);
// True when the Node carries a taint with this key and effect.
bool has_taint(const Json::Value &node, const std::string &key, const std::string &effect);
// Merge-patch body that removes the node.kubernetes.io/not-ready:NoSchedule
// taint the API server's admission puts on every new Node (guarded by the
// resourceVersion read with it); null when the Node does not have it.
Json::Value build_not_ready_lift_patch(const Json::Value &node);
// True when node's labels say it belongs to (job, slurm node) of this agent.
bool node_is_ours(const Json::Value &node, const std::string &cluster,
                  const std::string &slurm_node);

// Lease in kube-node-lease, owned by the Node (uid), renewTime in MicroTime.
Json::Value build_lease(const std::string &node_name, const std::string &node_uid,
                        uint32_t duration_s, int64_t now_us);
// The same Lease renewed: spec.renewTime updated, resourceVersion kept.
Json::Value renew_lease(const Json::Value &current, const std::string &node_name,
                        const std::string &node_uid, uint32_t duration_s, int64_t now_us);

}  // namespace sk::agent
