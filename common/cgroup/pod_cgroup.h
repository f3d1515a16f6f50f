// A pod's own cgroup inside its Slurm job: the directory
// "k8s_pod_<uid>" under the extern step's directory ("<hierarchy>/.../
// job_<id>/step_extern") of each hierarchy that confines the job and that a
// pod's limits live in (devices and memory). The agent (root) makes it and moves
// the pod's container supervisors into it when the shim asks
// (docs/architecture.md "Pods' cgroups"); nothing of it is the job user's:
// no file is chowned, so a pod's process can move itself nowhere.
// Being below step_extern, a pod stays in the job for Slurm: its accounting,
// its end-of-job kill and the plugin's job-end sweep (spank/shim_process.h)
// reach it.
//
// On cgroup v2 there is one hierarchy: the pod's directory is
// "J/step_extern/k8s_pod_<uid>" beside Slurm's "slurm" and "user" leaves
// (tests/vm/README.md "Measured cgroup v2 layout"), with cpu, memory and
// pids (the agent enables pids below the job, where Slurm stops it) and a
// device program of its own (common/cgroup/bpf_devices.h) in place of the job's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/cgroup/cgroup_devices.h"
#include "common/result.h"

namespace sk {

// One hierarchy's directory under which pods' cgroups go.
struct PodCgroupParent {
    std::string controllers;  // "devices", "cpu,cpuacct"
    std::string dir;          // "<root>/<controllers>/.../job_<id>/step_extern"
    // A tree of the project's own, "<root>/<controllers>/<tree>/job_<id>"
    // (tree: own_cgroup_tree, "slurm_k8s" beside Slurm's default "slurm"),
    // made on first use: for the hierarchies Slurm makes no job directory in
    // on cgroup v1 (cpu, cpuacct, pids). A process moved there stays in the
    // job's freezer, devices and memory cgroups (v1 hierarchies are apart),
    // so Slurm still tracks and kills it; the plugin's job-end sweep removes
    // the tree (own_job_cgroup_dirs).
    bool own = false;
    // cgroup v2: the one hierarchy (controllers is ""), dir "<root>/.../job_<id>/step_extern".
    bool unified = false;
};

// The directory name of that tree under each hierarchy's root.
constexpr char kOwnCgroupTree[] = "slurm_k8s";

// The own tree's name for the slurmd whose job directories the
// /proc/<pid>/cgroup text shows: "slurm_k8s" beside Slurm's "/slurm/uid_U/
// job_J", "slurm_k8s_<n>" beside a multiple-slurmd "/slurm_<n>/uid_U/job_J"
// (CgroupPrepend "/slurm_%n"; <n> of letters, digits, '-' and '_', up to 64,
// else the plain name). Slurmds sharing a host (their nodes may run
// the same job) thus keep their pods' cgroups apart: one node's end-of-job
// sweep never reaches another's pods.
std::string own_cgroup_tree(std::string_view proc_cgroup_text, uint32_t job_id);

// The parents, from the shim's /proc/<pid>/cgroup (the shim runs in the
// extern step): each v1 hierarchy among `wanted` (controller names) whose
// line places the shim at or below job_id's step_extern (Slurm confines the
// job there: devices with ConstrainDevices, memory with ConstrainRAMSpace);
// and each v1 hierarchy among `own` (not already a parent) as the project's
// own tree of the job. On a pure cgroup v2 host the one parent is the
// unified line's step_extern (wanted and own do not apply). NotFound when
// nothing places the shim in the job's extern step.
Result<std::vector<PodCgroupParent>> pod_cgroup_parents(std::string_view shim_proc_cgroup,
                                                        uint32_t job_id,
                                                        const std::vector<std::string> &wanted,
                                                        const std::string &cgroup_root,
                                                        const std::vector<std::string> &own = {});

// The project's own job directories of job_id in the v1 hierarchies of
// /proc/<pid>/cgroup text that name a controller of `own`, whether they
// exist or not ("<root>/cpu,cpuacct/slurm_k8s/job_<id>", own_cgroup_tree).
std::vector<std::string> own_job_cgroup_dirs(std::string_view proc_cgroup_text, uint32_t job_id,
                                             const std::vector<std::string> &own,
                                             const std::string &cgroup_root);

// "k8s_pod_<uid>"; a uid must be 1-64 of [a-z0-9-] (the API's are UUIDs).
Result<std::string> pod_cgroup_name(std::string_view pod_uid);
// A container's directory below its pod's: "ctr_<name>" (a DNS label, which
// never has the dot of a cgroup's control files).
Result<std::string> container_cgroup_name(std::string_view container);

// What a pod's cgroup allows.
struct PodCgroupSettings {
    std::vector<CharDevice> deny;  // devices: the GPUs it may not open
    // cgroup v2: the GPUs it may open (its device program replaces the
    // job's: every other GPU of their major is denied, common/cgroup/bpf_devices.h).
    std::vector<CharDevice> gpus;
    int64_t memory_limit = 0;  // memory: memory.limit_in_bytes, 0 = the job's
    // cpu: the CFS quota per period (cpu.cfs_period_us, cpu.cfs_quota_us) from
    // the limit, 0 = none; cpu.shares from the requests, 0 = the default.
    int64_t cpu_quota_us = 0;
    int64_t cpu_period_us = 100000;
    int64_t cpu_shares = 0;
    int64_t pids_max = 0;  // pids: pids.max, 0 = none
    // The container whose process moves (its directory below the pod's, where
    // the process goes) and its own limits: its memory limit and the CFS
    // quota of its CPU limit, 0 = none (the pod's hold it).
    std::string container;
    int64_t container_memory_limit = 0;
    int64_t container_cpu_quota_us = 0;
    // What all the job's pods together may use on the node (what the job
    // lends): the memory parent's memory.limit_in_bytes (the extern step
    // holds only the shim and the pods; kShimMemoryHeadroom is added for the
    // shim) and the own cpu parent's CFS quota. 0 = not capped.
    int64_t pods_memory_limit = 0;
    int64_t pods_cpu_quota_us = 0;
};

// What the extern step's memory limit holds beyond the pods' for the shim.
constexpr int64_t kShimMemoryHeadroom = int64_t{64} << 20;

// As the kubelet turns a pod's CPU into cgroup values: the quota for a limit
// of `limit_milli` CPUs/1000 per 100 ms period (at least the kernel's 1 ms;
// 0 when limit_milli is 0), and the shares for requests of `request_milli`
// (1024 per CPU, at least 2, at most 262144).
int64_t cpu_quota_for(int64_t limit_milli, int64_t period_us = 100000);
int64_t cpu_shares_for(int64_t request_milli);
// cgroup v2's cpu.weight for those shares, as the kubelet converts them
// (shares 2..262144 -> weight 1..10000).
int64_t cpu_weight_for_shares(int64_t shares);

// Makes the pod's directory under each parent if missing (mkdirat, the parent
// opened without following a symlink), writes the settings of that hierarchy
// (each time: a rule already there is a no-op, the limit the same), makes the
// container's directory below it with the container's limits, and moves pid
// into that in every hierarchy (as the kubelet, a pod's processes are in its
// containers' cgroups, none in the pod's own: v2 allows no process beside
// child cgroups). The first failure stops it and is
// returned; the process is then in none or some of them (the caller kills it).
// On v2: "+pids" in the job's and "+cpu +memory +pids" in step_extern's
// cgroup.subtree_control, the pods' caps on step_extern (memory.max,
// cpu.max), the pod's memory.max, cpu.max, cpu.weight, pids.max and its
// device program (attached with no flag: nothing below it may attach one).
Status enter_pod_cgroup(const std::vector<PodCgroupParent> &parents, std::string_view pod_uid,
                        const PodCgroupSettings &settings, pid_t pid);

// The limit a pod's cgroup gets for one resource (memory in bytes, CPU in
// millicores), from its containers' limits: as the kubelet sizes a pod's
// cgroup, the larger of the sum of its app containers' limits and its
// largest init container's, when every container has one; else `fallback`
// (what the job lends the node, 0 = none).
int64_t pod_memory_limit(const std::vector<int64_t> &app_limits,
                         const std::vector<int64_t> &init_limits, int64_t fallback);
inline int64_t pod_limit(const std::vector<int64_t> &app_limits,
                         const std::vector<int64_t> &init_limits, int64_t fallback) {
    return pod_memory_limit(app_limits, init_limits, fallback);
}

// The pod uids that have a directory under a parent.
std::vector<std::string> pod_cgroup_uids(const std::vector<PodCgroupParent> &parents);

// Removes the pod's directories, its containers' first (a directory that
// still holds a process stays: EBUSY). The failures other than "already gone", one line each.
std::vector<std::string> remove_pod_cgroup(const std::vector<PodCgroupParent> &parents,
                                           std::string_view pod_uid);

// Removes the own parents' job directories once they hold no pod's (rmdir:
// EBUSY and ENOTEMPTY leave them). The failures other than "already gone"
// and "still in use".
std::vector<std::string> remove_own_job_cgroups(const std::vector<PodCgroupParent> &parents);

}  // namespace sk
