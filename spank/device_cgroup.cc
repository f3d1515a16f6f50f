#include "spank/device_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>

#include "common/cgroup/bpf_devices.h"
#include "common/cgroup/slurm_cgroup.h"

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

Result<std::string> v2_job_dir(std::string_view proc_cgroup_text, uint32_t job_id,
                               const std::string &cgroup_root) {
    if (!unified_only(parse_proc_cgroup(proc_cgroup_text)))
        return fail(Error::Unavailable, "not a pure cgroup v2 host");
    for (const auto &l : slurm_job_cgroups(proc_cgroup_text, job_id))
        return cgroup_root + l.path;
    return fail(Error::NotFound,
                "slurmstepd is in no cgroup of job " + std::to_string(job_id) +
                    " (cgroup v2: proctrack/cgroup, task/cgroup and ConstrainDevices=yes confine "
                    "a job's GPUs)");
}

Status v2_confine_gpus(const std::string &dir, const std::vector<CharDevice> &allowed,
                       const std::vector<CharDevice> &denied) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail(Error::Io, dir + ": " + strerror(errno));
    DevicePolicy policy = gpu_policy(allowed, denied);
    Status st = attach_device_policy(fd, dir, policy, "slurm_k8s_step", true);
    // Slurm's per-task programs (no flag) would decide for the tasks: ours
    // in their place.
    DIR *d = st ? fdopendir(dup(fd)) : nullptr;
    while (d) {
        struct dirent *e = readdir(d);
        if (!e) break;
        if (e->d_type != DT_DIR || strncmp(e->d_name, "task_", 5) != 0) continue;
        int tfd = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd < 0) continue;  // the task ended
        std::string task = dir + "/" + e->d_name;
        auto q = attached_device_programs(tfd, task);
        if (q && !q->ids.empty())
            st = attach_device_policy(tfd, task, policy, "slurm_k8s_task", q->override);
        close(tfd);
        if (!st) break;
    }
    if (d) closedir(d);
    close(fd);
    return st;
}

Result<std::string> step_devices_dir(std::string_view proc_cgroup_text, uint32_t job_id,
                                     const std::string &step, const std::string &cgroup_root) {
    if (unified_only(parse_proc_cgroup(proc_cgroup_text)))
        return fail(Error::Unavailable, "cgroup v2: no devices hierarchy (v2_job_dir)");
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
