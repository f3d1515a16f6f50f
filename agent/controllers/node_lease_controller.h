// The Node and the Lease of one virtual node: create (or adopt after an agent
// restart) the Node, post its status every status_report_s, create and renew
// the Lease every lease_renew_s (re-read after a 409, re-created after a 404
// or for a new Node uid), check the Node every node_check_s and re-create it
// when it was deleted. The job's end time and suspension are its
// JobFollower's (agent/controllers/job_follower.h: the cordons ahead of the
// end and while suspended, the drain before the end); while suspended the
// Node is Ready=False (JobSuspended). Owns its timers and its back-off; the
// drain takes the Node over with release().
// All methods run on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <json/json.h>

#include "agent/controllers/agent_context.h"
#include "agent/controllers/job_follower.h"
#include "agent/controllers/node_bound.h"
#include "agent/core/job_store.h"
#include "agent/core/timer_source.h"
#include "common/backoff.h"

namespace sk::agent {

class NodeLeaseController : public NodeBound, private JobFollower::Host {
  public:
    // rec is the VirtualNode's job record: this controller sets its node_uid
    // and end_time and saves it. on_reachable runs when Lease renewals work
    // again after failing.
    NodeLeaseController(AgentContext &ctx, JobRecord &rec, std::function<void()> on_reachable);
    NodeLeaseController(const NodeLeaseController &) = delete;
    NodeLeaseController &operator=(const NodeLeaseController &) = delete;

    // Creates (or adopts) the Node, then the Lease; schedules the end-time
    // cordon. ready_cb is called once: ok when the Node exists with
    // Ready=True, or the first non-transient failure.
    void start(std::function<void(Status)> ready_cb);
    // The drain owns the Node from now on: no status reports, renewals,
    // checks or re-creation any more (cordon() still works).
    void release();
    // Stops every timer (agent shutdown, or the node is gone).
    void stop();

    // Reads the Node, adds the taint and unschedulable (merge patch; retried
    // on 409 up to 5 times).
    void cordon(const k8s::Taint &taint, const std::function<void(Status)> &done, int attempts = 0);

    // The pods' drain ahead of the job's end (--k8s-drain-before, agent.conf
    // drain_before_end): drain(end_time) when it is due (again when the end
    // came closer), drain(0) when the end moved away after it.
    void set_end_drain(std::function<void(int64_t)> drain) { job_.set_end_drain(std::move(drain)); }
    // Called with the job's Node object once created or adopted (before
    // Ready is reported).
    void set_on_node(std::function<void(const Json::Value &)> cb) { on_node_ = std::move(cb); }
    // The job was suspended (true) or resumed (false): the pods are paused or
    // continued by the owner (VirtualNode), with this message.
    void set_on_suspend(std::function<void(bool, const std::string &)> cb) {
        job_.set_on_suspend(std::move(cb));
    }
    // Binds the follower with the controller (NodeBound).
    void bind(const std::weak_ptr<void> &owner) {
        NodeBound::bind(owner);
        job_.bind(owner);
    }
    // The job's shim died (down, its pid) and none replaced it yet, or a new
    // one attached (up): the Node is Ready=False (KubeletNotReady, "container
    // runtime is down", as a kubelet whose runtime is gone) meanwhile, and an
    // Event says each change.
    void set_runtime_down(bool down, int shim_pid);
    bool ready() const { return ready_; }
    bool suspended() const { return job_.suspended(); }
    bool runtime_down() const { return runtime_down_; }
    bool lease_failing() const { return lease_failing_; }
    std::string lease_uid() const { return lease_["metadata"]["uid"].asString(); }

  private:
    // Active: registering or registered. Released: the drain owns the Node.
    // Stopped: nothing more is done.
    enum class Mode { Active, Released, Stopped };

    std::string prefix() const { return "[node " + rec_.node_name + "]"; }
    NodeSpecInput spec_input() const;
    void create_node();
    void adopt_existing_node();
    void replace_previous_node(const Json::Value &node);
    void node_ready(const std::string &uid);
    // The Node was created with Ready=True: remove the not-ready:NoSchedule
    // taint the API server's admission added, instead of waiting for the
    // controller-manager to see Ready (agent.conf lift_not_ready_taint).
    // Re-read and retried on a 409; any other failure leaves it to the
    // controller-manager, which lifts it as for any Ready node.
    void lift_not_ready(const Json::Value &node, int attempts = 0);
    void post_status(bool ready, std::function<void(Status)> done = {});
    void create_lease();
    void renew_lease();
    void check_node();
    // The Lease is gone (a 404, or a 409 whose GET is a 404): created again at
    // the next renewal, after the Node is checked.
    void lease_gone();
    std::string runtime_down_message() const;
    // JobFollower::Host
    void post_suspension_status() override;
    void post_node_event(const char *type, const char *reason, const std::string &message) override;
    void retry_node(const Failure &why);
    void schedule_renewal();
    void retry_lease(const Failure &why);
    void call_ready_cb(const Status &st);

    AgentContext &ctx_;
    JobRecord &rec_;
    std::function<void()> on_reachable_;
    Mode mode_ = Mode::Active;
    bool ready_ = false;
    bool lease_failing_ = false;
    int64_t ready_since_ = 0;
    int64_t start_us_ = 0;
    Json::Value lease_;
    Backoff node_backoff_{200, 30000};
    Backoff lease_backoff_;
    int64_t lease_renewed_us_ = 0;  // the last renewal (or creation) the API server took
    std::string node_refusal_;      // the Node creation's refusal last posted as an Event
    std::function<void(const Json::Value &)> on_node_;
    bool runtime_down_ = false;
    int dead_shim_pid_ = 0;
    ControllerTimer node_timer_, lease_timer_, status_timer_, check_timer_;
    JobFollower job_;  // after rec_ and the timers' source: made from them
    std::function<void(Status)> ready_cb_;
};

}  // namespace sk::agent
