// What the agent asks Slurm of a job: whether it is still alive, when it
// ends, how it ended (agent/agent.h CommandJobChecker asks with the
// configured commands). Injectable so tests need no Slurm.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "agent/controllers/agent_context.h"

namespace sk::agent {

// JobState: agent/controllers/agent_context.h.

// "Is Slurm job N still alive?" and "when does it end?", asked of Slurm.
// Injectable so tests need no Slurm. Answers come later, on the loop.
class JobAliveChecker {
  public:
    virtual ~JobAliveChecker() = default;
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
