// Reading /proc/<pid>/... of processes that may belong to a job's user: the
// agent (root) checks its peers and the recorded processes of a dead shim
// with these, so every read is bounded and refuses a symlink (common/fs.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk {

// /proc/<pid>/<name> ("cgroup", "stat", ...), at most max_bytes. pid <= 0 is
// refused (Error::InvalidArgument: /proc/0 and negative pids name no
// process); a process that is gone is Error::NotFound.
Result<std::string> read_proc_file(int pid, const char *name, size_t max_bytes = size_t{64} * 1024);

// The fields of /proc/<pid>/stat that identify a process over time.
struct ProcStat {
    char state = 0;            // field 3: R, S, D, Z (zombie), X (dead), ...
    uint64_t start_ticks = 0;  // field 22: start time, clock ticks after boot
    int ppid = 0;              // field 4: the parent (0: none, as for pid 1)
};
// Parses the text of /proc/<pid>/stat. The command name (field 2) may hold
// spaces and ')': the fields resume after the last ')'. Fails when the
// text does not have 22 fields or field 4 or 22 is not a decimal number: then
// false, and *out is left as it was.
bool parse_proc_stat(std::string_view text, ProcStat *out);
// read_proc_file(pid, "stat") parsed; false when gone or malformed.
bool read_proc_stat(int pid, ProcStat *out);

// The start time of the live process `pid` (a pid and its start time name a
// process for good: a reused pid has another start time). 0 when the pid
// names no process or a zombie / dead one.
uint64_t proc_start_ticks(int pid);
// True when `pid` no longer names the live process that started at
// start_ticks: it exited, is a zombie, or the pid was reused. A start time of
// 0 (never known) never matches.
bool process_gone(int pid, uint64_t start_ticks);

// A mount of a /proc/<pid>/mountinfo text: its id, where, its file system
// type and source (the fields' octal escapes, \040 for a space, decoded).
// Lines without the " - " separator are skipped.
struct MountInfo {
    int id = 0;
    std::string mount_point, fstype, source;
};
std::vector<MountInfo> parse_mountinfo(std::string_view text);

}  // namespace sk
