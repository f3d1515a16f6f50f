#include "agent/controllers/virtual_node.h"

#include <utility>

#include "common/log.h"

namespace sk::agent {

std::string job_tag_for(uint32_t job_id, const std::string &slurm_node) {
    return "job_" + std::to_string(job_id) + "_" + slurm_node;
}

std::string shim_state_dir_for(const AgentConfig &cfg, uint32_t job_id,
                               const std::string &slurm_node) {
    return cfg.shim_state_dir + "/" + job_tag_for(job_id, slurm_node);
}

// node_ is built after pods_ (members in declaration order): its
// on_reachable hook relists the pods whose watch sits in a back-off (up to
// 30 s) from an outage, rather than when that timer fires.
AgentContext VirtualNode::node_context(const AgentContext &ctx, KubeClient *node_kube) {
    AgentContext c = ctx;
    c.agent_kube = &ctx.agent_api();
    c.kube = node_kube;
    return c;
}

VirtualNode::VirtualNode(AgentContext &ctx, JobRecord rec)
    : node_kube_(ctx.kube->transport(), ctx.kube->server(), ctx.kube->timeout_ms()),
      node_ctx_(node_context(ctx, &node_kube_)),
      creds_(
          node_ctx_, rec.node_name,
          [this](std::shared_ptr<const Credential> c) { node_kube_.set_credential(std::move(c)); }),
      rec_(std::move(rec)),
      pods_(node_ctx_, rec_),
      node_(node_ctx_, rec_, [this] { pods_.relist_if_idle(); }),
      drain_(node_ctx_, rec_, node_, pods_) {
    node_kube_.set_observer(ctx.kube->observer());
    // node_identity = impersonate: everything the node's client sends acts
    // as system:node:<node> in system:nodes, from the first request on.
    if (node_ctx_.cfg->node_identity == "impersonate")
        node_kube_.set_impersonation(std::make_shared<const Impersonation>(
            Impersonation{node_user(rec_.node_name), {kNodesGroup}}));
    node_.set_end_drain([this](int64_t end_time) { pods_.drain_before_end(end_time); });
    pods_.set_on_shim_dead([this](int pid) { node_.set_runtime_down(true, pid); });
    node_.set_on_node([this](const Json::Value &node) { pods_.set_node(node); });
    node_.set_on_suspend([this](bool paused, const std::string &message) {
        paused_ = paused;
        pause_message_ = message;
        send_pause();
    });
}

// The pods follow the job's suspension; a runtime that attaches while it
// lasts (a shim that reconnects) is told at once.
void VirtualNode::send_pause() {
    PodRuntime *rt = pods_.runtime();
    if (!rt) return;
    std::string p = prefix();
    bool paused = paused_;
    rt->pause(paused, pause_message_, [p, paused](const Status &st) {
        if (!st)
            LOG_WARN("%s %s the pods failed: %s", p.c_str(), paused ? "pausing" : "continuing",
                     st.message().c_str());
    });
}

VirtualNode::~VirtualNode() {
    stop();
}

void VirtualNode::bind_controllers() {
    std::weak_ptr<void> self = weak_from_this();
    creds_.bind(self);
    pods_.bind(self);
    node_.bind(self);
    drain_.bind(self);
}

void VirtualNode::start(std::function<void(Status)> ready_cb) {
    bind_controllers();
    LOG_INFO("%s registering job %u on %s (%zu GPUs)", prefix().c_str(), rec_.job.job_id,
             rec_.job.slurm_node.c_str(), rec_.job.gpus.size());
    if (node_ctx_.cfg->node_identity != "bootstrap") {
        node_.start(std::move(ready_cb));
        pods_.start();
        return;
    }
    // The node's own identity first: everything after goes out under it.
    std::weak_ptr<VirtualNode> self = weak_from_this();
    creds_.start([self, ready_cb = std::move(ready_cb)](const Status &st) mutable {
        auto n = self.lock();
        if (!n) return;
        if (!st) {  // a re-adopted node (no ready_cb) stays as it is: its Node is not touched
            if (ready_cb) ready_cb(fail(st.error(), "no identity for the node: " + st.message()));
            return;
        }
        n->node_.start(std::move(ready_cb));
        n->pods_.start();
    });
}

void VirtualNode::stop() {
    creds_.stop();
    node_.stop();
    pods_.stop();
    drain_.stop();
}

void VirtualNode::set_runtime(std::unique_ptr<PodRuntime> rt, int shim_pid) {
    bind_controllers();
    bool attached = static_cast<bool>(rt);
    pods_.set_runtime(std::move(rt), shim_pid);
    if (attached) node_.set_runtime_down(false, shim_pid);
    if (paused_) send_pause();
}

void VirtualNode::deregister(uint32_t grace_s, const std::string &reason,
                             std::function<void(uint32_t)> done) {
    bind_controllers();
    // No renewal while it drains: the certificate in hand is used to the end
    // (without one, the drain goes out under the agent's identity).
    creds_.abandon(fail(Error::Unavailable, "the job ended before the node had its identity"));
    std::weak_ptr<VirtualNode> self = weak_from_this();
    drain_.start(grace_s, reason, [self, done = std::move(done)](uint32_t stopped) {
        if (auto n = self.lock()) {
            // The node is gone: so is its key, unless the name is a slot's,
            // whose next job uses it (agent/controllers/identity_pool.h).
            if (n->rec_.slot >= 0)
                n->creds_.stop();
            else
                n->creds_.forget();
        }
        done(stopped);
    });
}

void VirtualNode::count_phases(std::map<std::string, int64_t> *by_phase) const {
    pods_.count_phases(by_phase);
}

proto::NodeState VirtualNode::state() const {
    proto::NodeState s;
    s.job_id = rec_.job.job_id;
    s.slurm_node = rec_.job.slurm_node;
    s.node_name = rec_.node_name;
    s.user = rec_.job.user;
    bool draining = drain_.active();
    s.phase = draining               ? "draining"
              : node_.suspended()    ? "suspended"
              : node_.runtime_down() ? "shim-down"
              : node_.ready()        ? "ready"
                                     : "registering";
    s.ready = node_.ready() && !draining && !node_.lease_failing() && !node_.suspended() &&
              !node_.runtime_down();
    s.gpus = rec_.job.gpus;
    s.pods = pods_.unfinished();
    if (node_ctx_.cfg->node_identity == "bootstrap")
        s.identity = creds_.describe(node_ctx_.clock->now_s());
    else if (node_ctx_.cfg->node_identity == "impersonate")
        s.identity = node_user(rec_.node_name) + ", impersonated with the agent's credential";
    return s;
}

}  // namespace sk::agent
