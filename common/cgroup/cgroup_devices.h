// GPU device nodes and devices-cgroup rules (cgroup v1), shared by the
// plugin (a step's GPUs, spank/device_cgroup.h) and the agent (a pod's,
// common/cgroup/pod_cgroup.h). Root writes these rules on behalf of jobs and pods:
// nothing here follows a symlink.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace sk {

struct CharDevice {
    int index = 0;  // the GPU's index (as in SLURM_JOB_GPUS)
    std::string path;
    unsigned major = 0, minor = 0;
};

// The device node of each GPU index, from a pattern holding "{index}" once
// (plugstack.conf / agent.conf gpu_device, default "/dev/nvidia{index}"),
// lstat'ed: each must be a character device (no symlink followed). Fails
// naming the path.
Result<std::vector<CharDevice>> gpu_char_devices(const std::string &pattern,
                                                 const std::vector<int> &indices);

// Writes one "c MAJ:MIN rwm" rule per device to dir/devices.deny (dir opened
// without following a symlink; one write per rule, as the kernel parses them).
Status deny_devices(const std::string &dir, const std::vector<CharDevice> &devices);
// The same with dir already open (a descriptor of a cgroup directory).
Status deny_devices_at(int dir_fd, const std::string &dir, const std::vector<CharDevice> &devices);

// The indices of `all` not in `keep`, in the order of `all`.
std::vector<int> indices_without(const std::vector<int> &all, const std::vector<int> &keep);

}  // namespace sk
