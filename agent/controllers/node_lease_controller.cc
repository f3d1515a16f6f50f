#include "agent/controllers/node_lease_controller.h"

#include <algorithm>
#include <utility>

#include "agent/controllers/pod_status_patch.h"
#include "agent/kube/api_object.h"
#include "common/log.h"

namespace sk::agent {

NodeLeaseController::NodeLeaseController(AgentContext &ctx, JobRecord &rec,
                                         std::function<void()> on_reachable)
    : ctx_(ctx),
      rec_(rec),
      on_reachable_(std::move(on_reachable)),
      lease_backoff_(200, std::min<uint64_t>(7000, ctx.cfg->lease_duration_s * 250)),
      node_timer_(*ctx.timers),
      lease_timer_(*ctx.timers),
      status_timer_(*ctx.timers),
      check_timer_(*ctx.timers),
      job_(ctx, rec, *this) {}

NodeSpecInput NodeLeaseController::spec_input() const {
    NodeSpecInput in = ctx_.host;
    in.node_name = rec_.node_name;
    in.job = rec_.job;
    if (rec_.kubelet_port) in.kubelet_port = rec_.kubelet_port;
    return in;
}

void NodeLeaseController::start(std::function<void(Status)> ready_cb) {
    ready_cb_ = std::move(ready_cb);
    start_us_ = ctx_.clock->now_us();
    create_node();
    job_.start();
}

void NodeLeaseController::release() {
    if (mode_ == Mode::Active) mode_ = Mode::Released;
    lease_timer_.stop();
    status_timer_.stop();
    check_timer_.stop();
    node_timer_.stop();
    job_.stop();
}

void NodeLeaseController::stop() {
    mode_ = Mode::Stopped;
    for (ControllerTimer *t : {&node_timer_, &lease_timer_, &status_timer_, &check_timer_})
        t->stop();
    job_.stop();
}

void NodeLeaseController::call_ready_cb(const Status &st) {
    if (!ready_cb_) return;
    auto cb = std::move(ready_cb_);
    ready_cb_ = nullptr;
    cb(st);
}

void NodeLeaseController::retry_node(const Failure &why) {
    uint64_t ms = node_backoff_.next_ms(why);
    LOG_WARN("%s %s; retrying in %llu ms", prefix().c_str(), why.message.c_str(),
             static_cast<unsigned long long>(ms));
    node_timer_.start(ms, guard([this] { create_node(); }));
}

void NodeLeaseController::create_node() {
    if (mode_ != Mode::Active) return;
    Json::Value node = build_node(spec_input(), ctx_.clock->now_s());
    ctx_.kube->post("/api/v1/nodes", node, guard([this](Result<Json::Value> r) {
                        // A drain that started meanwhile owns the node from now on.
                        if (mode_ != Mode::Active) return;
                        if (r) {
                            LOG_INFO("%s created, Ready", prefix().c_str());
                            if (on_node_) on_node_(*r);
                            ready_since_ = ctx_.clock->now_s();
                            node_ready(api::object_meta(*r).uid);
                            lift_not_ready(*r);
                            return;
                        }
                        if (r.error() == Error::AlreadyExists) return adopt_existing_node();
                        // Refused (403: RBAC, an admission policy; 401: a
                        // credential being rotated) or the server failing
                        // (5xx, 429): retried with back-off for as long as the
                        // job lasts, the refusal said once in a Warning Event,
                        // as a kubelet keeps trying to register. Only a Node
                        // the API finds invalid ends the registration.
                        if (r.error() == Error::Forbidden || r.error() == Error::Unauthorized) {
                            if (node_refusal_ != r.message()) {
                                node_refusal_ = r.message();
                                post_node_event("Warning", "NodeRegistrationRefused",
                                                "the API server refused to create the Node (" +
                                                    r.message() + "); retried with back-off");
                            }
                        } else if (r.error() != Error::Transient) {
                            call_ready_cb(r.failure());
                        }
                        retry_node(r.failure());
                    }));
}

// POST answered 409: the Node survived an agent restart (or someone else owns
// the name). Take it over only when its labels say it is this job's.
void NodeLeaseController::adopt_existing_node() {
    ctx_.kube->get(
        KubeClient::node(rec_.node_name), guard([this](Result<Json::Value> r) {
            if (mode_ != Mode::Active) return;
            if (!r) {
                if (r.error() == Error::NotFound) return create_node();  // deleted meanwhile
                return retry_node(r.failure());
            }
            const Json::Value &labels = api::field(api::field(*r, "metadata"), "labels");
            bool ours = node_is_ours(*r, ctx_.cfg->cluster_name, rec_.job.slurm_node);
            bool this_job = api::text(api::field(labels, std::string(kLabelPrefix) + "job-id")) ==
                            std::to_string(rec_.job.job_id);
            // A slot's name is every job's on the slot: a Node an earlier job left (its
            // delete failed, the agent stopped in its drain) is replaced.
            if (ours && !this_job && rec_.slot >= 0) return replace_previous_node(*r);
            if (!ours || !this_job) {
                Status st = fail(Error::AlreadyExists,
                                 "a Node named " + rec_.node_name +
                                     " exists and does not belong to this job; remove it or "
                                     "change node_name_template");
                LOG_ERROR("%s %s", prefix().c_str(), st.message().c_str());
                call_ready_cb(st);
                return retry_node(st.failure());
            }
            std::string uid = api::object_meta(*r).uid;
            LOG_INFO("%s exists (uid %s): adopting it and posting Ready", prefix().c_str(),
                     uid.c_str());
            if (on_node_) on_node_(*r);
            job_.adopt(*r);  // the cordons of the previous run
            ready_since_ = ctx_.clock->now_s();
            post_status(true, guard([this, uid, node = *r](const Status &st) {
                            // A drain that started meanwhile owns the node.
                            if (mode_ != Mode::Active) return;
                            if (!st) return retry_node(st.failure());
                            node_ready(uid);
                            lift_not_ready(node);
                        }));
        }));
}

void NodeLeaseController::replace_previous_node(const Json::Value &node) {
    const Json::Value &labels = api::field(api::field(node, "metadata"), "labels");
    std::string uid = api::object_meta(node).uid;
    LOG_INFO("%s the Node of job %s (uid %s) is still there: deleting it for job %u",
             prefix().c_str(),
             api::text(api::field(labels, std::string(kLabelPrefix) + "job-id")).c_str(),
             uid.c_str(), rec_.job.job_id);
    // A node identity may not delete its Node: the agent's does; only that
    // uid (one created meanwhile is looked at again).
    ctx_.agent_api().del(KubeClient::node(rec_.node_name), KubeClient::uid_precondition(uid),
                         guard([this](const Result<Json::Value> &r) {
                             if (mode_ != Mode::Active) return;
                             if (r || r.error() == Error::NotFound) return create_node();
                             if (r.error() == Error::Conflict) return adopt_existing_node();
                             retry_node(r.failure());
                         }));
}

void NodeLeaseController::node_ready(const std::string &uid) {
    node_backoff_.reset();
    node_refusal_.clear();
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
        call_ready_cb(Status());
    }
    create_lease();
    uint64_t report_ms = ctx_.cfg->status_report_s * 1000;
    status_timer_.start(report_ms, guard([this] { post_status(true); }), report_ms);
    uint64_t check_ms = ctx_.cfg->node_check_s * 1000;
    if (check_ms == 0) return;  // the Lease's 404 is the signal (steady cost: one request / 10 s)
    check_timer_.start(check_ms, guard([this] { check_node(); }), check_ms);
}

void NodeLeaseController::post_status(bool ready, std::function<void(Status)> done) {
    int64_t now = ctx_.clock->now_s();
    NotReadyWhy why;
    if (job_.suspended()) {
        ready = false;
        why = {kSuspendedReason, job_.suspend_message()};
    } else if (runtime_down_) {
        ready = false;
        why = {"KubeletNotReady", runtime_down_message()};
    }
    Json::Value patch =
        build_node_status_patch(spec_input(), ready, now, ready_since_ ? ready_since_ : now, why);
    std::string p = prefix();
    ctx_.kube->patch(KubeClient::node_status(rec_.node_name), patch, kStrategicMerge,
                     [p, done = std::move(done)](const Result<Json::Value> &r) {
                         if (!r)
                             LOG_WARN("%s status report failed: %s", p.c_str(),
                                      r.message().c_str());
                         if (done) done(r ? Status() : r.failure());
                     });
}

void NodeLeaseController::create_lease() {
    if (mode_ != Mode::Active) return;
    Json::Value lease =
        build_lease(rec_.node_name, rec_.node_uid,
                    static_cast<uint32_t>(ctx_.cfg->lease_duration_s), ctx_.clock->now_us());
    ctx_.kube->post(KubeClient::leases(), lease, guard([this](Result<Json::Value> r) {
                        if (mode_ == Mode::Stopped) return;
                        if (r) {
                            lease_ = *r;
                            lease_renewed_us_ = ctx_.clock->now_us();
                        } else if (r.error() == Error::AlreadyExists) {
                            // Left by a previous run: read it so the next renewal can PUT over it.
                            ctx_.kube->get(KubeClient::lease(rec_.node_name),
                                           guard([this](Result<Json::Value> g) {
                                               if (g) lease_ = *g;
                                           }));
                        } else {
                            LOG_WARN("%s lease create failed: %s", prefix().c_str(),
                                     r.message().c_str());
                            lease_failing_ = true;
                        }
                        // Released meanwhile: the Lease's uid is kept for the
                        // drain's delete, but it is not renewed.
                        if (mode_ != Mode::Active) return;
                        if (r || r.error() == Error::AlreadyExists)
                            schedule_renewal();
                        else
                            retry_lease(r.failure());
                    }));
}

// As a kubelet's lease controller: renewals every lease_renew_interval
// (+ up to 4 % jitter, so that the nodes of a big job do not renew in
// lockstep); a failed one is tried again with back-off (200 ms doubling to
// a quarter of the lease's duration, at most 7 s, jittered), honouring the
// server's Retry-After unless waiting it out would let the Lease lapse: the
// next try always comes before the last renewal's lease runs out.
void NodeLeaseController::schedule_renewal() {
    lease_backoff_.reset();
    uint64_t ms = ctx_.cfg->lease_renew_s * 1000;
    ms += static_cast<uint64_t>(random()) % (ms / 25 + 1);
    lease_timer_.start(ms, guard([this] { renew_lease(); }));
}

void NodeLeaseController::retry_lease(const Failure &why) {
    uint64_t ms = lease_backoff_.next_ms(why);
    if (lease_renewed_us_) {
        int64_t lapse =
            lease_renewed_us_ + static_cast<int64_t>(ctx_.cfg->lease_duration_s) * 1000000;
        int64_t left_ms = (lapse - ctx_.clock->now_us()) / 1000;
        if (left_ms > 0) ms = std::min<uint64_t>(ms, std::max<int64_t>(200, left_ms / 2));
    }
    LOG_VERBOSE("%s lease: %s; again in %llu ms", prefix().c_str(), why.message.c_str(),
                static_cast<unsigned long long>(ms));
    lease_timer_.start(ms, guard([this] { renew_lease(); }));
}

void NodeLeaseController::renew_lease() {
    if (mode_ != Mode::Active) return;
    if (lease_.isNull()) return create_lease();
    Json::Value l = sk::agent::renew_lease(lease_, rec_.node_name, rec_.node_uid,
                                           static_cast<uint32_t>(ctx_.cfg->lease_duration_s),
                                           ctx_.clock->now_us());
    ctx_.kube->put(
        KubeClient::lease(rec_.node_name), l, guard([this](Result<Json::Value> r) {
            if (mode_ != Mode::Active) return;
            if (r) {
                lease_ = *r;
                lease_renewed_us_ = ctx_.clock->now_us();
                schedule_renewal();
                if (lease_failing_) {
                    // Renewals alone do not bring a node back from Unknown.
                    LOG_INFO("%s API server reachable again: re-posting Ready", prefix().c_str());
                    lease_failing_ = false;
                    post_status(true);
                    check_node();
                    if (on_reachable_) on_reachable_();
                }
                return;
            }
            if (r.error() == Error::Conflict) {
                // Written meanwhile (a stale resourceVersion): read it, the
                // next renewal PUTs over that version. Or gone: a PUT whose
                // uid precondition meets no Lease is a 409 on a real API
                // server, not a 404 (the garbage collector deleted it with
                // a Node deleted by hand): then as a 404.
                ctx_.kube->get(KubeClient::lease(rec_.node_name),
                               guard([this](Result<Json::Value> g) {
                                   if (mode_ != Mode::Active) return;
                                   if (g) {
                                       lease_ = *g;
                                   } else if (g.error() == Error::NotFound) {
                                       lease_gone();
                                   }
                                   // Renewed again at once over what was read.
                                   if (g || g.error() == Error::NotFound)
                                       lease_timer_.start(0, guard([this] { renew_lease(); }));
                                   else
                                       retry_lease(g.failure());
                               }));
                return;
            }
            if (r.error() == Error::NotFound) {
                lease_gone();
                return lease_timer_.start(0, guard([this] { renew_lease(); }));
            }
            if (!lease_failing_)
                LOG_WARN("%s lease renewal failed: %s", prefix().c_str(), r.message().c_str());
            lease_failing_ = true;
            retry_lease(r.failure());
        }));
}

void NodeLeaseController::lease_gone() {
    lease_ = Json::Value();  // the next renewal creates it
    check_node();            // and the Node, if it went too
}

void NodeLeaseController::check_node() {
    if (mode_ != Mode::Active || !ready_) return;
    ctx_.kube->get(KubeClient::node(rec_.node_name), guard([this](Result<Json::Value> r) {
                       if (mode_ != Mode::Active) return;
                       if (!r && r.error() == Error::NotFound) {
                           LOG_WARN("%s was deleted while the job runs: recreating it",
                                    prefix().c_str());
                           ready_ = false;
                           status_timer_.stop();
                           check_timer_.stop();
                           lease_timer_.stop();
                           create_node();
                       } else if (r && api::object_meta(*r).uid != rec_.node_uid) {
                           node_ready(api::object_meta(*r).uid);
                       }
                   }));
}

void NodeLeaseController::lift_not_ready(const Json::Value &node, int attempts) {
    if (!ctx_.cfg->lift_not_ready_taint || mode_ != Mode::Active) return;
    Json::Value patch = build_not_ready_lift_patch(node);
    if (patch.isNull()) return;
    // Taints are the agent's to change: NodeRestriction refuses them to a node.
    ctx_.agent_api().patch(KubeClient::node(rec_.node_name), patch, kMergePatch,
                           guard([this, attempts](const Result<Json::Value> &p) {
                               if (p || mode_ != Mode::Active) return;
                               if (p.error() == Error::Conflict && attempts < 3)
                                   return ctx_.kube->get(
                                       KubeClient::node(rec_.node_name),
                                       guard([this, attempts](Result<Json::Value> r) {
                                           if (r) lift_not_ready(*r, attempts + 1);
                                       }));
                               // Not needed for anything but speed: the controller-manager lifts it
                               // too.
                               LOG_VERBOSE("%s not-ready taint left to the controller-manager: %s",
                                           prefix().c_str(), p.message().c_str());
                           }));
}

void NodeLeaseController::cordon(const k8s::Taint &taint, const std::function<void(Status)> &done,
                                 int attempts) {
    ctx_.kube->get(KubeClient::node(rec_.node_name),
                   guard([this, taint, done, attempts](Result<Json::Value> r) {
                       if (!r) return done(r.failure());
                       Json::Value patch = build_cordon_patch(*r, taint);
                       ctx_.agent_api().patch(  // a taint: the agent's identity
                           KubeClient::node(rec_.node_name), patch, kMergePatch,
                           guard([this, taint, done, attempts](const Result<Json::Value> &p) {
                               if (!p && p.error() == Error::Conflict && attempts < 5)
                                   return cordon(taint, done, attempts + 1);
                               done(p ? Status() : p.failure());
                           }));
                   }));
}

void NodeLeaseController::post_suspension_status() {
    ready_since_ = ctx_.clock->now_s();  // the Ready condition's transition
    post_status(true);
}

// What `kubectl describe node` and `kubectl get events` show; best effort.
void NodeLeaseController::post_node_event(const char *type, const char *reason,
                                          const std::string &message) {
    Json::Value ev =
        build_node_event(rec_.node_name, {type, reason, message, ""}, ctx_.clock->now_us());
    ctx_.kube->post(KubeClient::events("default"), ev, [](const Result<Json::Value> &r) {
        if (!r) LOG_VERBOSE("node event post failed: %s", r.message().c_str());
    });
}

std::string NodeLeaseController::runtime_down_message() const {
    return "container runtime is down: the job's shim (pid " + std::to_string(dead_shim_pid_) +
           ") died; pods bound here fail (ShimLost) until the job's extern step has started a "
           "new one";
}

void NodeLeaseController::set_runtime_down(bool down, int shim_pid) {
    if (down == runtime_down_ || mode_ != Mode::Active) return;
    runtime_down_ = down;
    if (down) dead_shim_pid_ = shim_pid;
    ready_since_ = ctx_.clock->now_s();  // the Ready condition's transition
    LOG_INFO("%s %s", prefix().c_str(),
             down ? "the job's shim died: Node NotReady until a new one attaches"
                  : "a new shim attached: Node Ready again");
    post_status(true);
    std::string msg = down ? runtime_down_message()
                           : "a new shim of Slurm job " + std::to_string(rec_.job.job_id) +
                                 " (pid " + std::to_string(shim_pid) +
                                 ") attached: pods run here again";
    post_node_event(down ? "Warning" : "Normal", down ? "ShimDied" : "ShimAttached", msg);
}

}  // namespace sk::agent
