// Runs a short admin-configured command (job_alive_command, job_end_command)
// off the loop thread: `/bin/sh -c CMD` through posix_spawn (no fork() of the
// agent: uv/handles.h SpawnOptions::without_fork), stdout and stderr
// collected (bounded), killed at the deadline. The loop never blocks
// on Slurm (squeue may hang when slurmctld is slow).
#pragma once

#include <cstdint>
#include <deque>
#include <sys/types.h>

#include <functional>
#include <memory>
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

// The same with `input` on its stdin and `env` its whole environment: the
// CNI plugins (agent/network/pod_network.h), which read their
// configuration there.
void run_program_with_input(uv_loop_t *loop, std::vector<std::string> argv,
                            std::vector<std::string> env, const std::string &input,
                            uint64_t timeout_ms, std::function<void(const CommandResult &)> done);
// The same as another user, with an environment and a working directory of
// its own: for the node's image store (agent/images/image_store.h), whose
// commands run as its unprivileged user. stdout kept up to max_output.
struct RunAs {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<std::string> env;  // the whole environment ("NAME=value")
    std::string cwd;
    size_t max_output = 64 << 10;
};
// Returns what kills it (SIGKILL) while it runs, a no-op after; loop thread.
std::function<void()> run_program_as_async(uv_loop_t *loop, std::vector<std::string> argv,
                                           const RunAs &as, uint64_t timeout_ms,
                                           std::function<void(const CommandResult &)> done);

// At most `limit` commands of run_command_async at once, the rest started
// in the order asked (FIFO): a burst of 1000 registrations asks Slurm 1000
// times (job_end_command), which as 1000 concurrent squeue processes takes
// the host's CPU from everything else and sends slurmctld 1000 RPCs at once.
// A command line equal to one still waiting to start joins it (each caller
// gets its result); one already running is not joined (its answer may be
// older than the question). Each command's timeout counts from its start.
// The queue's state is shared with the commands in flight: destroying the
// queue drops what waits (its callbacks never run) and lets the running
// ones report.
class CommandQueue {
  public:
    using Done = std::function<void(const CommandResult &)>;
    CommandQueue(uv_loop_t *loop, unsigned limit, uint64_t timeout_ms);
    ~CommandQueue();
    CommandQueue(const CommandQueue &) = delete;
    CommandQueue &operator=(const CommandQueue &) = delete;
    void run(const std::string &cmdline, Done done);
    size_t waiting() const;
    unsigned running() const;

    struct State;  // command_runner.cc

  private:
    std::shared_ptr<State> st_;
};

// "{job}" in tmpl -> the job id.
std::string expand_job_command(const std::string &tmpl, uint32_t job_id);

}  // namespace sk::agent
