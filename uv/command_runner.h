// Runs a short admin-configured command (job_alive_command, job_end_command)
// off the loop thread: `/bin/sh -c CMD` through posix_spawn (no fork() of the
// agent: uv/handles.h SpawnOptions::without_fork), stdout and stderr
// collected (bounded), killed at the deadline. The loop never blocks
// on Slurm (squeue may hang when slurmctld is slow).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

// The same for a program and its arguments, no shell: argv[0] is looked up
// in PATH unless it holds a '/'; extra_env ("NAME=value") is added to this
// process's environment, replacing variables of the same name.
void run_program_async(uv_loop_t *loop, std::vector<std::string> argv,
                       const std::vector<std::string> &extra_env, uint64_t timeout_ms,
                       std::function<void(const CommandResult &)> done);

// "{job}" in tmpl -> the job id.
std::string expand_job_command(const std::string &tmpl, uint32_t job_id);

}  // namespace sk::agent
