// The files every cgroup user reads or writes, in one place: where the
// cgroup file systems are mounted, a process's cgroup membership
// (/proc/<pid>/cgroup, bounded), a directory's member processes and moving
// one in (cgroup.procs), and the OOM kill counts (memory.events,
// memory.oom_control). The agent, the shim and the plugin build and read
// cgroup paths only through common/cgroup/ (this file, pod_cgroup.h,
// slurm_cgroup.h, cgroup_devices.h, bpf_devices.h).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace sk {

// Where the cgroup file systems are mounted (v1 hierarchies below it, or the
// v2 tree itself).
constexpr const char kCgroupRoot[] = "/sys/fs/cgroup";
// A cgroup file read whole (membership, a flat-keyed stats file): at most this.
constexpr size_t kMaxCgroupFileBytes = size_t{64} * 1024;

// /proc/<pid>/cgroup of pid (0: this process), bounded by kMaxCgroupFileBytes.
Result<std::string> read_process_cgroups(pid_t pid = 0);

// The processes in dir's cgroup.procs, read with a bound (root reads it; a
// job's processes fill it): 4 MiB holds over 500,000 pids. Empty when the
// file cannot be read (the cgroup is gone).
std::vector<pid_t> read_cgroup_procs(const std::string &dir);

// Moves pid into the cgroup dir (writes its cgroup.procs).
Status move_to_cgroup(const std::string &dir, pid_t pid);

// The "oom_kill" count of a flat-keyed cgroup file (v1 memory.oom_control,
// v2 memory.events); -1 when the file has none, `absent` when it cannot be
// opened.
long long oom_kill_count(const std::string &path, long long absent);

// The OOM kills of a container: its own cgroup below its pod's (made by the
// agent: common/cgroup/pod_cgroup.h) when the pod has one, else the job's
// v2 cgroup the process (own_cgroups: its /proc/self/cgroup text) is in;
// -1 when neither can be read.
long long container_oom_kills(const std::string &own_cgroups, const std::string &pod_uid,
                              uint32_t job_id, const std::string &container,
                              const std::string &root = kCgroupRoot);

}  // namespace sk
