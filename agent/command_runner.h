// Runs a short admin-configured command (job_alive_command, job_end_command)
// off the loop thread: `/bin/sh -c CMD` through uv_spawn, stdout and stderr
// collected (bounded), killed at the deadline. The loop never blocks
// on Slurm (squeue may hang when slurmctld is slow).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

typedef struct uv_loop_s uv_loop_t;

namespace sk::agent {

struct CommandResult {
    bool ran = false;    // false: could not spawn, or killed at the deadline
    int exit_code = -1;  // valid when ran
    std::string output;  // stdout, at most 64 KiB
    std::string errors;  // stderr, at most 4 KiB (squeue says there why it failed)
    std::string error;   // why it did not run
};

// done runs on the loop, later (never inside the call), exactly once.
void run_command_async(uv_loop_t *loop, const std::string &cmdline, uint64_t timeout_ms,
                       std::function<void(const CommandResult &)> done);

// "{job}" in tmpl -> the job id.
std::string expand_job_command(const std::string &tmpl, uint32_t job_id);

}  // namespace sk::agent
