#include "spank/device_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>

#include "common/slurm_cgroup.h"

namespace sk::spank {
namespace {

// Slurm's reserved step ids (slurm.h; stable across releases, and this file
// is built without Slurm's headers).
constexpr uint32_t kExternStep = 0xfffffffc;
constexpr uint32_t kBatchStep = 0xfffffffb;
constexpr uint32_t kInteractiveStep = 0xfffffffa;

std::string errno_text(int e) {
    return strerror(e);
}

}  // namespace

Result<std::vector<CharDevice>> gpu_char_devices(const std::string &pattern,
                                                 const std::vector<int> &indices) {
    size_t at = pattern.find("{index}");
    if (at == std::string::npos || pattern.find("{index}", at + 1) != std::string::npos)
        return fail(
            Error::InvalidArgument,
            "gpu_device '" + pattern + "' must hold {index} once (e.g. /dev/nvidia{index})");
    std::vector<CharDevice> out;
    for (int i : indices) {
        CharDevice d;
        d.index = i;
        d.path = pattern.substr(0, at) + std::to_string(i) + pattern.substr(at + 7);
        struct stat st;
        if (lstat(d.path.c_str(), &st) != 0)
            return fail(Error::NotFound, "GPU " + std::to_string(i) + ": " + d.path + ": " +
                                             errno_text(errno) +
                                             " (plugstack.conf gpu_device names each GPU's "
                                             "device node as gres.conf's File= does)");
        if (!S_ISCHR(st.st_mode))
            return fail(Error::InvalidArgument,
                        "GPU " + std::to_string(i) + ": " + d.path +
                            " is not a character device (a symlink is not followed)");
        d.major = major(st.st_rdev);
        d.minor = minor(st.st_rdev);
        out.push_back(std::move(d));
    }
    return out;
}

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
    auto lines = parse_proc_cgroup(proc_cgroup_text);
    bool v1 = std::any_of(lines.begin(), lines.end(),
                          [](const CgroupLine &l) { return !l.controllers.empty(); });
    if (!lines.empty() && !v1)
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

Status deny_devices(const std::string &dir, const std::vector<CharDevice> &devices) {
    if (devices.empty()) return {};
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return fail(Error::Io, dir + ": " + errno_text(errno));
    int fd = openat(dfd, "devices.deny", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    int open_errno = errno;
    close(dfd);
    if (fd < 0) return fail(Error::Io, dir + "/devices.deny: " + errno_text(open_errno));
    Status st;
    for (const auto &d : devices) {
        std::string rule = "c " + std::to_string(d.major) + ":" + std::to_string(d.minor) + " rwm";
        if (write(fd, rule.data(), rule.size()) != static_cast<ssize_t>(rule.size())) {
            st = fail(Error::Io,
                      dir + "/devices.deny: '" + rule + "' (" + d.path + "): " + errno_text(errno));
            break;
        }
    }
    close(fd);
    return st;
}

std::vector<int> indices_without(const std::vector<int> &all, const std::vector<int> &keep) {
    std::vector<int> out;
    for (int i : all)
        if (std::find(keep.begin(), keep.end(), i) == keep.end()) out.push_back(i);
    return out;
}

}  // namespace sk::spank
