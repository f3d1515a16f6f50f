// The end of the job on this node: cordon + NoExecute taint, stop every pod
// within the grace budget, final statuses naming the job's end, delete the
// pods (grace 0, uid precondition), then the Lease and the Node, then the
// state file. Bounded: the reply comes after grace + 5 s at the latest;
// deletes that failed by then (API server unreachable) go on in the
// background (LeftoverDeleter), then to the garbage collection of any agent.
#include "agent/controllers/virtual_node.h"

#include <set>

#include "common/log.h"

namespace sk::agent {

namespace {

class LeftoverDeleter;
// The deleters still running, for cancel_leftover_deletes (loop thread only).
std::set<LeftoverDeleter *> &live_deleters() {
    static std::set<LeftoverDeleter *> live;
    return live;
}

// Retries the deletes a deregister could not finish, after its reply: every
// pending one per round, capped back-off between rounds (0.5 s .. 8 s, so a
// Node goes within seconds of the API server's return), for at most 10
// minutes. Each delete carries a uid precondition when the uid is known: an
// object re-created meanwhile under the same name (the job re-registered) is
// never touched (409 ends its retries, as does 404). Owns itself until done.
class LeftoverDeleter : public std::enable_shared_from_this<LeftoverDeleter> {
  public:
    struct Item {
        std::string what;  // for the log: "pod ns/name", "Lease", "Node"
        std::string path;
        Json::Value body;
    };

    static void start(AgentContext &ctx, std::string prefix, std::vector<Item> items) {
        if (items.empty()) return;
        auto d = std::shared_ptr<LeftoverDeleter>(
            new LeftoverDeleter(ctx, std::move(prefix), std::move(items)));
        d->self_ = d;
        live_deleters().insert(d.get());
        d->deadline_us_ = ctx.clock->now_us() + kGiveUpUs;
        LOG_WARN("%s %zu deletes failed; retrying in the background", d->prefix_.c_str(),
                 d->items_.size());
        d->schedule();
    }

    ~LeftoverDeleter() { live_deleters().erase(this); }

    // Agent shutdown: the deletes left are the next agent's garbage collection.
    static void cancel_all(AgentContext &ctx) {
        std::vector<LeftoverDeleter *> mine;
        for (LeftoverDeleter *d : live_deleters())
            if (&d->ctx_ == &ctx) mine.push_back(d);
        for (LeftoverDeleter *d : mine) {
            LOG_INFO("%s stopping: %zu deletes left to garbage collection", d->prefix_.c_str(),
                     d->items_.size());
            d->timer_.stop();
            d->self_.reset();  // destroys d
        }
    }

  private:
    static constexpr int64_t kGiveUpUs = 600LL * 1000 * 1000;

    LeftoverDeleter(AgentContext &ctx, std::string prefix, std::vector<Item> items)
        : ctx_(ctx), prefix_(std::move(prefix)), items_(std::move(items)), timer_(ctx.loop) {}

    void schedule() {
        std::weak_ptr<LeftoverDeleter> w = weak_from_this();
        timer_.start(backoff_.next_ms(), [w] {
            if (auto d = w.lock()) d->round();
        });
    }

    void round() {
        auto left = std::make_shared<size_t>(items_.size());
        auto keep = std::make_shared<std::vector<Item>>();
        std::weak_ptr<LeftoverDeleter> w = weak_from_this();
        for (const auto &it : items_) {
            ctx_.kube->del(it.path, it.body, [w, it, left, keep](const Result<Json::Value> &r) {
                auto d = w.lock();
                if (!d) return;
                if (r || r.error() == Error::NotFound || r.error() == Error::Conflict)
                    LOG_INFO("%s %s deleted (background retry)", d->prefix_.c_str(),
                             it.what.c_str());
                else
                    keep->push_back(it);
                if (--*left == 0) d->after_round(std::move(*keep));
            });
        }
    }

    void after_round(std::vector<Item> keep) {
        items_ = std::move(keep);
        if (items_.empty()) return self_.reset();  // may destroy this
        if (ctx_.clock->now_us() >= deadline_us_) {
            LOG_WARN("%s %zu deletes still failing after 10 minutes: left to garbage collection",
                     prefix_.c_str(), items_.size());
            return self_.reset();
        }
        schedule();
    }

    AgentContext &ctx_;
    std::string prefix_;
    std::vector<Item> items_;
    Timer timer_;
    Backoff backoff_{500, 8000};
    int64_t deadline_us_ = 0;
    std::shared_ptr<LeftoverDeleter> self_;
};

Json::Value uid_precondition(const std::string &uid) {
    if (uid.empty()) return Json::Value();
    Json::Value b(Json::objectValue);
    b["preconditions"]["uid"] = uid;
    return b;
}

}  // namespace

void cancel_leftover_deletes(AgentContext &ctx) {
    LeftoverDeleter::cancel_all(ctx);
}

void VirtualNode::deregister(uint32_t grace_s, const std::string &reason,
                             std::function<void(uint32_t)> done) {
    if (draining_) {  // a second deregister (epilog retry): answer when the first ends
        auto prev = std::move(drain_done_);
        drain_done_ = [prev, done](uint32_t n) {
            if (prev) prev(n);
            done(n);
        };
        return;
    }
    draining_ = true;
    drain_reason_ = reason.empty() ? "JobEnded" : reason;
    drain_grace_ = grace_s;
    drain_done_ = std::move(done);
    rec_.draining = true;
    if (auto st = ctx_.store->save(rec_); !st)
        LOG_WARN("%s cannot save state: %s", prefix().c_str(), st.message().c_str());
    LOG_INFO("%s deregistering (%s, grace %us, %zu pods)", prefix().c_str(), drain_reason_.c_str(),
             grace_s, pods_.size());
    lease_timer_.stop();
    status_timer_.stop();
    check_timer_.stop();
    end_timer_.stop();
    node_timer_.stop();
    std::weak_ptr<VirtualNode> w = weak_from_this();
    drain_timer_.start((static_cast<uint64_t>(grace_s) + 5) * 1000, [w] {
        auto s = w.lock();
        if (!s) return;
        LOG_WARN("%s pods did not stop within the grace budget; removing the node anyway",
                 s->prefix().c_str());
        s->finish_deregister();
    });
    if (ready_)
        cordon({kEndedTaintKey, std::to_string(rec_.job.job_id), "NoExecute"},
               [w](const Status &st) {
                   auto s = w.lock();
                   if (s && !st)
                       LOG_WARN("%s cordon failed: %s", s->prefix().c_str(), st.message().c_str());
               });
    std::vector<std::string> uids;
    for (const auto &[uid, p] : pods_)
        uids.push_back(uid);
    for (const auto &uid : uids) {
        PodEntry &p = pods_[uid];
        if (p.sent && runtime_ && !pod_is_terminal(p.rt_status)) {
            pods_stopped_++;
            kill_pod(uid, grace_s, drain_reason_);
        } else if (!p.sent && !pod_is_terminal(p.api)) {
            // Never ran here: final status Failed naming the job's end.
            Json::Value st(Json::objectValue);
            st["phase"] = "Failed";
            p.rt_status = job_end_status(st, drain_reason_, rec_.job.job_id);
            push_status(uid);
        }
    }
    drain_step();
}

bool VirtualNode::all_pods_stopped() const {
    for (const auto &[uid, p] : pods_) {
        if (p.sent && runtime_ && !pod_is_terminal(p.rt_status)) return false;
        if (p.patching || p.deleting) return false;
    }
    return true;
}

void VirtualNode::drain_step() {
    if (!draining_ || finishing_) return;
    // Pods that reached a terminal status get deleted from push_status; the
    // node goes once nothing is running, patching or deleting any more.
    std::vector<std::string> todo;
    for (const auto &[uid, p] : pods_)
        if (!p.deleting && !p.patching && (pod_is_terminal(p.rt_status) || !p.sent || !runtime_))
            todo.push_back(uid);
    for (const auto &uid : todo) {
        PodEntry &p = pods_[uid];
        if (!pod_is_terminal(p.rt_status)) {
            Json::Value st(Json::objectValue);
            st["phase"] = "Failed";
            p.rt_status = job_end_status(p.rt_status.isObject() ? p.rt_status : st, drain_reason_,
                                         rec_.job.job_id);
        }
        Json::Value desired = desired_pod_status(p.rt_status, p.api, ctx_.cfg->node_address);
        if (!pod_status_patch(p.api, desired).isNull())
            push_status(uid);
        else
            delete_pod(uid);
    }
    // Not before the first pod list: pods nobody knew of yet would be left
    // behind (the drain timer still bounds the wait when the API is down).
    if (listed_ && all_pods_stopped() && pending_deletes_ == 0 && pods_.empty())
        finish_deregister();
}

void VirtualNode::finish_deregister() {
    if (finishing_) return;
    finishing_ = true;
    drain_timer_.stop();
    if (watch_id_) ctx_.kube->cancel(watch_id_);
    watch_id_ = 0;
    watch_timer_.stop();
    std::weak_ptr<VirtualNode> w = weak_from_this();
    // What is still in the API when the node is done: pods not deleted (yet),
    // plus the Lease and the Node when their delete fails below.
    auto leftovers = std::make_shared<std::vector<LeftoverDeleter::Item>>();
    for (const auto &[uid, p] : pods_) {
        const Json::Value &md = p.api["metadata"];
        if (md["name"].asString().empty()) continue;
        Json::Value body = uid_precondition(uid);
        body["gracePeriodSeconds"] = 0;
        leftovers->push_back({"pod " + md["namespace"].asString() + "/" + md["name"].asString(),
                              KubeClient::pod(md["namespace"].asString(), md["name"].asString()),
                              body});
    }
    auto finish = [w, leftovers] {
        auto s = w.lock();
        if (!s) return;
        LeftoverDeleter::start(s->ctx_, s->prefix(), std::move(*leftovers));
        if (auto st = s->ctx_.store->remove(s->rec_.job.job_id, s->rec_.job.slurm_node); !st)
            LOG_WARN("%s %s", s->prefix().c_str(), st.message().c_str());
        LOG_INFO("%s removed", s->prefix().c_str());
        if (s->runtime_) s->runtime_->shutdown(0, s->drain_reason_, [](const Status &) {});
        s->stopped_ = true;
        auto done = std::move(s->drain_done_);
        if (done) done(s->pods_stopped_);
    };
    Json::Value lease_body = uid_precondition(lease_["metadata"]["uid"].asString());
    Json::Value node_body = uid_precondition(rec_.node_uid);
    ctx_.kube->del(
        KubeClient::lease(rec_.node_name), lease_body,
        [w, finish, leftovers, lease_body, node_body](const Result<Json::Value> &r) {
            auto s = w.lock();
            if (!s) return;
            if (!r && r.error() != Error::NotFound && r.error() != Error::Conflict) {
                LOG_WARN("%s lease delete failed: %s", s->prefix().c_str(), r.message().c_str());
                leftovers->push_back({"Lease", KubeClient::lease(s->rec_.node_name), lease_body});
            }
            s->ctx_.kube->del(
                KubeClient::node(s->rec_.node_name), node_body,
                [w, finish, leftovers, node_body](const Result<Json::Value> &r2) {
                    auto s2 = w.lock();
                    if (!s2) return;
                    if (!r2 && r2.error() != Error::NotFound && r2.error() != Error::Conflict) {
                        LOG_WARN("%s node delete failed: %s", s2->prefix().c_str(),
                                 r2.message().c_str());
                        leftovers->push_back(
                            {"Node", KubeClient::node(s2->rec_.node_name), node_body});
                    }
                    finish();
                });
        });
}

}  // namespace sk::agent
