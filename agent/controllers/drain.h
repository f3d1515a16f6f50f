// The end of the job on one virtual node: cordon + NoExecute taint, stop
// every pod within the grace budget, final statuses naming the job's end,
// delete the pods (grace 0, uid precondition), then the Lease and the Node,
// then the state file. Bounded: done comes after grace + 5 s at the latest;
// deletes that failed by then (API server unreachable) go on in the
// background, then to the garbage collection of any agent; so does the pod
// list when none came back by then (each pod it names is deleted). Owns its timer.
// All methods run on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "agent/controllers/agent_context.h"
#include "agent/controllers/node_bound.h"
#include "agent/controllers/node_lease_controller.h"
#include "agent/controllers/pod_controller.h"
#include "agent/core/job_store.h"
#include "agent/core/timer_source.h"

namespace sk::agent {

class Drain : public NodeBound {
  public:
    // rec is the VirtualNode's job record (marked draining, then removed
    // from the store); node and pods are its controllers.
    Drain(AgentContext &ctx, JobRecord &rec, NodeLeaseController &node, PodController &pods);
    Drain(const Drain &) = delete;
    Drain &operator=(const Drain &) = delete;

    // Starts the drain; done(pods_stopped) once the node is gone. A second
    // call (an epilog retry) is answered when the first ends.
    void start(uint32_t grace_s, const std::string &reason, std::function<void(uint32_t)> done);
    bool active() const { return phase_ != Phase::Idle; }
    // Agent shutdown: the drain stops where it is (the next agent resumes it
    // from the state file).
    void stop();

  private:
    // Idle: the job runs. Stopping: the pods stop. Removing: the Lease and
    // the Node are being deleted. Done: done was called.
    enum class Phase { Idle, Stopping, Removing, Done };

    std::string prefix() const { return "[node " + rec_.node_name + "]"; }
    void remove_node();
    void post_end_event(uint32_t grace_s);

    AgentContext &ctx_;
    JobRecord &rec_;
    NodeLeaseController &node_;
    PodController &pods_;
    Phase phase_ = Phase::Idle;
    std::string reason_;
    std::function<void(uint32_t)> done_;
    ControllerTimer timer_;
};

// Agent shutdown: ends the background retries of deletes that drains could
// not finish (they own themselves); the garbage collection of the next agent
// takes them over.
void cancel_leftover_deletes(AgentContext &ctx);

// The pods bound to node_name that the agent never listed (a Node removed
// by the garbage collection): listed by spec.nodeName and deleted (grace 0,
// uid precondition) in the background, retried like a drain's leftover
// deletes; with a final_reason (a drain reason: NodeFail, JobCancelled, ...)
// each one not terminal is first set Failed with it
// (orphan_final_status_patch). Nothing is deleted once the job (job_id on
// slurm_node) has a state file again: it re-registered and its node has the
// pods.
void delete_unlisted_pods(AgentContext &ctx, const std::string &node_name, uint32_t job_id,
                          const std::string &slurm_node, const std::string &final_reason = "");

}  // namespace sk::agent
