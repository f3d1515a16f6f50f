// The agent: the socket protocol's operations over the registered virtual
// nodes, persistence, re-adoption at start and garbage collection.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "agent/cgroup_broker.h"
#include "agent/pod_tmpfs.h"
#include "agent/controllers/identity_pool.h"
#include "agent/controllers/virtual_node.h"
#include "agent/core/agent_config.h"
#include "agent/core/slurm_jobs.h"
#include "agent/garbage_collector.h"
#include "agent/images/image_store.h"
#include "agent/network/pod_network.h"
#include "agent/network/pod_routes.h"
#include "common/backoff.h"
#include "agent/node_endpoints.h"
#include "agent/socket_server.h"
#include "agent/stats_provider.h"
#include "agent/stream_sessions.h"
#include "agent/uv_timer_source.h"
#include "common/cgroup/pod_cgroup.h"
#include "uv/command_runner.h"

namespace sk::agent {

// Runs job_alive_command ({job} replaced) off the loop (uv/command_runner.h): Alive
// when it exits 0 and prints a live state (RUNNING, COMPLETING, ...), or
// prints nothing; Gone when it exits 0 with another state (COMPLETED, ...),
// or exits 1..125 saying nothing on stderr (the command's own "no") or
// Slurm's "Invalid job id" (squeue of a job Slurm has forgotten); Unknown
// when it cannot run, times out, is killed, exits 126/127, or fails with any
// other message (squeue: "Unable to contact slurm controller"): never
// delete on doubt. job_end_command prints Slurm's EndTime.
//
// At most kSlurmCommands of them run at once (uv/command_runner.h,
// CommandQueue), each killed after 10 s: a burst of registrations, or the
// periodic checks of many jobs, queues instead of starting one squeue each
// at once; the same question still waiting is asked once.
class CommandSlurmJobs : public SlurmJobs {
  public:
    static constexpr unsigned kSlurmCommands = 4;
    static constexpr uint64_t kCommandTimeoutMs = 10000;
    CommandSlurmJobs(uv_loop_t *loop, std::string alive_tmpl, std::string end_tmpl)
        : loop_(loop),
          alive_tmpl_(std::move(alive_tmpl)),
          end_tmpl_(std::move(end_tmpl)),
          commands_(loop, kSlurmCommands, kCommandTimeoutMs) {}
    void state(uint32_t job_id, std::function<void(JobState)> cb) override;
    void end_time(uint32_t job_id, std::function<void(int64_t)> cb) override;
    void end_state(uint32_t job_id, std::function<void(JobState, std::string)> cb) override;

  private:
    // Runs job_alive_command; cb gets the state and the command's output.
    void query(uint32_t job_id, const std::function<void(JobState, const std::string &)> &cb);
    uv_loop_t *loop_;
    std::string alive_tmpl_, end_tmpl_;
    CommandQueue commands_;
    // Jobs whose last query could not tell (warned once; shared with the
    // queries in flight, which may outlive this object).
    std::shared_ptr<std::set<uint32_t>> doubtful_ = std::make_shared<std::set<uint32_t>>();
};

// Pure: the state squeue printed -> alive.
bool job_state_is_alive(const std::string &state_output);
// Pure: job_alive_command's result -> what Slurm says (CommandSlurmJobs).
struct CommandResult;
JobState job_state_of(const CommandResult &r);
// Pure: the state job_alive_command printed for an ended job (COMPLETED,
// NODE_FAIL, ...) -> the drain reason its pods' final status gives
// (JobCompleted, NodeFail, Requeued for a job waiting to run again, ...;
// docs/user-guide.md, "How the job ended");
// JobEnded for anything else (nothing printed: Slurm forgot the job).
std::string end_reason_of(const std::string &state_output);

// An in-process pod runtime in place of the job's shim (agent.conf runtime =
// a name the daemon's build registered, agent/daemon.h): every virtual node
// gets one at registration, and shim attaches are refused.
using RuntimeFactory = std::function<std::unique_ptr<PodRuntime>(uv_loop_t *, const Clock &)>;

class Agent {
  public:
    Agent(uv_loop_t *loop, const AgentConfig &cfg, KubeClient &kube, const Clock &clock,
          SlurmJobs &slurm, NodeSpecInput host);
    ~Agent();
    // Loads the state dir (re-adopting live jobs, cleaning dead ones),
    // listens on the socket, arms garbage collection.
    Status start();
    void stop();
    // Optional, before start(): metrics callbacks, and the index the kubelet
    // endpoint resolves container logs from (both outlive the Agent).
    void set_observer(const AgentObserver *obs) {
        obs_ = obs;
        ctx_.obs = obs;
    }
    void set_log_index(LogIndex *logs) { ctx_.logs = logs; }
    // Optional: the API credential's state for `list` (agent/kube/api_auth.h
    // status()), which `slurm-k8s status` prints. Loop thread.
    void set_api_status(std::function<Json::Value()> f) { api_status_ = std::move(f); }
    // Optional, before start(): the kubelet endpoint's exec sessions, which
    // find their pods here and whose data connections arrive on this
    // agent's socket (exec_attach). Outlives the Agent.
    void set_stream_sessions(StreamSessions *s);
    // Optional, before start(): none = pods run in the job's shim (runtime = shim).
    void set_runtime_factory(RuntimeFactory f) { runtime_factory_ = std::move(f); }
    // The registered virtual nodes with their runtimes, for the kubelet's
    // stats (agent/stats_provider.h). Loop thread.
    std::vector<NodeRuntimeRef> node_runtimes();
    // Optional, before start(): each virtual node then gets its own kubelet
    // endpoint (kubelet_node_ports); it outlives the Agent.
    void set_node_endpoints(NodeEndpoints *e) { endpoints_ = e; }

  private:
    PeerStanding standing(const PeerCred &peer) const;
    void handle(const std::shared_ptr<Connection> &c, const proto::Request &req);
    // The register reply: the node's name and who may run pods there.
    proto::RegisterReply register_reply(const JobRecord &rec) const;
    void op_register(const std::shared_ptr<Connection> &c, const proto::Request &req);
    void op_deregister(const std::shared_ptr<Connection> &c, const proto::Request &req);
    void op_status(const std::shared_ptr<Connection> &c, const proto::Request &req);
    void op_list(const std::shared_ptr<Connection> &c, const proto::Request &req);
    void op_attach(const std::shared_ptr<Connection> &c, const proto::Request &req);
    // A container supervisor of an attached shim asks for its cgroup: the
    // asker checked here (its parent, uid, name), the rest by cgroups_.
    void op_cgroup_enter(const std::shared_ptr<Connection> &c, const proto::Request &req);
    Result<ExecTarget> exec_target(const std::string &ns, const std::string &pod);
    std::shared_ptr<VirtualNode> add_node(JobRecord rec, std::function<void(Status)> ready);
    // One round of garbage collection: collector_'s, and the registered
    // jobs' own checks (a deregister that never came, pod cgroups left).
    void gc();
    // Asks Slurm about a registered job; when it is Gone (never on Unknown)
    // and vn is still its node, not ending, it is deregistered as the
    // epilog's deregister does it (the drain with grace 0: Slurm ended the
    // job, its time and resources are over; then the Node, Lease and state
    // record go) and its shim dir is removed; logged with `why`.
    void collect_if_gone(const std::shared_ptr<VirtualNode> &vn, const char *why);
    void forget_node(const std::string &key);  // deferred erase (called from a node's callback)
    // Erases a node now; a slot's identity (node_names_per_slot) goes to
    // pool_ for the slot's next job.
    void release_node(const std::string &key);
    // The lowest slot of slurm_node no registered job holds.
    uint32_t free_slot(const std::string &slurm_node) const;
    bool keeps_identities() const;
    void report_pods();

    uv_loop_t *loop_;
    const AgentConfig &cfg_;
    KubeClient &kube_;
    const Clock &clock_;
    SlurmJobs &slurm_;
    JobStore store_;
    UvTimerSource timers_;  // the controllers' (AgentContext::timers)
    AgentContext ctx_;
    std::unique_ptr<SocketServer> server_;
    std::unique_ptr<SocketServer> admin_server_;  // root's own (AgentConfig::admin_socket_path)
    std::map<std::string, std::shared_ptr<VirtualNode>> nodes_;  // by job_key
    IdentityPool identities_;  // the slots' identities while no job holds them
    GarbageCollector collector_;
    CgroupBroker cgroups_;
    TmpfsMounts tmpfs_;                   // the pods' memory volumes (AgentContext::mounts)
    std::unique_ptr<ImageStore> images_;  // agent.conf image_store; null = none
    // agent.conf pod_network = cni (AgentContext::networks); null = none.
    std::unique_ptr<CniPodNetworks> networks_;
    // Lets go of the networks of pods no virtual node here knows (after a
    // crash, or a job gone while the agent was down): at gc_interval, once
    // every node listed its pods.
    void collect_networks();
    // The routes to the other hosts' pods (agent/network/pod_routes.h), from
    // a list and watch of the site's virtual Nodes (their podCIDR and
    // InternalIP), once per host.
    std::unique_ptr<PodRoutes> routes_;
    std::map<std::string, Json::Value> route_nodes_;  // by name
    std::string routes_rv_;
    uint64_t routes_watch_ = 0;
    bool routes_stopped_ = false;
    Timer routes_timer_;
    Backoff routes_backoff_{500, 30000};
    void list_route_nodes();
    void watch_route_nodes();
    void apply_routes();
    std::vector<uint32_t> admin_uids_;
    Timer gc_timer_;
    Timer pods_timer_;  // pods-by-phase gauge
    EventCorrelator events_;
    const AgentObserver *obs_ = nullptr;
    std::function<Json::Value()> api_status_;
    RuntimeFactory runtime_factory_;
    StreamSessions *streams_ = nullptr;
    NodeEndpoints *endpoints_ = nullptr;
};

}  // namespace sk::agent
