#include "spank/device_cgroup.h"

#include <algorithm>

#include "common/slurm_cgroup.h"

namespace sk::spank {
namespace {

// Slurm's reserved step ids (slurm.h; stable across releases, and this file
// is built without Slurm's headers).
constexpr uint32_t kExternStep = 0xfffffffc;
constexpr uint32_t kBatchStep = 0xfffffffb;
constexpr uint32_t kInteractiveStep = 0xfffffffa;

}  // namespace

std::string step_component(uint32_t step_id) {
    switch (step_id) {
        case kExternStep:
            return "step_extern";
        case kBatchStep:
            return "step_batch";
        case kInteractiveStep:
            return "step_interactive";
        default:
            return "step_" + std::to_string(step_id);
    }
}

Result<std::string> step_devices_dir(std::string_view proc_cgroup_text, uint32_t job_id,
                                     const std::string &step, const std::string &cgroup_root) {
    if (unified_only(parse_proc_cgroup(proc_cgroup_text)))
        return fail(Error::Unavailable,
                    "cgroup v2: the GPUs are not denied at the device there yet (Slurm's eBPF "
                    "device program); CUDA_VISIBLE_DEVICES alone keeps them apart");
    for (const auto &l : slurm_job_cgroups(proc_cgroup_text, job_id)) {
        bool devices = false;
        for (size_t b = 0; b <= l.controllers.size();) {
            size_t e = l.controllers.find(',', b);
            if (e == std::string::npos) e = l.controllers.size();
            if (l.controllers.compare(b, e - b, "devices") == 0) devices = true;
            b = e + 1;
        }
        if (devices) return cgroup_root + "/" + l.controllers + l.path + "/" + step;
    }
    return fail(Error::NotFound,
                "slurmstepd is in no devices cgroup of job " + std::to_string(job_id) +
                    " (cgroup.conf ConstrainDevices=yes with task/cgroup confines a job's GPUs)");
}

}  // namespace sk::spank
