// Pure pod status logic: what the agent adds to the runtime's PodStatus,
// the strategic-merge PATCH for /status (nothing when nothing changed),
// refusal and job-end statuses, and the kubelet-like Events a status
// transition implies (recorded pod status sequences and Events of a real kubelet).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <json/json.h>

namespace sk::agent {

bool is_terminal_phase(const std::string &phase);
bool pod_is_terminal(const Json::Value &pod_or_status);  // accepts a Pod or a PodStatus

// The status to write: the runtime's (phase, Initialized/Ready/ContainersReady,
// container statuses, startTime, reason/message) plus hostIP = node address,
// podIP/podIPs = pod_ip (its own network's) or, "", the node's, and the
// API's own conditions (PodScheduled, DisruptionTarget) and qosClass kept.
Json::Value desired_pod_status(const Json::Value &runtime_status, const Json::Value &api_pod,
                               const std::string &node_ip, const std::string &pod_ip = "");

// Body for PATCH pods/NAME/status: {"metadata":{"uid"},"status":{only the
// changed fields; a cleared reason/message as null}}, or null when the API
// already shows `desired` (no-op suppressed).
Json::Value pod_status_patch(const Json::Value &api_pod, const Json::Value &desired);

// Pod refused before it ran (namespace not allowed, isolation, bad spec):
// phase Failed with the reason and message the user sees in kubectl.
Json::Value refused_pod_status(const Json::Value &api_pod, const std::string &reason,
                               const std::string &message, const std::string &node_ip,
                               int64_t now_s);

// A pod whose start is blocked (a read it depends on refused, an object or
// key missing), as a kubelet shows it while it retries: phase Pending,
// every container waiting with `waiting_reason` (CreateContainerConfigError,
// ContainerCreating for a volume that could not be set up) and `message`,
// Ready and ContainersReady False saying the same.
Json::Value start_blocked_status(const Json::Value &api_pod, const std::string &waiting_reason,
                                 const std::string &message, int64_t now_s);

// A pod stopped because the Slurm job ended: its final status names that
// (reason: a drain reason of the deregister, common/wire.h; the message
// says it in words, job_end_message).
Json::Value job_end_status(const Json::Value &status, const std::string &reason, uint32_t job_id);
std::string job_end_message(const std::string &reason, uint32_t job_id);
// Body for PATCH pods/NAME/status of a pod whose node is gone with its
// runtime (collected by the garbage collection): Failed with job_end_status's
// reason and message, not Ready, each running container terminated with exit
// code 137 and reason ContainerStatusUnknown (a kubelet's word for a
// container it can no longer find); null when the pod is terminal already.
Json::Value orphan_final_status_patch(const Json::Value &api_pod, const std::string &reason,
                                      uint32_t job_id, int64_t now_s);

// A pod stopped ahead of the job's end (--k8s-drain-before), as a kubelet
// reports a pod stopped by a graceful node shutdown: phase Failed, reason
// Terminated, and a DisruptionTarget condition (TerminationByKubelet) that
// controllers and a Job's podFailurePolicy read as a disruption, not a
// failure of the pod's own.
Json::Value end_drain_status(const Json::Value &status, uint32_t job_id, int64_t end_time,
                             int64_t now_s);
std::string end_drain_message(uint32_t job_id, int64_t end_time);

struct EventSpec {
    std::string type;    // Normal | Warning
    std::string reason;  // Started, Killing, BackOff, Failed, ...
    std::string message;
    std::string field_path;  // spec.containers{name}, or "" for the pod
};
// The Node Event that says how the job ended: Warning for an end the job did
// not choose (NodeFail, Preempted, JobFailed), else Normal; the message is
// job_end_message followed by `tail`.
EventSpec job_end_event(const std::string &reason, uint32_t job_id, const std::string &tail);

// Events implied by old -> new status: Started (a container began running),
// BackOff (entered CrashLoopBackOff), Failed (a container waiting on a
// config error).
// backoff_from_status = false when the runtime reports BackOff events
// itself (the shim does: pod_status "events", docs/protocol.md): no double counting.
std::vector<EventSpec> status_events(const Json::Value &api_pod, const Json::Value &old_status,
                                     const Json::Value &new_status,
                                     bool backoff_from_status = true);

// core/v1 Event about a Node as the kubelet writes it: namespace default,
// involvedObject {kind Node, name, uid = the name}, source kubelet@node.
Json::Value build_node_event(const std::string &node_name, const EventSpec &e, int64_t now_us);

// core/v1 Event as the kubelet writes it: name <pod>.<hex ns>, source
// kubelet@node, reportingComponent kubelet, count 1, first/lastTimestamp.
Json::Value build_pod_event(const Json::Value &pod, const EventSpec &e,
                            const std::string &node_name, int64_t now_us);

}  // namespace sk::agent
