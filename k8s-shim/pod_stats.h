// What a job's pods use, measured from their processes for the agent's
// kubelet stats (pod_stats, docs/protocol.md; agent/kubelet/kubelet_stats.h renders
// them). The shim runs as the job's user and owns every process it measures;
// it still reads /proc and the cgroup files bounded and without following a
// symlink (common/fs.h read_file), and the agent validates what it is sent.
//
// What is counted for a container: every live process below its supervisor
// (k8s-shim/supervise.h: a child subreaper, so a daemon that left the group
// is still its descendant), the supervisor included.
//  - CPU: user + system time of each, plus the time of the children each has
//    reaped (cutime, cstime): a process that exited and was waited for by a
//    process of the container still counts. Lost: a process reaped by a
//    parent that ignores SIGCHLD (the kernel then accounts it to nobody).
//    Resolution: the kernel's clock tick (sysconf(_SC_CLK_TCK), usually 10 ms).
//  - Memory: the sum of the processes' resident set sizes (shared pages count
//    once per process that maps them: an upper bound of the working set).
// The node-level figure is the job's share of the host: its Slurm cgroup
// (common/cgroup/cgroup_usage.h), else the sum of the pods.
//  - Disk: the space a pod's directory in the shim's state takes (its logs,
//    volumes and records: ephemeral-storage) and each container's log
//    directory in it (logs), walked as dir_disk_use() says.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cgroup/cgroup_usage.h"
#include "common/daemons/shim_protocol.h"

namespace sk::shim {

// The fields of /proc/<pid>/stat the figures come from (proc(5)).
struct ProcUsage {
    int ppid = 0;            // field 4
    uint64_t utime = 0;      // 14, clock ticks
    uint64_t stime = 0;      // 15
    uint64_t cutime = 0;     // 16: waited-for children's, ticks
    uint64_t cstime = 0;     // 17
    uint64_t rss_pages = 0;  // 24
    std::string comm;        // 2, without its parentheses
};
// Pure: parses /proc/<pid>/stat text; the command name (field 2) may hold
// spaces and ')'. False, *out untouched, unless fields 4, 14-17 and 24 are
// decimal numbers.
bool parse_proc_usage(std::string_view text, ProcUsage *out);

// The processes of the host at one moment, by pid.
using ProcessTable = std::map<int, ProcUsage>;
// Every /proc/<pid>/stat readable now (bounded reads; at most max_procs).
ProcessTable read_process_table(size_t max_procs = 1 << 20);

struct TreeUsage {
    uint64_t cpu_ticks = 0;
    uint64_t rss_pages = 0;
    size_t processes = 0;
};
// Pure: root and its descendants in `table` (none when root is not there):
// the sum of utime+stime+cutime+cstime and of the RSS.
TreeUsage tree_usage(const ProcessTable &table, int root);
// Pure: root and its descendants in `table`, root first (none when root is
// not there).
std::vector<int> tree_pids(const ProcessTable &table, int root);
// Pure: an image container's own processes (k8s-shim/podman.h), below the
// supervisor `root`: the descendants of each `conmon` child of root
// (podman's monitor, reparented to the supervisor), neither conmon nor
// podman's own waiting processes; what a kubelet measures of a container.
TreeUsage image_container_usage(const ProcessTable &table, int root);

// The cgroup figures (the job's, a pod's own): common/cgroup/cgroup_usage.h.

// The disk use of the directory tree at `dir`, which the job's user writes:
// every entry is looked at with fstatat(AT_SYMLINK_NOFOLLOW) from its
// directory's descriptor and every directory opened with openat(O_NOFOLLOW
// | O_DIRECTORY), so no symlink is ever followed (a link counts as itself);
// directories on another file system are counted but not entered (du -x);
// an inode with several links counts once. Bounded: at most max_entries
// entries and max_depth levels below `dir`; beyond either the walk stops and
// `capped` says the figures are what was counted. Error::NotFound when `dir`
// does not exist, Error::Io when it cannot be opened as a directory.
struct DirDiskUse {
    proto::DiskUse total;                            // dir itself included
    std::map<std::string, proto::DiskUse> by_child;  // each entry of dir, its subtree
    size_t entries = 0;                              // looked at, dir not counted
    bool capped = false;
};
struct DiskWalkLimits {
    size_t max_entries = 10000;
    int max_depth = 16;
};
Result<DirDiskUse> dir_disk_use(const std::string &dir, DiskWalkLimits limits = {});

// Ticks and pages in the units of the protocol.
uint64_t ticks_to_ns(uint64_t ticks);
uint64_t pages_to_bytes(uint64_t pages);

}  // namespace sk::shim
