// What Slurm says of a virtual node's job while it runs, followed for its
// Node (a kubelet has no such duty; Slurm tells no plugin of either):
// - the job's end time, asked again every end_time_check_interval (a changed
//   time limit moves the plan): the Node is cordoned ahead of it (taint
//   slurm-k8s/job-ending, cordon_before_end) and the pods drained before it
//   (--k8s-drain-before, drain_before_end); an end that moved away undoes
//   both (docs/admin-guide.md "Cordon");
// - its suspension, asked every job_state_check_interval: while suspended
//   the Node carries the taint slurm-k8s/job-suspended, the pods are paused
//   by the owner, and the Node's status and Events say so through the Host
//   (docs/user-guide.md "Suspend and resume").
// Owned by the NodeLeaseController, which hands it the Node's cordons found
// on an adopted Node. All methods run on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <json/json.h>

#include "agent/controllers/agent_context.h"
#include "agent/controllers/node_bound.h"
#include "agent/core/job_store.h"
#include "agent/core/timer_source.h"

namespace sk::agent {

class JobFollower : public NodeBound {
  public:
    // What the follower asks of the Node's owner.
    class Host {
      public:
        virtual ~Host() = default;
        // The suspension changed (suspended() says which): the Node's Ready
        // condition changes with it.
        virtual void post_suspension_status() = 0;
        // What `kubectl describe node` and `kubectl get events` show.
        virtual void post_node_event(const char *type, const char *reason,
                                     const std::string &message) = 0;
    };

    // rec is the VirtualNode's job record: the follower sets its end_time and
    // saves it.
    JobFollower(AgentContext &ctx, JobRecord &rec, Host &host);
    JobFollower(const JobFollower &) = delete;
    JobFollower &operator=(const JobFollower &) = delete;

    // Plans from the record's end time, asks Slurm, and arms the periodic
    // questions (only with a SlurmJobs in the context).
    void start();
    // Stops following: every timer, and answers still to come are dropped.
    void stop();
    // A Node adopted after an agent restart: its end-time cordon is kept while
    // due (undone when the end moved away meanwhile), its suspension followed
    // from here (the next state check resumes it if Slurm did).
    void adopt(const Json::Value &node);

    // The pods' drain ahead of the job's end: drain(end_time) when it is due
    // (again when the end came closer), drain(0) when the end moved away.
    void set_end_drain(std::function<void(int64_t)> drain) { on_end_drain_ = std::move(drain); }
    // The job was suspended (true) or resumed (false): the pods are paused or
    // continued by the owner (VirtualNode), with this message.
    void set_on_suspend(std::function<void(bool, const std::string &)> cb) {
        on_suspend_ = std::move(cb);
    }
    bool suspended() const { return suspended_; }
    std::string suspend_message() const;

  private:
    std::string prefix() const { return "[node " + rec_.node_name + "]"; }
    void query_end_time();
    void schedule_end_cordon();
    void schedule_end_drain();
    bool end_cordon_due() const;
    int64_t drain_lead_s() const;   // the job's --k8s-drain-before, else the agent's
    int64_t cordon_lead_s() const;  // cordon_before_end, or the drain's lead if longer
    void query_job_state();
    void set_suspended(bool suspended);
    // The two cordons: ahead of the job's end (taint slurm-k8s/job-ending,
    // re-planned with end_gen_) and while it is suspended (slurm-k8s/
    // job-suspended, suspend_gen_). patch_cordon: GET + merge PATCH of one
    // (cordon) or its undoing, dropped when its plan changed meanwhile
    // (gen != its generation).
    enum class Cordon { End, Suspend };
    void patch_cordon(Cordon kind, bool cordon, uint64_t gen, int attempts = 0);
    uint64_t cordon_gen(Cordon kind) const { return kind == Cordon::End ? end_gen_ : suspend_gen_; }
    bool &cordoned(Cordon kind) { return kind == Cordon::End ? end_cordoned_ : suspend_cordoned_; }

    AgentContext &ctx_;
    JobRecord &rec_;
    Host &host_;
    bool active_ = true;
    // The end-time cordon: sent (or found on an adopted Node) and not undone.
    bool end_cordoned_ = false;
    bool end_query_in_flight_ = false;
    uint64_t end_gen_ = 0;      // bumped whenever the end-time cordon is re-planned
    bool end_drained_ = false;  // the drain ahead of the end was started
    std::function<void(int64_t)> on_end_drain_;
    // The job's suspension: as Slurm last said, and whether the Node carries
    // its cordon (sent, or found on an adopted Node, and not undone).
    bool suspended_ = false;
    bool suspend_cordoned_ = false;
    bool state_query_in_flight_ = false;
    uint64_t suspend_gen_ = 0;
    std::function<void(bool, const std::string &)> on_suspend_;
    ControllerTimer end_timer_, end_check_timer_, drain_timer_, state_timer_;
    // An end cordon that failed (the Node not created yet when Slurm's end
    // time came back, the API away) is tried again this soon, not at the
    // next end-time check (end_time_check_interval, 30 s).
    ControllerTimer cordon_retry_timer_;
    void retry_end_cordon();
};

}  // namespace sk::agent
