// A pod's own cgroup inside its Slurm job (cgroup v1): the directory
// "k8s_pod_<uid>" under the extern step's directory ("<hierarchy>/.../
// job_<id>/step_extern") of each hierarchy that confines the job and that a
// pod's limits live in (devices and memory). The agent (root) makes it and moves
// the pod's container supervisors into it when the shim asks
// (docs/architecture.md "Pods' cgroups"); nothing of it is the job user's:
// no file is chowned, so a pod's process can move itself nowhere.
// Being below step_extern, a pod stays in the job for Slurm: its accounting,
// its end-of-job kill and the plugin's job-end sweep (spank/shim_process.h)
// reach it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/cgroup_devices.h"
#include "common/result.h"

namespace sk {

// One hierarchy's extern-step directory, under which pods' cgroups go.
struct PodCgroupParent {
    std::string controllers;  // "devices", "cpu,cpuacct"
    std::string dir;          // "<root>/<controllers>/.../job_<id>/step_extern"
};

// The parents, from the shim's /proc/<pid>/cgroup (the shim runs in the
// extern step): each v1 hierarchy among `wanted` (controller names) whose
// line places the shim at or below job_id's step_extern (Slurm confines the
// job there: devices with ConstrainDevices, memory with ConstrainRAMSpace).
// Unavailable on a pure cgroup v2 host (not handled yet), NotFound when no
// wanted hierarchy places the shim in the job.
Result<std::vector<PodCgroupParent>> pod_cgroup_parents(std::string_view shim_proc_cgroup,
                                                        uint32_t job_id,
                                                        const std::vector<std::string> &wanted,
                                                        const std::string &cgroup_root);

// "k8s_pod_<uid>"; a uid must be 1-64 of [a-z0-9-] (the API's are UUIDs).
Result<std::string> pod_cgroup_name(std::string_view pod_uid);

// What a pod's cgroup allows.
struct PodCgroupSettings {
    std::vector<CharDevice> deny;  // devices: the GPUs it may not open
    int64_t memory_limit = 0;      // memory: memory.limit_in_bytes, 0 = the job's
};

// Makes the pod's directory under each parent if missing (mkdirat, the parent
// opened without following a symlink), writes the settings of that hierarchy
// (each time: a rule already there is a no-op, the limit the same) and then
// moves pid into it in every hierarchy. The first failure stops it and is
// returned; the process is then in none or some of them (the caller kills it).
Status enter_pod_cgroup(const std::vector<PodCgroupParent> &parents, std::string_view pod_uid,
                        const PodCgroupSettings &settings, pid_t pid);

// The memory limit a pod's cgroup gets, in bytes, from its spec: as the
// kubelet sizes a pod's cgroup, the larger of the sum of its app containers'
// limits and its largest init container's, when every container has one;
// else `fallback` (what the job lends the node, 0 = none).
int64_t pod_memory_limit(const std::vector<int64_t> &app_limits,
                         const std::vector<int64_t> &init_limits, int64_t fallback);

// The pod uids that have a directory under a parent.
std::vector<std::string> pod_cgroup_uids(const std::vector<PodCgroupParent> &parents);

// Removes the pod's directories (a directory that still holds a process
// stays: EBUSY). The failures other than "already gone", one line each.
std::vector<std::string> remove_pod_cgroup(const std::vector<PodCgroupParent> &parents,
                                           std::string_view pod_uid);

}  // namespace sk
