// Pod status building (pure): the runtime's view of a pod -> a Kubernetes
// PodStatus object, shaped like what a kubelet v1.28 writes (recorded status
// sequences; tests/unit/test_shim_pod_status.cc checks the shapes): phase,
// conditions Initialized/Ready/ContainersReady (PodScheduled is the
// agent's), initContainerStatuses/containerStatuses with state,
// lastState, ready, started, restartCount, image, imageID, containerID
// "slurm-k8s://<uid>/<name>/<n>", pod-level reason/message, startTime.
// lastTransitionTime is kept from the previous status while a condition does
// not change, so the agent's no-op suppression works.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <json/json.h>

#include "k8s-shim/pod_plan.h"

namespace sk::shim {

struct Termination {
    int exit_code = 0;
    std::string reason;   // Completed, Error, OOMKilled, ContainerStatusUnknown
    std::string message;  // termination message or log tail
    int64_t started_ms = 0, finished_ms = 0;
    std::string container_id;
};

enum class CState { Waiting, Running, Terminated };

struct ContainerRun {
    CState state = CState::Waiting;
    std::string waiting_reason, waiting_message;  // empty reason: the default for the pod
    int64_t started_ms = 0;
    std::string container_id;
    bool started = false;  // running and the startup probe (if any) passed
    bool ready = false;    // running and the readiness probe (if any) passed
    std::optional<Termination> terminated, last;
    int restart_count = 0;
    bool ever_started = false;
    // A sidecar (restartPolicy Always init container) that started once: the
    // pod's initialization went on past it, and stays done when it restarts.
    bool init_passed = false;
    // Why its readiness probe cannot vouch for it, when that is not the
    // container's doing (another user's process took its port): said in the
    // pod's Ready condition. "" = nothing to say.
    std::string unready_note;
};

struct PodRun {
    int64_t start_ms = 0;
    std::vector<ContainerRun> init, app;  // same order as the plan
    bool stopping = false;                // pod_kill/shutdown: nothing restarts any more
    std::string reason, message;          // pod-level failure (refusal, lost)
    bool failed = false;                  // pod-level failure without running anything
    // activeDeadlineSeconds passed: Failed (reason DeadlineExceeded) while
    // and after its containers are stopped.
    bool deadline_exceeded = false;
    // The Slurm job is suspended (pods_pause): not Ready, reason JobSuspended.
    bool paused = false;
    std::string paused_message;
};

// Builds a status at now_ms; prev is the last status sent (or null).
Json::Value build_pod_status(const PodPlan &plan, const PodRun &run, const Json::Value &prev,
                             int64_t now_ms);

// The kubelet's bounds on termination messages: 4 KiB a container from its
// terminationMessagePath, 2 KiB and 80 lines from its log (FallbackToLogsOnError),
// 12 KiB for the pod's containers together (each cut evenly to its share,
// keeping its end) so that a pod's status stays small.
constexpr size_t kMaxContainerTerminationMessageBytes = 4096;
constexpr size_t kMaxTerminationMessageLogBytes = 2048;
constexpr size_t kMaxTerminationMessageLogLines = 80;
constexpr size_t kMaxPodTerminationMessageBytes = size_t{12} * 1024;
// Cuts the terminated states' messages (state and lastState, init and app
// containers) of a PodStatus to kMaxPodTerminationMessageBytes in all.
void cap_termination_messages(Json::Value *status);
// A log's tail as a termination message: its last
// kMaxTerminationMessageLogLines lines, at most kMaxTerminationMessageLogBytes.
std::string termination_message_from_log(const std::string &tail);
// The status of a pod the shim refused before running anything.
Json::Value refused_pod_status(const std::string &reason, const std::string &message,
                               int64_t now_ms);
// The final status of a pod of a previous shim of this job that this shim
// cannot re-attach to (status: the last one that shim recorded; processes_
// stopped: its process groups were found and killed): Failed, reason
// ShimRestarted, its running containers terminated as
// ContainerStatusUnknown, nothing ready (common/daemons/pod_loss.h).
Json::Value restarted_pod_status(const Json::Value &status, bool processes_stopped, int64_t now_ms);
// Phase the kubelet would report (Pending, Running, Succeeded, Failed).
std::string pod_phase(const PodPlan &plan, const PodRun &run);
// True when nothing of the pod runs and nothing will be restarted.
bool pod_finished(const PodPlan &plan, const PodRun &run);

std::string container_id(const std::string &uid, const std::string &name, int n);

}  // namespace sk::shim
