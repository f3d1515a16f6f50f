#include "k8s-shim/pod_prepare.h"

#include "common/strings.h"
#include "k8s-shim/podman.h"

namespace sk::shim {

Result<PreparedPod> prepare_pod(const proto::PodRun &run, const PodSetup &setup,
                                const GpuLease &gpus, std::string *reason) {
    auto plan = plan_pod(run.pod, run.files, setup.plan, run.host_volumes);
    if (!plan) {
        *reason = plan.error() == Error::Refused ? "PodRefused" : "InvalidPodSpec";
        return plan.failure();
    }
    set_pull_auth(&*plan, run.pull_auth, setup.plan.pod_dir);
    auto idx = gpus.take(plan->gpus_needed());
    if (!idx) {
        *reason = "OutOfnvidia.com/gpu";
        return idx.failure();
    }
    assign_gpus(&*plan, *idx, setup.cuda_pool);
    if (!setup.cgroup_socket.empty()) {
        // Every supervisor of the pod (its containers', probes', hooks' and
        // exec sessions') enters its container's cgroup below the pod's,
        // which the agent opens to the pod's GPUs only.
        std::string request = setup.cgroup_socket + "\n" + run.uid + "\n" + format_index_list(*idx);
        for (auto *list : {&plan->init_containers, &plan->containers})
            for (auto &c : *list) {
                c.cgroup_request = request + "\n" + c.name;
                c.cgroup_pod_uid = run.uid;
                c.cgroup_job_id = setup.job_id;
            }
    }
    // A container of the process runtime sees its own GPUs' device nodes
    // only (k8s-shim/mount_ns.h); the podman runtime passes only its own.
    hide_other_gpus(&*plan, setup.gpu_device);
    for (const auto *list : {&plan->init_containers, &plan->containers})
        for (const auto &c : *list)
            if (c.image_run)
                if (auto st = make_podman_dirs(setup.plan.podman_dir, setup.plan.podman_run_dir);
                    !st) {
                    gpus.give_back();
                    *reason = "PodSetupFailed";
                    return st.failure();
                }
    return PreparedPod{std::move(*plan), std::move(*idx)};
}

}  // namespace sk::shim
