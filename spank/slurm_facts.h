// Small pure readers of Slurm-provided text: slurm.conf's PrologFlags and
// /proc/<pid>/cgroup (cgroup v1) paths of a job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/cgroup/cgroup_files.h"

namespace sk::spank {

// True when slurm.conf text sets PrologFlags with Contain (the extern step
// exists only then). Keys and values are case-insensitive; the last
// PrologFlags line wins, as in Slurm.
bool prolog_flags_contain(const std::string &slurm_conf_text);

// For each cgroup v1 controller line of a process's cgroup membership
// (read_process_cgroups) that places it in Slurm job job_id
// (slurm_job_cgroups, common/cgroup/slurm_cgroup.h):
// "<root>/<controllers>/<path up to job_<id>>". Named hierarchies
// (name=systemd) and the v2 line ("0::") are skipped.
std::vector<std::string> job_cgroup_dirs(const std::string &proc_cgroup_text, uint32_t job_id,
                                         const std::string &root = kCgroupRoot);

// The CPUs a job holds on the node_index-th node of its node list (0-based),
// from SLURM_JOB_CPUS_PER_NODE as Slurm writes it in the prolog's
// environment ("4(x2),2": 4 on the first two nodes, 2 on the third); 0 when
// the text does not say. (Slurm 24.11 dropped slurm_job_cpus_allocated_on_node
// from its API: spank/hook_util.cc falls back on this.)
uint32_t cpus_per_node_at(const std::string &cpus_per_node, size_t node_index);

}  // namespace sk::spank
