// Node registration, status, heartbeat (Lease), recreation and cordon.
#include "agent/controllers/virtual_node.h"

#include "agent/api_object.h"
#include "common/log.h"

namespace sk::agent {

std::string shim_state_dir_for(const AgentConfig &cfg, uint32_t job_id,
                               const std::string &slurm_node) {
    return cfg.shim_state_dir + "/job_" + std::to_string(job_id) + "_" + slurm_node;
}

VirtualNode::VirtualNode(AgentContext &ctx, JobRecord rec)
    : ctx_(ctx),
      rec_(std::move(rec)),
      watch_timer_(ctx.loop),
      shim_timer_(ctx.loop),
      node_timer_(ctx.loop),
      lease_timer_(ctx.loop),
      status_timer_(ctx.loop),
      check_timer_(ctx.loop),
      end_timer_(ctx.loop),
      drain_timer_(ctx.loop) {}

VirtualNode::~VirtualNode() {
    stop();
}

NodeSpecInput VirtualNode::spec_input() const {
    NodeSpecInput in = ctx_.host;
    in.node_name = rec_.node_name;
    in.job = rec_.job;
    return in;
}

void VirtualNode::start(std::function<void(Status)> ready_cb) {
    ready_cb_ = std::move(ready_cb);
    start_us_ = ctx_.clock->now_us();
    LOG_INFO("%s registering job %u on %s (%zu GPUs)", prefix().c_str(), rec_.job.job_id,
             rec_.job.slurm_node.c_str(), rec_.job.gpus.size());
    create_node();
    list_pods();
    schedule_end_cordon();
    if (rec_.job.end_time <= 0) query_end_time();
}

// The plugin's prolog does not know the time limit (end_time 0): ask Slurm,
// off the loop, then cordon ahead of it like a known end time.
void VirtualNode::query_end_time() {
    if (!ctx_.job_end_time) return;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    ctx_.job_end_time(rec_.job.job_id, [w](int64_t t) {
        auto self = w.lock();
        if (!self || self->stopped_ || self->draining_ || t <= 0) return;
        if (self->rec_.job.end_time == t) return;
        self->rec_.job.end_time = t;
        LOG_INFO("%s Slurm says job %u ends at %s; cordoning %llus before", self->prefix().c_str(),
                 self->rec_.job.job_id, rfc3339(t).c_str(),
                 static_cast<unsigned long long>(self->ctx_.cfg->cordon_before_end_s));
        if (auto st = self->ctx_.store->save(self->rec_); !st)
            LOG_WARN("%s cannot save state: %s", self->prefix().c_str(), st.message().c_str());
        self->schedule_end_cordon();
    });
}

void VirtualNode::stop() {
    stopped_ = true;
    if (watch_id_) ctx_.kube->cancel(watch_id_);
    watch_id_ = 0;
    for (Timer *t : {&watch_timer_, &node_timer_, &lease_timer_, &status_timer_, &check_timer_,
                     &end_timer_, &drain_timer_, &shim_timer_})
        t->stop();
}

void VirtualNode::retry_node(const Status &why) {
    uint64_t ms = node_backoff_.next_ms();
    LOG_WARN("%s %s; retrying in %llu ms", prefix().c_str(), why.message().c_str(),
             static_cast<unsigned long long>(ms));
    std::weak_ptr<VirtualNode> w = weak_from_this();
    node_timer_.start(ms, [w] {
        if (auto self = w.lock()) self->create_node();
    });
}

void VirtualNode::create_node() {
    if (stopped_ || draining_) return;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    Json::Value node = build_node(spec_input(), ctx_.clock->now_s());
    ctx_.kube->post("/api/v1/nodes", node, [w](Result<Json::Value> r) {
        auto self = w.lock();
        // A deregister that started meanwhile owns the node from now on.
        if (!self || self->stopped_ || self->draining_) return;
        if (r) {
            LOG_INFO("%s created, Ready", self->prefix().c_str());
            self->ready_since_ = self->ctx_.clock->now_s();
            self->node_ready(api::object_meta(*r).uid);
            return;
        }
        if (r.error() == Error::AlreadyExists) return self->adopt_existing_node();
        if (r.error() != Error::Transient && self->ready_cb_) {
            auto cb = std::move(self->ready_cb_);
            cb(r.failure());
        }
        self->retry_node(r.failure());
    });
}

// POST answered 409: the Node survived an agent restart (or someone else owns
// the name). Take it over only when its labels say it is this job's.
void VirtualNode::adopt_existing_node() {
    std::weak_ptr<VirtualNode> w = weak_from_this();
    ctx_.kube->get(KubeClient::node(rec_.node_name), [w](Result<Json::Value> r) {
        auto self = w.lock();
        if (!self || self->stopped_ || self->draining_) return;
        if (!r) {
            if (r.error() == Error::NotFound) return self->create_node();  // deleted meanwhile
            return self->retry_node(r.failure());
        }
        const Json::Value &labels = api::field(api::field(*r, "metadata"), "labels");
        if (api::text(api::field(labels, std::string(kLabelPrefix) + "job-id")) !=
                std::to_string(self->rec_.job.job_id) ||
            !node_is_ours(*r, self->ctx_.cfg->cluster_name, self->rec_.job.slurm_node)) {
            Status st = fail(Error::AlreadyExists,
                             "a Node named " + self->rec_.node_name +
                                 " exists and does not belong to this job; remove it or change "
                                 "node_name_template");
            LOG_ERROR("%s %s", self->prefix().c_str(), st.message().c_str());
            if (self->ready_cb_) {
                auto cb = std::move(self->ready_cb_);
                cb(st);
            }
            return self->retry_node(st);
        }
        std::string uid = api::object_meta(*r).uid;
        LOG_INFO("%s exists (uid %s): adopting it and posting Ready", self->prefix().c_str(),
                 uid.c_str());
        self->ready_since_ = self->ctx_.clock->now_s();
        self->post_status(true, [w, uid](const Status &st) {
            auto s = w.lock();
            if (!s) return;
            if (!st) return s->retry_node(st);
            s->node_ready(uid);
        });
    });
}

void VirtualNode::node_ready(const std::string &uid) {
    node_backoff_.reset();
    bool uid_changed = uid != rec_.node_uid;
    rec_.node_uid = uid;
    ready_ = true;
    if (uid_changed) {
        if (auto st = ctx_.store->save(rec_); !st)
            LOG_ERROR("%s cannot save state: %s", prefix().c_str(), st.message().c_str());
        lease_ = Json::Value();  // owned by the old uid: rewrite
    }
    if (ready_cb_) {  // a fresh registration (not a re-adoption)
        if (ctx_.obs && ctx_.obs->node_registered)
            ctx_.obs->node_registered(static_cast<double>(ctx_.clock->now_us() - start_us_) / 1e6);
        auto cb = std::move(ready_cb_);
        cb(Status());
    }
    create_lease();
    std::weak_ptr<VirtualNode> w = weak_from_this();
    uint64_t report_ms = ctx_.cfg->status_report_s * 1000;
    status_timer_.start(
        report_ms,
        [w] {
            if (auto s = w.lock()) s->post_status(true);
        },
        report_ms);
    uint64_t check_ms = ctx_.cfg->node_check_s * 1000;
    if (check_ms == 0) return;  // the Lease's 404 is the signal (steady cost: one request / 10 s)
    check_timer_.start(
        check_ms,
        [w] {
            if (auto s = w.lock()) s->check_node();
        },
        check_ms);
}

void VirtualNode::post_status(bool ready, std::function<void(Status)> done) {
    int64_t now = ctx_.clock->now_s();
    Json::Value patch =
        build_node_status_patch(spec_input(), ready, now, ready_since_ ? ready_since_ : now);
    std::string p = prefix();
    ctx_.kube->patch(KubeClient::node_status(rec_.node_name), patch, kStrategicMerge,
                     [p, done = std::move(done)](const Result<Json::Value> &r) {
                         if (!r)
                             LOG_WARN("%s status report failed: %s", p.c_str(),
                                      r.message().c_str());
                         if (done) done(r ? Status() : r.failure());
                     });
}

void VirtualNode::create_lease() {
    if (stopped_ || draining_) return;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    Json::Value lease =
        build_lease(rec_.node_name, rec_.node_uid,
                    static_cast<uint32_t>(ctx_.cfg->lease_duration_s), ctx_.clock->now_us());
    ctx_.kube->post(KubeClient::leases(), lease, [w](Result<Json::Value> r) {
        auto self = w.lock();
        if (!self || self->stopped_) return;
        if (r) {
            self->lease_ = *r;
        } else if (r.error() == Error::AlreadyExists) {
            // Left by a previous run: read it so the next renewal can PUT over it.
            self->ctx_.kube->get(KubeClient::lease(self->rec_.node_name),
                                 [w](Result<Json::Value> g) {
                                     auto s = w.lock();
                                     if (s && g) s->lease_ = *g;
                                 });
        } else {
            LOG_WARN("%s lease create failed: %s", self->prefix().c_str(), r.message().c_str());
            self->lease_failing_ = true;
        }
        uint64_t ms = self->ctx_.cfg->lease_renew_s * 1000;
        self->lease_timer_.start(
            ms,
            [w] {
                if (auto s = w.lock()) s->renew_lease();
            },
            ms);
    });
}

void VirtualNode::renew_lease() {
    if (stopped_ || draining_) return;
    if (lease_.isNull()) {
        lease_timer_.stop();
        return create_lease();
    }
    std::weak_ptr<VirtualNode> w = weak_from_this();
    Json::Value l = sk::agent::renew_lease(lease_, rec_.node_name, rec_.node_uid,
                                           static_cast<uint32_t>(ctx_.cfg->lease_duration_s),
                                           ctx_.clock->now_us());
    ctx_.kube->put(KubeClient::lease(rec_.node_name), l, [w](Result<Json::Value> r) {
        auto self = w.lock();
        if (!self || self->stopped_ || self->draining_) return;
        if (r) {
            self->lease_ = *r;
            if (self->lease_failing_) {
                // Renewals alone do not bring a node back from Unknown.
                LOG_INFO("%s API server reachable again: re-posting Ready", self->prefix().c_str());
                self->lease_failing_ = false;
                self->post_status(true);
                self->check_node();
                // The pod watch may sit in a long back-off (up to 30 s) from
                // the outage: relist now rather than when that timer fires.
                if (self->watch_id_ == 0) {
                    self->watch_timer_.stop();
                    self->watch_backoff_.reset();
                    self->list_pods();
                }
            }
            return;
        }
        if (r.error() == Error::Conflict) {
            self->ctx_.kube->get(KubeClient::lease(self->rec_.node_name),
                                 [w](Result<Json::Value> g) {
                                     auto s = w.lock();
                                     if (s && g) s->lease_ = *g;
                                 });
            return;
        }
        if (r.error() == Error::NotFound) {
            self->lease_ = Json::Value();
            self->check_node();
            return;
        }
        if (!self->lease_failing_)
            LOG_WARN("%s lease renewal failed: %s", self->prefix().c_str(), r.message().c_str());
        self->lease_failing_ = true;
    });
}

void VirtualNode::check_node() {
    if (stopped_ || draining_ || !ready_) return;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    ctx_.kube->get(KubeClient::node(rec_.node_name), [w](Result<Json::Value> r) {
        auto self = w.lock();
        if (!self || self->stopped_ || self->draining_) return;
        if (!r && r.error() == Error::NotFound) {
            LOG_WARN("%s was deleted while the job runs: recreating it", self->prefix().c_str());
            self->ready_ = false;
            self->status_timer_.stop();
            self->check_timer_.stop();
            self->lease_timer_.stop();
            self->create_node();
        } else if (r && api::object_meta(*r).uid != self->rec_.node_uid) {
            self->node_ready(api::object_meta(*r).uid);
        }
    });
}

void VirtualNode::cordon(const k8s::Taint &taint, const std::function<void(Status)> &done,
                         int attempts) {
    std::weak_ptr<VirtualNode> w = weak_from_this();
    ctx_.kube->get(
        KubeClient::node(rec_.node_name), [w, taint, done, attempts](Result<Json::Value> r) {
            auto self = w.lock();
            if (!self) return;
            if (!r) return done(r.failure());
            Json::Value patch = build_cordon_patch(*r, taint);
            self->ctx_.kube->patch(KubeClient::node(self->rec_.node_name), patch, kMergePatch,
                                   [w, taint, done, attempts](const Result<Json::Value> &p) {
                                       auto s = w.lock();
                                       if (!s) return;
                                       if (!p && p.error() == Error::Conflict && attempts < 5)
                                           return s->cordon(taint, done, attempts + 1);
                                       done(p ? Status() : p.failure());
                                   });
        });
}

void VirtualNode::schedule_end_cordon() {
    if (rec_.job.end_time <= 0) return;
    int64_t at = rec_.job.end_time - static_cast<int64_t>(ctx_.cfg->cordon_before_end_s);
    int64_t in_s = at - ctx_.clock->now_s();
    if (in_s < 0) in_s = 0;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    end_timer_.start(static_cast<uint64_t>(in_s) * 1000 + 1, [w] {
        auto self = w.lock();
        if (!self || self->draining_) return;
        LOG_INFO("%s the job ends soon: cordoning", self->prefix().c_str());
        self->cordon({kEndingTaintKey, std::to_string(self->rec_.job.job_id), "NoSchedule"},
                     [w](const Status &st) {
                         auto s = w.lock();
                         if (s && !st)
                             LOG_WARN("%s cordon failed: %s", s->prefix().c_str(),
                                      st.message().c_str());
                     });
    });
}

void VirtualNode::count_phases(std::map<std::string, int64_t> *by_phase) const {
    for (const auto &[uid, p] : pods_) {
        std::string ph = api::text(api::field(api::field(p.api, "status"), "phase"));
        (*by_phase)[ph.empty() ? "Pending" : ph]++;
    }
}

proto::NodeState VirtualNode::state() const {
    proto::NodeState s;
    s.job_id = rec_.job.job_id;
    s.slurm_node = rec_.job.slurm_node;
    s.node_name = rec_.node_name;
    s.user = rec_.job.user;
    s.phase = draining_ ? "draining" : ready_ ? "ready" : "registering";
    s.ready = ready_ && !draining_ && !lease_failing_;
    s.gpus = rec_.job.gpus;
    uint32_t n = 0;
    for (const auto &[uid, p] : pods_)
        if (!pod_is_terminal(p.api)) n++;
    s.pods = n;
    return s;
}

}  // namespace sk::agent
