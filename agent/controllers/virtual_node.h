// One virtual node = one (job, slurm node): its Node, its Lease and the pods
// bound to it. Split by concern into node_lease.cc (registration, status,
// heartbeat, recreate, cordon), pods.cc (watch API -> runtime, runtime status
// -> API, deletion) and deregister.cc (the end of the job). Each concern owns
// its timers and back-off. All methods run on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <json/json.h>

#include "agent/backoff.h"
#include "agent/agent_config.h"
#include "agent/event_correlator.h"
#include "agent/job_store.h"
#include "agent/kube_client.h"
#include "agent/kube_time.h"
#include "agent/log_index.h"
#include "agent/node_builder.h"
#include "agent/observer.h"
#include "agent/pod_status_patch.h"
#include "agent/runtime.h"
#include "uv/handles.h"
#include "common/protocol.h"

namespace sk::agent {

struct AgentContext {
    uv_loop_t *loop = nullptr;
    KubeClient *kube = nullptr;
    const AgentConfig *cfg = nullptr;
    const Clock *clock = nullptr;
    JobStore *store = nullptr;
    NodeSpecInput host;  // host facts; node_name/job filled per node
    // Optional (tests may leave them null/empty):
    LogIndex *logs = nullptr;            // what the kubelet endpoint serves
    EventCorrelator *events = nullptr;   // event de-duplication (count + lastTimestamp)
    const AgentObserver *obs = nullptr;  // metrics
    // Asks Slurm for a job's end time (unix s, 0 = unknown); answers on the loop.
    std::function<void(uint32_t job_id, std::function<void(int64_t)>)> job_end_time;
};

// Agent shutdown: ends the background retries of deletes that deregisters
// could not finish (they own themselves); the garbage collection of the next
// agent takes them over.
void cancel_leftover_deletes(AgentContext &ctx);

// The per-job state dir handed to the shim at attach (logs live below it).
std::string shim_state_dir_for(const AgentConfig &cfg, uint32_t job_id,
                               const std::string &slurm_node);

class VirtualNode : public std::enable_shared_from_this<VirtualNode> {
  public:
    VirtualNode(AgentContext &ctx, JobRecord rec);
    ~VirtualNode();

    // Creates (or adopts) the Node, then the Lease, then watches the pods.
    // ready_cb is called once: ok when the Node exists with Ready=True, or
    // the first non-transient failure.
    void start(std::function<void(Status)> ready_cb);
    // Stops timers and watches, deletes nothing (agent shutdown).
    void stop();
    // shim_pid: the attached shim's pid (SO_PEERCRED), 0 when unknown; lets
    // the node tell a shim that died from one that will reconnect.
    void set_runtime(std::unique_ptr<PodRuntime> rt, int shim_pid = 0);
    PodRuntime *runtime() { return runtime_.get(); }
    // The job ended: cordon + NoExecute taint, stop pods within grace_s, final
    // statuses, delete pods, Lease, Node; done(pods_stopped) within grace_s + 5 s.
    void deregister(uint32_t grace_s, const std::string &reason,
                    std::function<void(uint32_t)> done);

    proto::NodeState state() const;
    // Adds this node's pods per phase (Pending for pods not yet reported).
    void count_phases(std::map<std::string, int64_t> *by_phase) const;
    const JobRecord &record() const { return rec_; }
    std::string prefix() const { return "[node " + rec_.node_name + "]"; }

  private:
    struct PodEntry {
        Json::Value api;         // last Pod seen from the API (watch, list, PATCH reply)
        Json::Value rt_status;   // last status from the runtime
        bool sent = false;       // handed to the runtime
        bool resolving = false;  // env references being fetched
        bool killing = false;
        bool refused = false;
        bool deleting = false;
        bool patching = false;  // a status PATCH in flight
        bool dirty = false;     // a newer runtime status arrived meanwhile
        int64_t last_event_rv = 0;
        bool rt_events = false;       // the runtime reports BackOff/Unhealthy itself
        int64_t seen_us = 0;          // first seen (pod-start latency)
        bool start_reported = false;  // Running posted once
        bool shim_lost = false;       // failed because its shim died: final
    };

    // node_lease.cc
    void create_node();
    void adopt_existing_node();
    void node_ready(const std::string &uid);
    void post_status(bool ready, std::function<void(Status)> done = {});
    void create_lease();
    void renew_lease();
    void check_node();
    void cordon(const k8s::Taint &taint, const std::function<void(Status)> &done, int attempts = 0);
    void schedule_end_cordon();
    void query_end_time();
    void retry_node(const Status &why);
    NodeSpecInput spec_input() const;

    // pods.cc
    void list_pods();
    void start_watch();
    void on_watch_event(const WatchEvent &e);
    void on_watch_end(const Status &st);
    void sync_pod(const Json::Value &pod);
    void forget_pod(const std::string &uid);
    bool namespace_allowed(const std::string &ns) const;
    void run_pod(const std::string &uid);
    void kill_pod(const std::string &uid, uint32_t grace_s, const std::string &reason);
    void delete_pod(const std::string &uid);
    void on_runtime_status(const PodSnapshot &snap);
    void push_status(const std::string &uid);
    void post_events(const Json::Value &pod, const Json::Value &old_status,
                     const Json::Value &new_status);
    void post_event(const Json::Value &pod, const EventSpec &e);
    void post_runtime_events(const Json::Value &pod, const std::vector<RuntimeEvent> &events);
    void index_logs(const PodSnapshot &snap);
    void unindex_logs(const std::string &uid);
    void reconcile_adopted();
    void on_runtime_lost();
    void watch_lost_shim();
    void on_shim_dead();
    void fail_shim_lost(const std::string &uid);

    // deregister.cc
    void drain_step();
    void finish_deregister();
    bool all_pods_stopped() const;

    AgentContext &ctx_;
    JobRecord rec_;
    std::unique_ptr<PodRuntime> runtime_;
    std::map<std::string, PodEntry> pods_;
    std::map<std::string, PodSnapshot> adopted_;  // from a runtime snapshot, before the list
    bool listed_ = false;
    std::string pods_rv_;
    uint64_t watch_id_ = 0;
    Backoff watch_backoff_{500, 30000};
    Timer watch_timer_;
    int shim_pid_ = 0;  // the attached (or last) shim
    unsigned long long shim_start_ticks_ = 0;
    bool shim_dead_ = false;  // it died and no shim replaced it
    Timer shim_timer_;

    bool ready_ = false;
    bool stopped_ = false;
    bool lease_failing_ = false;
    int64_t ready_since_ = 0;
    int64_t start_us_ = 0;
    Json::Value lease_;
    Backoff node_backoff_{200, 30000};
    Timer node_timer_, lease_timer_, status_timer_, check_timer_, end_timer_;
    std::function<void(Status)> ready_cb_;

    bool draining_ = false;
    std::string drain_reason_;
    uint32_t drain_grace_ = 30;
    uint32_t pods_stopped_ = 0;
    int pending_deletes_ = 0;
    bool finishing_ = false;
    std::function<void(uint32_t)> drain_done_;
    Timer drain_timer_;
};

}  // namespace sk::agent
