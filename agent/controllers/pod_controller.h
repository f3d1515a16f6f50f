// The pods bound to one virtual node: API -> runtime (list + watch by
// spec.nodeName, resumed after a healthy close, relisted after 410 or a
// failure with back-off; env resolution, run, kill on deletionTimestamp,
// final delete) and runtime -> API (status PATCH only when it changed,
// kubelet-like Events), and what happens to them when the job's shim dies.
// At the job's end the drain hands it stop_all(). All methods run on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <set>
#include <string>
#include <vector>

#include <json/json.h>

#include "agent/controllers/agent_context.h"
#include "agent/controllers/env_resolver.h"
#include "agent/controllers/host_volumes.h"
#include "agent/controllers/node_bound.h"
#include "agent/controllers/pod_status_patch.h"
#include "agent/controllers/pod_volumes.h"
#include "agent/core/job_store.h"
#include "agent/core/runtime.h"
#include "agent/core/timer_source.h"
#include "common/backoff.h"

namespace sk::agent {

// How far the agent has taken a pod bound to its node.
enum class PodState : uint8_t {
    Pending,    // not handed to the runtime: no shim attached yet, or its last
                // start failed (retried with back-off and on the pod's next change,
                // as a kubelet's pod sync does: BoundPod::start_retry)
    Resolving,  // the ConfigMaps/Secrets its env references are being fetched
    Running,    // handed to the runtime, whose reports set its status (it may have exited)
    Killing,    // handed to the runtime and asked to stop
    Refused,    // its namespace may not use the job's nodes: the agent's Failed status is final
    ShimLost,   // its shim died: the agent's Failed status is final (a later
                // shim reports it as failed too, and frees it once it is deleted)
};

// One pod bound to the node, as the pod controller tracks it.
struct BoundPod {
    Json::Value api;        // last Pod seen from the API (watch, list, PATCH reply)
    Json::Value rt_status;  // last status from the runtime (or the agent's own final one)
    PodState state = PodState::Pending;
    // API operations in flight beside the state.
    struct InFlight {
        bool status_patch = false;  // a status PATCH
        bool patch_again = false;   // a newer status arrived meanwhile: PATCH again after it
        bool del = false;  // the DELETE was sent (set until the watch reports the pod gone;
                           // cleared after a failure so that it is retried)
    } in_flight;
    bool rt_events = false;        // the runtime reports BackOff/Unhealthy itself
    int64_t seen_us = 0;           // first seen (pod-start latency)
    bool start_reported = false;   // the Running phase was posted once
    bool running_seen = false;     // the runtime reported the Running phase once
    bool end_drained = false;      // stopped ahead of the job's end: final status Terminated
    bool memory_released = false;  // its memory volumes' tmpfs unmounted (it ended)
    // Its own network's address (AgentContext::networks); "" = the node's.
    // Kept after the network is let go: a kubelet's status keeps podIP.
    std::string pod_ip;
    bool network_released = false;  // let go (it ended)
    // Its start failed: a read it depends on (a TokenRequest, a ConfigMap, a
    // Secret, an image pull secret) was refused or found nothing, or its env
    // did not resolve. As a kubelet's pod sync, the start is tried again with
    // capped back-off while the pod lives and is bound here (a node
    // identity's reads are refused a moment after a binding, until the API
    // server's Node authorizer has seen it); a failure that persists is
    // posted once as an Event and in the pod's status.
    // Its refusal waits for its owner's turn (PodController::refuse): unix
    // us, 0 = none.
    int64_t refuse_at_us = 0;
    struct StartRetry {
        unsigned failures = 0;  // in a row; 0 = none
        int64_t first_us = 0;   // the first of them
        int64_t at_us = 0;      // the next attempt (0 = none due)
        std::string reported;   // the message in the pod's status and Event ("" = none)
    } start_retry;

    bool in_runtime() const { return state == PodState::Running || state == PodState::Killing; }
};

class PodController : public NodeBound, private PodVolumes::Pods {
  public:
    PodController(AgentContext &ctx, const JobRecord &rec);
    PodController(const PodController &) = delete;
    PodController &operator=(const PodController &) = delete;

    // Lists the pods bound to the node, then watches them.
    void start();
    // Stops timers and the watch; deletes nothing.
    void stop();
    // A new runtime (a shim attached): adopt its pods, run the waiting ones.
    // shim_pid: its pid (0 = unknown), to tell a dead shim from one that
    // reconnects once it went away.
    void set_runtime(std::unique_ptr<PodRuntime> rt, int shim_pid);
    PodRuntime *runtime() { return runtime_.get(); }
    // Binds the volumes' callbacks with the controller's (NodeBound).
    void bind(const std::weak_ptr<void> &owner) {
        NodeBound::bind(owner);
        volumes_.bind(owner);
    }
    // Called with the dead shim's pid once it is known dead (not when it
    // only reconnects), so the owner reports the node NotReady until a new
    // shim attaches (set_runtime).
    void set_on_shim_dead(std::function<void(int)> cb) { on_shim_dead_ = std::move(cb); }
    // The API server is reachable again: a watch waiting out its back-off
    // relists now.
    void relist_if_idle();
    // The job's Node object, created or adopted (the first one counts: one
    // re-created later does not move it). A slot's node name
    // (JobRecord::slot) is every job's on the slot: a pod bound to it
    // before this job's Node was created (its PodScheduled time, or its
    // creation for one made with spec.nodeName) was meant for an earlier
    // job and is refused (PreviousJobPod); until the Node is known such a
    // node's pending pods wait.
    void set_node(const Json::Value &node);

    // The job's end: stop every running pod within grace_s, give the others
    // a final status naming `reason`, then delete them all (after their last
    // status is written). done runs once all_stopped(), possibly before
    // stop_all returns. No pod starts from now on.
    void stop_all(uint32_t grace_s, const std::string &reason, std::function<void()> done);
    // The drain ahead of the job's end (NodeLeaseController::set_end_drain):
    // from now on every running pod is stopped with its grace period (cut
    // to the time left before end_time) and ends Failed/Terminated with a
    // DisruptionTarget condition, as after a kubelet's graceful node
    // shutdown; a pod not started yet, or bound later, is refused
    // (NodeShutdown). end_time 0: the end moved away, pods start again.
    void drain_before_end(int64_t end_time);
    // A pod list came back at least once (every pod bound here is known).
    bool listed() const { return listed_; }
    // How many running pods stop_all asked to stop.
    uint32_t asked_to_stop() const { return stop_ ? stop_->asked : 0; }
    // Listed at least once, and no pod left in the API (nothing running,
    // writing a status or being deleted).
    bool all_stopped() const;
    // The node goes now (all stopped, or the drain's time is up): no further
    // drain steps, the watch ends. Pods still known are returned by remaining().
    void end_stop_all();
    struct PodName {
        std::string uid, ns, name;
    };
    std::vector<PodName> remaining() const;

    size_t size() const { return pods_.size(); }
    // The pod ns/name as last seen in the API when the runtime runs it
    // (exec's and port-forward's target), else null.
    const Json::Value *running_pod(const std::string &ns, const std::string &name) const;
    // The pod with this uid that was handed to the runtime, or null.
    const Json::Value *runtime_pod(const std::string &uid) const;
    // The attached shim's pid; 0 while no runtime is attached.
    int shim_pid() const { return runtime_ ? shim_pid_ : 0; }
    uint32_t unfinished() const;  // pods not in a terminal phase (API view)
    // The images (as podman names them in its store: common/daemons/image_ref.h
    // image_store_name) of the pods that may still start or run here: the
    // node's image store keeps them (agent/images/image_store.h).
    void images_in_use(std::set<std::string> *out) const;
    // The pods whose own network is not let go (every one known but those
    // whose network was released); false before the first list.
    bool networks_in_use(std::set<std::string> *out) const;
    void count_phases(std::map<std::string, int64_t> *by_phase) const;

  private:
    std::string prefix() const;
    // PodVolumes::Pods
    bool runs(const std::string &uid) const override;
    bool has_runtime() const override { return runtime_ != nullptr; }
    void update_files(const proto::PodFilesUpdate &m,
                      std::function<void(const Status &)> done) override;
    void list_pods();
    void start_watch();
    void on_watch_event(const WatchEvent &e);
    void on_watch_end(const Status &st);
    void sync_pod(const Json::Value &pod);
    void forget_pod(const std::string &uid);
    // Why the pod may not run here at all (reason, message): its namespace
    // is not allowed on the job's nodes, or a DaemonSet owns it
    // (allow_daemonsets off). nullopt: it may.
    std::optional<std::pair<std::string, std::string>> admission_refusal(
        const Json::Value &pod) const;
    void run_pod(const std::string &uid);
    // The pod may not run here (admission_refusal): Failed with the reason,
    // now or, when its owner was refused a moment ago, at its turn.
    void refuse(const std::string &uid, const std::string &reason, const std::string &msg);
    void arm_refusal_timer();
    void refusal_due(const std::string &uid);
    // Arms `timer` for the earliest `at` (µs) of the Pending pods; when it
    // fires, each passed `at` is cleared and each such pod still Pending is
    // handed to `due`, then `rearm` arms it again. The start retries and the
    // held refusals share this shape.
    void arm_pending_timer(ControllerTimer &timer, int64_t &(*at)(BoundPod &),
                           void (PodController::*due)(const std::string &),
                           void (PodController::*rearm)());
    // A start that failed with `st` (stage: what was being done, for the
    // kubelet's reason): schedules the next attempt, and reports the failure
    // in an Event and the pod's status once it persists.
    // Config: its env did not resolve (CreateContainerConfigError); Mount: a
    // read its volumes need (FailedMount); Sandbox: its own network
    // (FailedCreatePodSandBox).
    enum class StartStage { Mount, Config, Sandbox };
    void start_failed(const std::string &uid, const Status &st, StartStage stage);
    // Its own network (AgentContext::networks): the shim makes the
    // namespaces, the networks plug them in; then() once it has its address
    // (BoundPod::pod_ip), a start failure (Sandbox) otherwise.
    void attach_network(const std::string &uid, const std::function<void()> &then);
    // The rest of a start once its reads and network are done: env, memory
    // volumes, the runtime's run.
    void hand_to_runtime(const std::string &uid, const FetchedObjects &fetched, NodeFacts facts,
                         proto::HostVolumes host);
    // Its network let go (it ended or went; the address back to the range).
    void detach_network(const std::string &uid);
    // The pod may not run here (a node path outside volume_roots): Failed,
    // with why, as a refusal of the runtime.
    void refuse_pod(const std::string &uid, const std::string &why);
    std::vector<NfsMount> node_nfs_mounts() const;
    // Its emptyDir volumes of medium Memory as tmpfs (AgentContext::mounts),
    // before the runtime gets it; unmounted once it ended or is gone.
    Status mount_memory_volumes(const std::string &uid, const Json::Value &pod);
    void release_memory_volumes(BoundPod &p, const std::string &uid);
    void arm_start_timer();
    void start_due(const std::string &uid);
    // Words for a refusal that say what is missing for the identity the
    // node's requests go out under (its own system:node:<name>, or the agent's).
    std::string start_failure_hint(const Status &st, const std::string &ns, bool token) const;
    void kill_pod(const std::string &uid, uint32_t grace_s, const std::string &reason);
    // drain_before_end for one pod; true when it stopped or refused it.
    bool end_drain_pod(const std::string &uid);
    void delete_pod(const std::string &uid);
    void on_runtime_status(const PodSnapshot &snap);
    void push_status(const std::string &uid);
    void post_event(const Json::Value &pod, const EventSpec &e);
    void post_runtime_events(const Json::Value &pod, const std::vector<RuntimeEvent> &events);
    void index_logs(const PodSnapshot &snap);
    void unindex_logs(const std::string &uid);
    void reconcile_adopted();
    void on_runtime_lost();
    void watch_lost_shim();
    void on_shim_dead();
    void fail_shim_lost(const std::string &uid);
    // While stop_all is under way: final statuses, deletes, and done once
    // all_stopped(). Every change that may bring that closer calls it.
    void stop_step();
    bool stopping() const { return stop_.has_value(); }
    // Lists and watches go on: neither stop() nor end_stop_all() came.
    bool watching() const { return !stopped_ && !(stop_ && stop_->ended); }

    AgentContext &ctx_;
    const JobRecord &rec_;
    std::unique_ptr<PodRuntime> runtime_;
    std::map<std::string, BoundPod> pods_;
    std::map<std::string, PodSnapshot> adopted_;  // from a runtime snapshot, before the list
    bool listed_ = false;
    int64_t node_created_s_ = -1;  // the Node's creationTimestamp; -1 = not known yet
    bool stopped_ = false;
    std::string pods_rv_;
    uint64_t watch_id_ = 0;
    Backoff watch_backoff_{500, 30000};
    ControllerTimer watch_timer_;
    int shim_pid_ = 0;  // the attached (or last) shim
    unsigned long long shim_start_ticks_ = 0;
    bool shim_dead_ = false;  // it died and no shim replaced it
    std::function<void(int)> on_shim_dead_;
    ControllerTimer shim_timer_;
    ControllerTimer start_timer_;    // the next start retry (BoundPod::start_retry.at_us)
    ControllerTimer refusal_timer_;  // the next held refusal (BoundPod::refuse_at_us)
    // The start's reads, the tokens' renewal and the volumes' refresh; after
    // the timers' source and the pods it asks about.
    PodVolumes volumes_;
    // The refusals of each owner ("ns/owner/<uid>", "ns/pod/<name>").
    struct Refusals {
        unsigned count = 0;
        int64_t last_us = 0, next_us = 0;
    };
    std::map<std::string, Refusals> refusals_;

    struct StopAll {
        std::string reason;  // names the job's end in the final statuses
        std::function<void()> done;
        uint32_t asked = 0;
        bool ended = false;  // end_stop_all(): no further steps
    };
    std::optional<StopAll> stop_;
    int64_t end_drain_at_ = 0;      // drain_before_end's end_time, 0 = none
    size_t deletes_in_flight_ = 0;  // pod DELETEs sent and not answered yet (any phase)
};

}  // namespace sk::agent
