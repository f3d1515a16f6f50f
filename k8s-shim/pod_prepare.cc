#include "k8s-shim/pod_prepare.h"

#include <optional>

#include "common/strings.h"
#include "k8s-shim/cdi.h"
#include "k8s-shim/podman.h"

namespace sk::shim {

namespace {

// An image container's GPUs as CDI devices when the node's specifications
// name every one of them (k8s-shim/cdi.h), else its device nodes only, said
// in an event; a template's {cdi:FLAG} words get the same names (or none).
void use_cdi_gpus(PodPlan *plan, const PodSetup &setup, std::vector<PreparedPod::Note> *notes) {
    std::optional<std::vector<CdiDevice>> devices;
    std::vector<std::string> errors;
    for (auto *list : {&plan->init_containers, &plan->containers})
        for (auto &c : *list) {
            const bool slots = !c.image_run && !c.cdi_slots.empty();
            if ((!c.image_run && !slots) || c.gpu_indices.empty()) {
                if (slots) fill_cdi_slots(&c.argv, c.cdi_slots, {});
                continue;
            }
            if (!devices) devices = load_cdi_devices(setup.cdi_dirs, &errors);
            std::vector<std::string> names, missing;
            for (int i : c.gpu_indices) {
                std::string n = cdi_gpu_for(*devices, setup.gpu_device, i);
                (n.empty() ? missing : names).push_back(n.empty() ? std::to_string(i) : n);
            }
            if (slots)
                fill_cdi_slots(&c.argv, c.cdi_slots,
                               missing.empty() ? names : std::vector<std::string>());
            if (missing.empty()) {
                if (c.image_run) c.image_run->cdi_devices = names;
                notes->push_back({"Normal", "CDIDevices",
                                  "GPUs as CDI devices " + join(names, ", ") +
                                      " (their device nodes, driver libraries and tools as the "
                                      "node's CDI specification says)",
                                  c.name});
                continue;
            }
            std::string dirs = join(setup.cdi_dirs, ", ");
            notes->push_back(
                {"Normal", "GPUDeviceNodesOnly",
                 "no CDI specification in " + dirs + " names GPU " + join(missing, ", ") +
                     ": the container gets its GPUs' device nodes only, no driver libraries "
                     "(docs/admin-guide.md, GPUs in images)" +
                     (errors.empty() ? "" : "; unreadable: " + join(errors, "; ")),
                 c.name});
        }
}

}  // namespace

Result<PreparedPod> prepare_pod(const proto::PodRun &run, const PodSetup &setup,
                                const GpuLease &gpus, std::string *reason) {
    PlanContext ctx = setup.plan;
    ctx.own_network = !run.net_ns.empty();
    auto plan = plan_pod(run.pod, run.files, ctx, run.host_volumes);
    if (!plan) {
        *reason = plan.error() == Error::Refused ? "PodRefused" : "InvalidPodSpec";
        return plan.failure();
    }
    set_pull_auth(&*plan, run.pull_auth, setup.plan.pod_dir);
    if (!run.net_ns.empty())
        for (const auto *list : {&plan->init_containers, &plan->containers})
            for (const auto &c : *list)
                if (c.image_run) {
                    *reason = "PodRefused";
                    return fail(Error::Refused,
                                "container " + c.name +
                                    " runs through podman, which cannot join the pod's own "
                                    "network (the node keeps such pods on its network)");
                }
    set_pod_network(&*plan, run.net_ns, run.uts_ns);
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
    std::vector<PreparedPod::Note> notes;
    use_cdi_gpus(&*plan, setup, &notes);
    for (const auto *list : {&plan->init_containers, &plan->containers})
        for (const auto &c : *list)
            if (c.image_run)
                if (auto st = make_podman_dirs(setup.plan.podman_dir, setup.plan.podman_run_dir);
                    !st) {
                    gpus.give_back();
                    *reason = "PodSetupFailed";
                    return st.failure();
                }
    return PreparedPod{std::move(*plan), std::move(*idx), std::move(notes)};
}

}  // namespace sk::shim
