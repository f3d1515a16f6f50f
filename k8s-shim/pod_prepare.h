// A pod_run made into the finished plan the shim starts, in one pass: the
// spec planned (plan_pod: a refused or invalid spec stops here), the pull
// credentials given to its image pulls, its GPUs taken from the job's lent
// ones and spread over its containers (CUDA_VISIBLE_DEVICES as CUDA numbers
// them where each runs), the cgroup each of its supervisors asks the agent
// for (pods in cgroups of their own), the other GPUs' device nodes hidden
// from its process containers, and podman's directories made when a
// container runs an image. What fails says the reason the pod's status
// gives. Nothing of the plan is changed after it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/daemons/shim_protocol.h"
#include "common/result.h"
#include "k8s-shim/pod_plan.h"

namespace sk::shim {

// What the shim knows of the job and the node beyond the plan's context.
struct PodSetup {
    PlanContext plan;  // the job's user, the node, the pod's directory, podman's dirs
    // The GPUs the job's devices cgroup opens, sorted (assign_gpus' cuda_pool).
    std::vector<int> cuda_pool;
    std::string gpu_device;  // runtime.conf's pattern of a GPU's device node
    // Where CDI specifications are read (k8s-shim/cdi.h cdi_spec_dirs).
    std::vector<std::string> cdi_dirs;
    // Pods in cgroups of their own: the agent socket their supervisors ask
    // at ("" = none) and the job.
    std::string cgroup_socket;
    uint32_t job_id = 0;
};

// The job's GPUs as the shim lends them to pods (its GpuAllocator, saved).
struct GpuLease {
    std::function<Result<std::vector<int>>(int needed)> take;  // refused when fewer are free
    std::function<void()> give_back;                           // a later step failed
};

struct PreparedPod {
    PodPlan plan;
    std::vector<int> gpus;  // the node's indices it was given
    // Events for its start (type, reason, message, container): how its image
    // containers get their GPUs (k8s-shim/cdi.h).
    struct Note {
        std::string type, reason, message, container;
    };
    std::vector<Note> notes;
};

// *reason (when it fails): PodRefused, InvalidPodSpec, OutOfnvidia.com/gpu
// or PodSetupFailed.
Result<PreparedPod> prepare_pod(const proto::PodRun &run, const PodSetup &setup,
                                const GpuLease &gpus, std::string *reason);

}  // namespace sk::shim
