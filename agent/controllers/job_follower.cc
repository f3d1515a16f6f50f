#include "agent/controllers/job_follower.h"

#include <algorithm>

#include "agent/controllers/node_builder.h"
#include "agent/kube/kube_client.h"
#include "common/log.h"
#include "common/rfc3339.h"

namespace sk::agent {

namespace {
constexpr uint64_t kCordonRetryMs = 2000;
}  // namespace

JobFollower::JobFollower(AgentContext &ctx, JobRecord &rec, Host &host)
    : ctx_(ctx),
      rec_(rec),
      host_(host),
      end_timer_(*ctx.timers),
      end_check_timer_(*ctx.timers),
      drain_timer_(*ctx.timers),
      state_timer_(*ctx.timers),
      cordon_retry_timer_(*ctx.timers) {}

void JobFollower::start() {
    active_ = true;
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

void JobFollower::stop() {
    active_ = false;
    for (ControllerTimer *t :
         {&end_timer_, &end_check_timer_, &drain_timer_, &state_timer_, &cordon_retry_timer_})
        t->stop();
}

void JobFollower::adopt(const Json::Value &node) {
    // An end-time cordon of the previous run: kept while due, undone when the
    // end moved away meanwhile.
    if (!end_cordoned_ && has_taint(node, kEndingTaintKey, "NoSchedule")) {
        end_cordoned_ = true;
        schedule_end_cordon();
    }
    // A suspension of the previous run: followed from here (the next state
    // check resumes it if Slurm did).
    if (has_taint(node, kSuspendedTaintKey, "NoSchedule")) {
        suspended_ = suspend_cordoned_ = true;
        if (on_suspend_) on_suspend_(true, suspend_message());
    }
}

// The plugin's prolog does not know the time limit (end_time 0), and the
// limit can change while the job runs: ask Slurm, off the loop (one query at
// a time), and re-plan the cordon when the end moved.
void JobFollower::query_end_time() {
    if (!ctx_.slurm || end_query_in_flight_) return;
    end_query_in_flight_ = true;
    ctx_.slurm->end_time(
        rec_.job.job_id, guard([this](int64_t t) {
            end_query_in_flight_ = false;
            // 0: unknown or no end (a failed query too): keep what we know.
            if (!active_ || t <= 0) return;
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

int64_t JobFollower::drain_lead_s() const {
    return rec_.job.drain_before_s >= 0 ? rec_.job.drain_before_s
                                        : static_cast<int64_t>(ctx_.cfg->drain_before_end_s);
}

// Cordoned no later than the pods are drained: their replacements must not
// come back here.
int64_t JobFollower::cordon_lead_s() const {
    return std::max(static_cast<int64_t>(ctx_.cfg->cordon_before_end_s), drain_lead_s());
}

bool JobFollower::end_cordon_due() const {
    return rec_.job.end_time > 0 && rec_.job.end_time - cordon_lead_s() <= ctx_.clock->now_s();
}

void JobFollower::schedule_end_drain() {
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
                               if (!active_) return;
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

void JobFollower::schedule_end_cordon() {
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
                         if (!active_) return;
                         LOG_INFO("%s the job ends soon: cordoning", prefix().c_str());
                         end_cordoned_ = true;
                         patch_cordon(Cordon::End, true, end_gen_);
                     }));
}

// GET + merge PATCH of one of the two cordons, or of its undoing; a 409 is
// read again and retried (5 times); dropped when the plan changed
// meanwhile (gen); a failure is retried at that cordon's next check.
void JobFollower::patch_cordon(Cordon kind, bool cordon, uint64_t gen, int attempts) {
    const bool end = kind == Cordon::End;
    const char *what = end ? (cordon ? "cordon" : "uncordon")
                           : (cordon ? "suspension cordon" : "suspension uncordon");
    k8s::Taint taint{end ? kEndingTaintKey : kSuspendedTaintKey, std::to_string(rec_.job.job_id),
                     "NoSchedule"};
    const char *annotation = end ? kEndCordonAnnotation : kSuspendCordonAnnotation;
    ctx_.kube->get(
        KubeClient::node(rec_.node_name),
        guard([this, kind, cordon, gen, attempts, what, taint, annotation](Result<Json::Value> r) {
            if (!active_ || gen != cordon_gen(kind)) return;  // superseded
            if (!r) {
                LOG_WARN("%s %s failed: %s", prefix().c_str(), what, r.message().c_str());
                cordoned(kind) = !cordon;  // the next check retries
                if (kind == Cordon::End) retry_end_cordon();
                return;
            }
            Json::Value patch = cordon ? build_end_cordon_patch(*r, taint, annotation)
                                       : build_end_uncordon_patch(*r, taint, annotation);
            if (patch.isNull()) return;
            ctx_.agent_api().patch(  // a taint: the agent's identity
                KubeClient::node(rec_.node_name), patch, kMergePatch,
                guard([this, kind, cordon, gen, attempts, what](const Result<Json::Value> &p) {
                    if (p) return;
                    if (p.error() == Error::Conflict && attempts < 5 && active_ &&
                        gen == cordon_gen(kind))
                        return patch_cordon(kind, cordon, gen, attempts + 1);
                    LOG_WARN("%s %s failed: %s", prefix().c_str(), what, p.message().c_str());
                    if (gen == cordon_gen(kind)) {
                        cordoned(kind) = !cordon;
                        if (kind == Cordon::End) retry_end_cordon();
                    }
                }));
        }));
}

void JobFollower::retry_end_cordon() {
    cordon_retry_timer_.start(kCordonRetryMs, guard([this] {
                                  if (active_ && end_cordoned_ != end_cordon_due())
                                      schedule_end_cordon();
                              }));
}

std::string JobFollower::suspend_message() const {
    return "Slurm job " + std::to_string(rec_.job.job_id) +
           " is suspended: its pods are stopped until it resumes";
}

// One question at a time; Unknown (Slurm could not be asked) and Gone (the
// end's path, the extern step and the epilog, handles it) change nothing.
void JobFollower::query_job_state() {
    if (!ctx_.slurm || state_query_in_flight_ || !active_) return;
    state_query_in_flight_ = true;
    ctx_.slurm->state(rec_.job.job_id, guard([this](JobState s) {
                          state_query_in_flight_ = false;
                          if (!active_) return;
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
void JobFollower::set_suspended(bool suspended) {
    suspended_ = suspended;
    suspend_gen_++;
    LOG_INFO("%s job %u %s", prefix().c_str(), rec_.job.job_id,
             suspended ? "is suspended: Node NotReady and cordoned, pods stopped"
                       : "resumed: pods continued, Node Ready and uncordoned");
    if (on_suspend_) on_suspend_(suspended, suspend_message());
    host_.post_suspension_status();
    suspend_cordoned_ = suspended;
    patch_cordon(Cordon::Suspend, suspended, suspend_gen_);
    // What `kubectl describe node` and `kubectl get events` show.
    std::string msg =
        suspended ? suspend_message()
                  : "Slurm job " + std::to_string(rec_.job.job_id) + " resumed: its pods run again";
    host_.post_node_event(suspended ? "Warning" : "Normal",
                          suspended ? kSuspendedReason : "JobResumed", msg);
}

}  // namespace sk::agent
