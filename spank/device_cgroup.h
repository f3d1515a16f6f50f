// GPUs denied at the device, in the job's cgroup v1 devices hierarchy.
//
// Slurm's ConstrainDevices lets every step of a job open every GPU of the
// job on the node. The plugin narrows that where the job lends GPUs:
// - every step of the trainer (batch, srun, interactive) is denied the lent
//   GPUs (spank/hooks_step.cc, in slurmstepd as root, before the step's
//   tasks exec: slurm_spank_task_post_fork runs before any task is let go);
// - the extern step, where the shim and its pods run, is denied the GPUs the
//   trainer keeps (spank/hooks_extern.cc, before the shim starts).
// A deny written on a step's directory holds for every cgroup below it (the
// kernel propagates it; a child cannot allow what its parent denies).
//
// CUDA numbering (docs/admin-guide.md "GPUs at the device"): CUDA numbers the
// GPUs a process can open from 0, in index order. The lent GPUs are the last
// of the job's on the node (spank/gpu_split.h choose_lent), so denying them
// changes the number of no GPU the trainer keeps: its CUDA_VISIBLE_DEVICES
// (trainer_gpu_env) stays right with and without Slurm's renumbering. In the
// extern step only the lent GPUs remain, which CUDA numbers 0..n-1: the shim
// numbers its pods' GPUs so when told the step is confined
// (kGpusConfinedEnv).
//
// cgroup v2 (tests/vm/README.md "Measured cgroup v2 layout" (d)): there is no
// devices controller; Slurm attaches a device program (common/cgroup/bpf_devices.h)
// to the job's directory J and, for a step whose GPUs differ from the job's,
// to J/step_X/user (both with override) and to each J/step_X/user/task_N
// (no flag). The plugin puts its own in their place, built as Slurm's are
// (the step's GPUs allowed, every other GPU of their major denied) less the
// lent GPUs: on J/step_X/user of every trainer step and on the task
// directories that hold one of Slurm's (which then allow the step's GPUs,
// not the task's narrower binding), and on J/step_extern (the lent GPUs
// only: the shim; pods' directories get their own, common/cgroup/pod_cgroup.h).
// The step's hook runs after Slurm attached its programs
// (slurm_spank_task_post_fork follows task/cgroup's task_pre_launch_priv).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/cgroup/cgroup_devices.h"
#include "common/result.h"

namespace sk::spank {

// Set to "1" in the shim's environment when the extern step's devices cgroup
// lets it open the lent GPUs only (k8s-shim numbers pods' GPUs accordingly).
constexpr const char kGpusConfinedEnv[] = "SLURM_K8S_GPUS_CONFINED";

// The devices cgroup directory of one step of job_id: the job's directory in
// the v1 devices hierarchy (from slurmstepd's own cgroup membership, read_process_cgroups, which
// places it in the job) + "/" + step ("step_batch", "step_extern", "step_0").
// NotFound when the process is in no devices cgroup of the job (Slurm's
// ConstrainDevices is off, or proctrack/task are not cgroup); Unavailable on
// a pure cgroup v2 host.
Result<std::string> step_devices_dir(std::string_view proc_cgroup_text, uint32_t job_id,
                                     const std::string &step, const std::string &cgroup_root);

// cgroup v2: the job's directory "<cgroup_root>/.../job_<id>" from
// slurmstepd's own cgroup membership on a pure cgroup v2 host; NotFound when the
// process is in no cgroup of the job, Unavailable on a v1 or hybrid host.
Result<std::string> v2_job_dir(std::string_view proc_cgroup_text, uint32_t job_id,
                               const std::string &cgroup_root);

// cgroup v2: puts a device program allowing `allowed` and denying `denied`
// (and every other GPU of their major, common/cgroup/bpf_devices.h gpu_policy) on
// dir (opened without following a symlink), with override, and on each
// "task_*" directory below it that has a program of its own (no flag, in
// place of Slurm's). Fails naming the directory.
Status v2_confine_gpus(const std::string &dir, const std::vector<CharDevice> &allowed,
                       const std::vector<CharDevice> &denied);

// The step's directory component for a Slurm step id ("step_batch" ...).
std::string step_component(uint32_t step_id);

}  // namespace sk::spank
