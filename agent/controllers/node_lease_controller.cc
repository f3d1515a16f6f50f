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
      end_timer_(*ctx.timers),
      end_check_timer_(*ctx.timers),
      drain_timer_(*ctx.timers),
      state_timer_(*ctx.timers) {}

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
    schedule_end_cordon();
    schedule_end_drain();
    query_end_time();
    // A time limit can change while the job runs (scontrol update TimeLimit=):
    // re-read it. Cost: one job_end_command per job per period.
    uint64_t ms = ctx_.cfg->end_time_check_s * 1000;
    if (ms > 0 && ctx_.slurm) end_check_timer_.start(ms, guard([this] { query_end_time(); }), ms);
    // Slurm tells no plugin of a suspension: ask. Cost: one job_alive_command
    // per job per period.
    uint64_t state_ms = ctx_.cfg->job_state_check_s * 1000;
    if (state_ms > 0 && ctx_.slurm)
        state_timer_.start(state_ms, guard([this] { query_job_state(); }), state_ms);
}

void NodeLeaseController::release() {
    if (mode_ == Mode::Active) mode_ = Mode::Released;
    lease_timer_.stop();
    status_timer_.stop();
    check_timer_.stop();
    end_timer_.stop();
    end_check_timer_.stop();
    drain_timer_.stop();
    node_timer_.stop();
    state_timer_.stop();
}

void NodeLeaseController::stop() {
    mode_ = Mode::Stopped;
    for (ControllerTimer *t : {&node_timer_, &lease_timer_, &status_timer_, &check_timer_,
                               &end_timer_, &end_check_timer_, &drain_timer_, &state_timer_})
        t->stop();
}

void NodeLeaseController::call_ready_cb(const Status &st) {
    if (!ready_cb_) return;
    auto cb = std::move(ready_cb_);
    ready_cb_ = nullptr;
    cb(st);
}

// The plugin's prolog does not know the time limit (end_time 0), and the
// limit can change while the job runs: ask Slurm, off the loop (one query at
// a time), and re-plan the cordon when the end moved.
void NodeLeaseController::query_end_time() {
    if (!ctx_.slurm || end_query_in_flight_) return;
    end_query_in_flight_ = true;
    ctx_.slurm->end_time(
        rec_.job.job_id, guard([this](int64_t t) {
            end_query_in_flight_ = false;
            // 0: unknown or no end (a failed query too): keep what we know.
            if (mode_ != Mode::Active || t <= 0) return;
            if (rec_.job.end_time == t) {
                // A cordon or uncordon that failed (API down) is tried again.
                if (end_cordoned_ != end_cordon_due()) schedule_end_cordon();
                return;
            }
            int64_t old = rec_.job.end_time;
            rec_.job.end_time = t;
            if (old > 0)
                LOG_INFO("%s job %u's end moved from %s to %s", prefix().c_str(), rec_.job.job_id,
                         rfc3339(old).c_str(), rfc3339(t).c_str());
            else
                LOG_INFO("%s Slurm says job %u ends at %s; cordoning %llds before",
                         prefix().c_str(), rec_.job.job_id, rfc3339(t).c_str(),
                         static_cast<long long>(cordon_lead_s()));
            if (auto st = ctx_.store->save(rec_); !st)
                LOG_WARN("%s cannot save state: %s", prefix().c_str(), st.message().c_str());
            schedule_end_cordon();
            schedule_end_drain();
        }));
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
            // An end-time cordon of the previous run: kept while
            // due, undone when the end moved away meanwhile.
            if (!end_cordoned_ && has_taint(*r, kEndingTaintKey, "NoSchedule")) {
                end_cordoned_ = true;
                schedule_end_cordon();
            }
            // A suspension of the previous run: followed from
            // here (the next state check resumes it if Slurm did).
            if (has_taint(*r, kSuspendedTaintKey, "NoSchedule")) {
                suspended_ = suspend_cordoned_ = true;
                if (on_suspend_) on_suspend_(true, suspend_message());
            }
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
    if (suspended_) {
        ready = false;
        why = {kSuspendedReason, suspend_message()};
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

int64_t NodeLeaseController::drain_lead_s() const {
    return rec_.job.drain_before_s >= 0 ? rec_.job.drain_before_s
                                        : static_cast<int64_t>(ctx_.cfg->drain_before_end_s);
}

// Cordoned no later than the pods are drained: their replacements must not
// come back here.
int64_t NodeLeaseController::cordon_lead_s() const {
    return std::max(static_cast<int64_t>(ctx_.cfg->cordon_before_end_s), drain_lead_s());
}

bool NodeLeaseController::end_cordon_due() const {
    return rec_.job.end_time > 0 && rec_.job.end_time - cordon_lead_s() <= ctx_.clock->now_s();
}

void NodeLeaseController::schedule_end_drain() {
    int64_t lead = drain_lead_s();
    if (rec_.job.end_time <= 0 || lead <= 0 || !on_end_drain_) return;
    int64_t end = rec_.job.end_time;
    int64_t in_s = end - lead - ctx_.clock->now_s();
    drain_timer_.stop();
    if (in_s > 0) {
        if (end_drained_) {  // the end moved away: pods are admitted again
            end_drained_ = false;
            LOG_INFO("%s the job's end moved away: pods start here again", prefix().c_str());
            on_end_drain_(0);
        }
        drain_timer_.start(static_cast<uint64_t>(in_s) * 1000 + 1, guard([this, end, lead] {
                               if (mode_ != Mode::Active) return;
                               LOG_INFO("%s the job ends at %s: stopping its pods %llds ahead",
                                        prefix().c_str(), rfc3339(end).c_str(),
                                        static_cast<long long>(lead));
                               end_drained_ = true;
                               on_end_drain_(end);
                           }));
        return;
    }
    if (!end_drained_) {
        LOG_INFO("%s the job ends at %s, within %llds: stopping its pods", prefix().c_str(),
                 rfc3339(end).c_str(), static_cast<long long>(lead));
        end_drained_ = true;
    }
    on_end_drain_(end);  // again after an earlier end: the pods' grace shrinks to it
}

void NodeLeaseController::schedule_end_cordon() {
    if (rec_.job.end_time <= 0) return;
    int64_t at = rec_.job.end_time - cordon_lead_s();
    int64_t in_s = at - ctx_.clock->now_s();
    if (in_s <= 0 && end_cordoned_) return;  // cordoned, and still due
    end_gen_++;
    if (in_s > 0 && end_cordoned_) {
        // The end moved away (a longer time limit): the Node takes pods again
        // until the new cordon time.
        end_cordoned_ = false;
        LOG_INFO("%s the job's end moved away: uncordoning until %s", prefix().c_str(),
                 rfc3339(at).c_str());
        patch_cordon(Cordon::End, false, end_gen_);
    }
    if (in_s < 0) in_s = 0;
    end_timer_.start(static_cast<uint64_t>(in_s) * 1000 + 1, guard([this] {
                         if (mode_ != Mode::Active) return;
                         LOG_INFO("%s the job ends soon: cordoning", prefix().c_str());
                         end_cordoned_ = true;
                         patch_cordon(Cordon::End, true, end_gen_);
                     }));
}

// GET + merge PATCH of one of the two cordons, or of its undoing; a 409 is
// read again and retried (5 times); dropped when the plan changed
// meanwhile (gen); a failure is retried at that cordon's next check.
void NodeLeaseController::patch_cordon(Cordon kind, bool cordon, uint64_t gen, int attempts) {
    const bool end = kind == Cordon::End;
    const char *what = end ? (cordon ? "cordon" : "uncordon")
                           : (cordon ? "suspension cordon" : "suspension uncordon");
    k8s::Taint taint{end ? kEndingTaintKey : kSuspendedTaintKey, std::to_string(rec_.job.job_id),
                     "NoSchedule"};
    const char *annotation = end ? kEndCordonAnnotation : kSuspendCordonAnnotation;
    ctx_.kube->get(
        KubeClient::node(rec_.node_name),
        guard([this, kind, cordon, gen, attempts, what, taint, annotation](Result<Json::Value> r) {
            if (mode_ != Mode::Active || gen != cordon_gen(kind)) return;  // superseded
            if (!r) {
                LOG_WARN("%s %s failed: %s", prefix().c_str(), what, r.message().c_str());
                cordoned(kind) = !cordon;  // the next check retries
                return;
            }
            Json::Value patch = cordon ? build_end_cordon_patch(*r, taint, annotation)
                                       : build_end_uncordon_patch(*r, taint, annotation);
            if (patch.isNull()) return;
            ctx_.agent_api().patch(  // a taint: the agent's identity
                KubeClient::node(rec_.node_name), patch, kMergePatch,
                guard([this, kind, cordon, gen, attempts, what](const Result<Json::Value> &p) {
                    if (p) return;
                    if (p.error() == Error::Conflict && attempts < 5 && mode_ == Mode::Active &&
                        gen == cordon_gen(kind))
                        return patch_cordon(kind, cordon, gen, attempts + 1);
                    LOG_WARN("%s %s failed: %s", prefix().c_str(), what, p.message().c_str());
                    if (gen == cordon_gen(kind)) cordoned(kind) = !cordon;
                }));
        }));
}

std::string NodeLeaseController::suspend_message() const {
    return "Slurm job " + std::to_string(rec_.job.job_id) +
           " is suspended: its pods are stopped until it resumes";
}

// One question at a time; Unknown (Slurm could not be asked) and Gone (the
// end's path, the extern step and the epilog, handles it) change nothing.
void NodeLeaseController::query_job_state() {
    if (!ctx_.slurm || state_query_in_flight_ || mode_ != Mode::Active) return;
    state_query_in_flight_ = true;
    ctx_.slurm->state(rec_.job.job_id, guard([this](JobState s) {
                          state_query_in_flight_ = false;
                          if (mode_ != Mode::Active) return;
                          if (s == JobState::Suspended && !suspended_)
                              set_suspended(true);
                          else if (s == JobState::Alive && suspended_)
                              set_suspended(false);
                          else if ((s == JobState::Suspended || s == JobState::Alive) &&
                                   suspend_cordoned_ != suspended_)
                              patch_cordon(Cordon::Suspend, suspended_,
                                           suspend_gen_);  // a failed one again
                      }));
}

// Suspended: the pods paused first (their Ready=False follows from the
// runtime), the Node's Ready=False and cordon; resumed: the reverse.
void NodeLeaseController::set_suspended(bool suspended) {
    suspended_ = suspended;
    suspend_gen_++;
    ready_since_ = ctx_.clock->now_s();  // the Ready condition's transition
    LOG_INFO("%s job %u %s", prefix().c_str(), rec_.job.job_id,
             suspended ? "is suspended: Node NotReady and cordoned, pods stopped"
                       : "resumed: pods continued, Node Ready and uncordoned");
    if (on_suspend_) on_suspend_(suspended, suspend_message());
    post_status(true);
    suspend_cordoned_ = suspended;
    patch_cordon(Cordon::Suspend, suspended, suspend_gen_);
    // What `kubectl describe node` and `kubectl get events` show.
    std::string msg =
        suspended ? suspend_message()
                  : "Slurm job " + std::to_string(rec_.job.job_id) + " resumed: its pods run again";
    post_node_event(suspended ? "Warning" : "Normal", suspended ? kSuspendedReason : "JobResumed",
                    msg);
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
