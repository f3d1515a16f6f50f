// The cgroup figures of a job and of a pod: where they are (the job's Slurm
// cgroup, a pod's own cgroups: common/cgroup/pod_cgroup.h) and what they say
// (cgroup v1 cpuacct.usage and memory.usage_in_bytes minus
// total_inactive_file; v2 cpu.stat usage_usec and memory.current minus
// inactive_file). The shim's stats (k8s-shim/pod_stats.h) report them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cgroup/cgroup_files.h"
#include "common/cgroup/slurm_cgroup.h"

namespace sk {

// Pure: the value of `key` in a flat-keyed cgroup file (memory.stat,
// cpu.stat: "key value" lines); nullopt when absent or not a number.
std::optional<uint64_t> flat_keyed_value(std::string_view text, std::string_view key);
// Pure: a single-value cgroup file (memory.current, cpuacct.usage).
std::optional<uint64_t> single_value(std::string_view text);

// Where the job's cgroup figures are, under `root` (kCgroupRoot), from
// the lines slurm_job_cgroups() kept: on v1 the cpuacct and memory
// hierarchies (mounted at root/<controller list>), on v2 the unified one.
struct JobCgroupFiles {
    bool v2 = false;
    std::string cpu_dir, memory_dir;  // "" when the job has none
};
JobCgroupFiles job_cgroup_files(const std::vector<CgroupLine> &job_lines,
                                const std::string &root = kCgroupRoot);

// Pure: the figures from the files' text. v1: cpuacct.usage (ns),
// memory.usage_in_bytes, memory.stat (total_inactive_file); v2: cpu.stat
// (usage_usec), memory.current, memory.stat (inactive_file). The working set
// is usage minus inactive file pages, never below 0. nullopt when a figure
// is missing.
struct NodeUsage {
    uint64_t cpu_ns = 0;
    uint64_t working_set_bytes = 0;
};
std::optional<NodeUsage> cgroup_usage(bool v2, std::string_view cpu_text,
                                      std::string_view memory_usage_text,
                                      std::string_view memory_stat_text);

// The job's usage from its cgroup files (job_id's cgroup among this
// process's, read_process_cgroups); nullopt when unreadable.
std::optional<NodeUsage> read_job_cgroup_usage(uint32_t job_id);

// A pod's figures from its own cgroups (common/cgroup/pod_cgroup.h), found from
// the shim's own cgroup membership text (read_process_cgroups; the shim is in
// the extern step): CPU from
// cpuacct.usage of its cpuacct cgroup (v1: the agent's tree of the job), the
// working set from its memory cgroup (usage_in_bytes minus
// total_inactive_file). Each nullopt when that cgroup or file is not there.
struct PodCgroupUsage {
    std::optional<uint64_t> cpu_ns, working_set_bytes;
};
PodCgroupUsage read_pod_cgroup_usage(std::string_view self_cgroup_text, uint32_t job_id,
                                     const std::string &pod_uid,
                                     const std::string &root = kCgroupRoot);

}  // namespace sk
