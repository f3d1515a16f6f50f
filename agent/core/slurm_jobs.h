// What the agent asks Slurm of a job: whether it is still alive (or
// suspended), when it ends, how it ended. One interface for every asker:
// the controllers (AgentContext::slurm: a job's end time and suspension),
// the garbage collector and the agent's own checks. The daemon's asks with
// the configured commands (agent/agent.h CommandSlurmJobs); tests answer
// themselves, so they need no Slurm. Answers come later, on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace sk::agent {

// What Slurm says of a job. Unknown: Slurm could not be asked (the command
// did not run, timed out, or failed with an error of its own): never delete
// anything of a job on Unknown.
// Suspended: alive, and every live state it printed is SUSPENDED (scontrol
// suspend, preemption by suspension).
enum class JobState { Alive, Suspended, Gone, Unknown };

class SlurmJobs {
  public:
    virtual ~SlurmJobs() = default;
    virtual void state(uint32_t job_id, std::function<void(JobState)> cb) = 0;
    // state() != Gone: a job Slurm cannot tell about counts as alive.
    void alive(uint32_t job_id, const std::function<void(bool)> &cb) {
        state(job_id, [cb](JobState s) { cb(s != JobState::Gone); });
    }
    // Unix seconds; 0 = unknown or no limit.
    // By value like alive(): the overriders keep cb for a later answer.
    // NOLINTNEXTLINE(performance-unnecessary-value-param): the interface's signature
    virtual void end_time(uint32_t /*job_id*/, std::function<void(int64_t)> cb) { cb(0); }
    // state(), with the reason a Gone job's end gives its pods' final
    // status and its Node's Event (end_reason_of); "JobEnded" when Slurm no
    // longer says how it ended.
    // NOLINTNEXTLINE(performance-unnecessary-value-param): the overriders keep cb
    virtual void end_state(uint32_t job_id, std::function<void(JobState, std::string)> cb) {
        state(job_id, [cb](JobState s) { cb(s, "JobEnded"); });
    }
};

}  // namespace sk::agent
