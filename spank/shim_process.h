// Starting and ending the per-job shim from the extern slurmstepd (root).
// No spank.h here; the facts behind every step are in
// spank/README.md ("Slurm facts").
//
// Lifetime design: the shim is forked from the extern step's task_post_fork,
// so it sits in step_extern's devices and cpuset cgroups (only the job's GPUs
// and CPUs) but in the *job-level* freezer cgroup. Slurm's proctrack kills
// only freezer step_extern, ~2 ms after SIGTERM, which would give pods no
// grace; outside it the shim survives Slurm's kill and the plugin stops it
// itself in slurm_spank_exit (stop_shim + remove_job_cgroups), where nothing
// of the job may be left behind.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace sk::spank {

struct ShimSpec {
    std::string path;               // absolute
    std::vector<std::string> argv;  // argv[0] included
    std::vector<std::string> env;   // "K=V"; the whole environment of the shim
    uid_t uid = 0;
    gid_t gid = 0;
    std::string home = "/";
    std::string log_path;  // stdout+stderr, opened by root before the fork
    // The shim's nice value, set while the child is still root (lowering it
    // needs CAP_SYS_NICE); std::nullopt = the extern step's own.
    std::optional<int> nice;
};

// Prepares everything before fork() (slurmstepd has threads: the child only
// makes async-signal-safe calls), then in the child: unblocks and resets all
// signals (slurmstepd blocks TERM, the mask survives exec), setsid, oom
// score 0, the nice value (not fatal: the shim logs the one it runs at),
// fds 0 = /dev/null and 1,2 = the log, all others closed, groups
// and ids of the user, chdir home, exec. The parent learns the exec result
// through a CLOEXEC pipe: a returned pid has exec'd.
Result<pid_t> spawn_shim(const ShimSpec &spec);

// Slurm's state of the job ("RUNNING", "COMPLETING", ...), asked with
// `squeue -h -j JOB -o %T` (found in PATH, else /usr/bin), output read up to
// 256 bytes, killed after timeout_ms. Empty when it could not be asked.
std::string slurm_job_state(uint32_t job_id, int timeout_ms);

// SIGTERM to the shim's process group, up to term_ms for it to exit, then
// SIGKILL to every process of `uid` in the given cgroup dirs (and their
// subdirectories) and to the group, until none is left or kill_ms passed.
// Reaps the shim (our child). Returns the number of processes still alive.
int stop_shim(pid_t shim, uid_t uid, const std::vector<std::string> &job_cgroups, int term_ms,
              int kill_ms);

// Moves the calling process to the root of every hierarchy in which it sits
// inside a job dir, then removes the job dirs bottom-up, retrying EBUSY
// until timeout_ms. Returns the dirs that could not be removed.
std::vector<std::string> remove_job_cgroups(const std::vector<std::string> &job_cgroups,
                                            const std::string &root, int timeout_ms);

}  // namespace sk::spank
