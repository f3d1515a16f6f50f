// One virtual node = one (job, slurm node): its Node, its Lease and the pods
// bound to it. VirtualNode owns the job record and wires three controllers,
// each with its own timers, back-off and no-op suppression:
//   NodeLeaseController (node_lease_controller.h): Node create/adopt, status,
//     Lease, re-creation, cordon;
//   PodController (pod_controller.h): watch API -> runtime, runtime status ->
//     API, deletion, a lost shim;
//   Drain (drain.h): the end of the job, asking the pod controller to stop
//     all pods and then removing the Lease and the Node.
// All methods run on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent/controllers/agent_context.h"
#include "agent/controllers/drain.h"
#include "agent/controllers/node_credentials.h"
#include "agent/controllers/node_lease_controller.h"
#include "agent/controllers/pod_controller.h"
#include "agent/core/job_store.h"
#include "agent/core/runtime.h"
#include "common/daemons/protocol.h"

namespace sk::agent {

class VirtualNode : public std::enable_shared_from_this<VirtualNode> {
  public:
    VirtualNode(AgentContext &ctx, JobRecord rec);
    ~VirtualNode();
    VirtualNode(const VirtualNode &) = delete;
    VirtualNode &operator=(const VirtualNode &) = delete;

    // Creates (or adopts) the Node, then the Lease, then watches the pods.
    // ready_cb is called once: ok when the Node exists with Ready=True, or
    // the first non-transient failure.
    void start(std::function<void(Status)> ready_cb);
    // Stops timers and watches, deletes nothing (agent shutdown).
    void stop();
    // shim_pid: the attached shim's pid (SO_PEERCRED), 0 when unknown; lets
    // the node tell a shim that died from one that will reconnect.
    void set_runtime(std::unique_ptr<PodRuntime> rt, int shim_pid = 0);
    PodRuntime *runtime() { return pods_.runtime(); }
    const Json::Value *running_pod(const std::string &ns, const std::string &name) const {
        return pods_.running_pod(ns, name);
    }
    const Json::Value *runtime_pod(const std::string &uid) const { return pods_.runtime_pod(uid); }
    int shim_pid() const { return pods_.shim_pid(); }
    void images_in_use(std::set<std::string> *out) const { pods_.images_in_use(out); }
    // The uids of the pods bound here whose network may still be in use;
    // false until the pods were listed (then nothing is known).
    bool networks_in_use(std::set<std::string> *out) const { return pods_.networks_in_use(out); }
    // The job ended: cordon + NoExecute taint, stop pods within grace_s, final
    // statuses, delete pods, Lease, Node; done(pods_stopped) within grace_s + 5 s.
    void deregister(uint32_t grace_s, const std::string &reason,
                    std::function<void(uint32_t)> done);
    bool draining() const { return drain_.active(); }

    proto::NodeState state() const;
    // Adds this node's pods per phase (Pending for pods not yet reported).
    void count_phases(std::map<std::string, int64_t> *by_phase) const;
    const JobRecord &record() const { return rec_; }
    // Keeps `e` (this node's own kubelet endpoint, agent/node_endpoints.h)
    // as long as the node: it closes when the node is gone.
    void hold_endpoint(std::shared_ptr<void> e) { endpoint_ = std::move(e); }
    std::string prefix() const { return "[node " + rec_.node_name + "]"; }

  private:
    // Hands the controllers this node's weak pointer (their callbacks lock
    // it); the entry points that start asynchronous work call it first.
    void bind_controllers();
    void send_pause();

    // This node's view of the API: node_kube_ presents the node's own
    // identity (creds_) on the agent's transport; node_ctx_ is the agent's
    // context with kube = node_kube_ and agent_kube = the agent's client.
    static AgentContext node_context(const AgentContext &ctx, KubeClient *node_kube);
    KubeClient node_kube_;
    AgentContext node_ctx_;
    NodeCredentials creds_;
    JobRecord rec_;
    bool paused_ = false;  // the job is suspended: the runtime was told to pause
    std::string pause_message_;
    PodController pods_;
    NodeLeaseController node_;
    Drain drain_;
    std::shared_ptr<void> endpoint_;
};

}  // namespace sk::agent
