// Device access on cgroup v2: a BPF_PROG_TYPE_CGROUP_DEVICE program, built,
// loaded (the raw bpf(2) syscall: a program of a few dozen instructions needs
// no library) and attached to a cgroup directory, as Slurm's cgroup/v2 plugin
// does for ConstrainDevices (tests/vm/README.md "Measured cgroup v2 layout"
// (d): its programs allow by default and list the GRES devices).
//
// The kernel runs the program of a cgroup on every open/mknod of a device by
// a process in it, and it alone decides (there is no devices controller on
// v2). Which program counts: a cgroup's own, else its nearest ancestor's; a
// program attached with BPF_F_ALLOW_OVERRIDE lets a descendant attach its own
// in its place (Slurm attaches the job's and the steps' so), one attached with
// no flag lets nothing below attach (Slurm's per-task programs). Attaching to
// a cgroup that already has a program (same flags) replaces it. So a program
// of ours replaces Slurm's where it sits: it must carry Slurm's denials too
// (docs/admin-guide.md "GPUs at the device" says how the plugin builds them).
//
// Needs CAP_SYS_ADMIN (root: the agent and slurmstepd).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/cgroup/cgroup_devices.h"
#include "common/result.h"

namespace sk {

// One rule: char devices of `major` with a minor in [minor_lo, minor_hi].
struct DeviceRule {
    unsigned major = 0;
    unsigned minor_lo = 0, minor_hi = 0;
    bool allow = false;
};

// The rules in order, the first that matches decides; a block device, or a
// char device no rule matches, gets `default_allow`.
struct DevicePolicy {
    std::vector<DeviceRule> rules;
    bool default_allow = true;
};

// NVIDIA's GPUs are char minors 0..kGpuMinorMax of their major; 254 and 255
// are nvidia-modeset and nvidiactl, which every CUDA process opens.
constexpr unsigned kGpuMinorMax = 253;

// What a cgroup may open of the GPUs: those in `allowed`, not those in
// `denied`, and no other GPU of their majors (minor 0..kGpuMinorMax: a GPU of
// the node outside the job, which Slurm's program denied where ours now
// stands); everything else allowed (control devices, every other device).
DevicePolicy gpu_policy(const std::vector<CharDevice> &allowed,
                        const std::vector<CharDevice> &denied);

// The program's instructions (struct bpf_insn, 8 bytes each, as the kernel
// reads them), for tests and for load_device_program.
std::vector<uint64_t> device_program(const DevicePolicy &policy);

// What the policy decides for a char device (the program's logic, without a
// kernel; the unit tests compare the two on a real kernel).
bool policy_allows(const DevicePolicy &policy, unsigned major, unsigned minor);

// Loads the policy's program (named `name`, at most 15 characters) and
// attaches it to the cgroup directory `cgroup_dir_fd` with BPF_F_ALLOW_OVERRIDE
// (override = true: descendants may put their own in its place) or with no
// flag; the kernel keeps it while the cgroup lives. `what` names the
// directory in errors. Fails with the verifier's or the kernel's reason.
Status attach_device_policy(int cgroup_dir_fd, const std::string &what, const DevicePolicy &policy,
                            const std::string &name, bool override);

// The ids of the device programs attached to the directory itself, and
// whether they were attached with BPF_F_ALLOW_OVERRIDE.
struct AttachedPrograms {
    std::vector<uint32_t> ids;
    bool override = false;
};
Result<AttachedPrograms> attached_device_programs(int cgroup_dir_fd, const std::string &what);

}  // namespace sk
