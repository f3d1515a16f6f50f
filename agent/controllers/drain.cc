#include "agent/controllers/drain.h"

#include <sys/stat.h>

#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "agent/controllers/pod_status_patch.h"
#include "agent/kube/api_object.h"
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
// never touched (409 ends its retries, as does 404). A node whose pods were
// never listed gets a list item instead: the list by spec.nodeName, retried
// like a delete, whose answer turns into one delete per pod (grace 0, uid
// precondition); none once the job has a state file again (it re-registered:
// the pods are its new node's). Owns itself until done.
class LeftoverDeleter : public std::enable_shared_from_this<LeftoverDeleter> {
  public:
    struct Item {
        Item(std::string w, std::string p, Json::Value b, std::string sp)
            : what(std::move(w)),
              path(std::move(p)),
              body(std::move(b)),
              state_path(std::move(sp)) {}
        std::string what;  // for the log: "pod ns/name", "Lease", "Node"
        std::string path;  // the pod list's, for a list item
        Json::Value body;
        std::string state_path;  // set for a list item only: the job's state file
        // A list item's: each listed pod's final status names the job's end
        // (orphan_final_status_patch) before its delete; "" = delete only.
        std::string final_reason;
        uint32_t job_id = 0;
        // A pod's: PATCHed to path/status first (a 404 or 409 ends the item:
        // the pod is gone, or another one holds the name), then deleted.
        Json::Value status_patch;
    };

    static void start(AgentContext &ctx, std::string prefix, std::vector<Item> items) {
        if (items.empty()) return;
        auto d = std::shared_ptr<LeftoverDeleter>(
            new LeftoverDeleter(ctx, std::move(prefix), std::move(items)));
        d->self_ = d;
        live_deleters().insert(d.get());
        d->deadline_us_ = ctx.clock->now_us() + kGiveUpUs;
        size_t lists = 0;
        for (const auto &it : d->items_)
            lists += !it.state_path.empty();
        if (lists == d->items_.size())
            LOG_INFO(
                "%s the node's pods were never listed: listing and deleting them in the "
                "background",
                d->prefix_.c_str());
        else
            LOG_WARN("%s %zu deletes failed%s; retrying in the background", d->prefix_.c_str(),
                     d->items_.size() - lists, lists ? " (and the node's pod list)" : "");
        d->schedule();
    }

    ~LeftoverDeleter() { live_deleters().erase(this); }

    // Agent shutdown: the deletes left are the next agent's garbage collection.
    static void cancel_all(AgentContext &ctx) {
        std::vector<LeftoverDeleter *> mine;
        for (LeftoverDeleter *d : live_deleters())
            // Each holds a copy of its context on the agent's side (agent_side):
            // the agent's API client tells whose it is.
            if (d->ctx_.kube == &ctx.agent_api()) mine.push_back(d);
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
        : ctx_(agent_side(ctx)),
          prefix_(std::move(prefix)),
          items_(std::move(items)),
          timer_(*ctx.timers) {}

    // The retries outlive the virtual node, its context and its identity
    // (whose certificate is forgotten with it): they go out under the
    // agent's own, from a copy of the context whose pointers all lead to
    // the agent's objects.
    static AgentContext agent_side(const AgentContext &ctx) {
        AgentContext c = ctx;
        c.kube = &ctx.agent_api();
        c.agent_kube = nullptr;
        return c;
    }

    void schedule() {
        std::weak_ptr<LeftoverDeleter> w = weak_from_this();
        timer_.start(backoff_.next_ms(), [w] {
            if (auto d = w.lock()) d->round();
        });
    }

    void round() {
        auto left = std::make_shared<size_t>(items_.size());
        auto keep = std::make_shared<std::vector<Item>>();
        for (const auto &it : items_) {
            if (!it.state_path.empty()) {
                list_pods(it, left, keep);
                continue;
            }
            if (!it.status_patch.isNull())
                patch_status(it, left, keep);
            else
                delete_item(it, left, keep);
        }
    }

    void delete_item(const Item &it, const std::shared_ptr<size_t> &left,
                     const std::shared_ptr<std::vector<Item>> &keep) {
        std::weak_ptr<LeftoverDeleter> w = weak_from_this();
        ctx_.kube->del(it.path, it.body, [w, it, left, keep](const Result<Json::Value> &r) {
            auto d = w.lock();
            if (!d) return;
            if (r || r.error() == Error::NotFound || r.error() == Error::Conflict)
                LOG_INFO("%s %s deleted (background retry)", d->prefix_.c_str(), it.what.c_str());
            else
                keep->push_back(it);
            if (--*left == 0) d->after_round(std::move(*keep));
        });
    }

    void patch_status(const Item &it, const std::shared_ptr<size_t> &left,
                      const std::shared_ptr<std::vector<Item>> &keep) {
        std::weak_ptr<LeftoverDeleter> w = weak_from_this();
        ctx_.kube->patch(it.path + "/status", it.status_patch, kStrategicMerge,
                         [w, it, left, keep](const Result<Json::Value> &r) {
                             auto d = w.lock();
                             if (!d) return;
                             if (r) {
                                 Item del = it;
                                 del.status_patch = Json::Value();
                                 return d->delete_item(del, left, keep);  // at once, in this round
                             }
                             if (r.error() != Error::NotFound && r.error() != Error::Conflict) {
                                 LOG_VERBOSE("%s %s: final status failed: %s", d->prefix_.c_str(),
                                             it.what.c_str(), r.message().c_str());
                                 keep->push_back(it);
                             } else {
                                 LOG_INFO("%s %s is gone or another one holds its name: %s",
                                          d->prefix_.c_str(), it.what.c_str(), r.message().c_str());
                             }
                             if (--*left == 0) d->after_round(std::move(*keep));
                         });
    }

    void list_pods(const Item &it, const std::shared_ptr<size_t> &left,
                   const std::shared_ptr<std::vector<Item>> &keep) {
        std::weak_ptr<LeftoverDeleter> w = weak_from_this();
        ctx_.kube->get(it.path, [w, it, left, keep](const Result<Json::Value> &r) {
            auto d = w.lock();
            if (!d) return;
            struct stat sb;
            if (!r) {
                keep->push_back(it);
            } else if (stat(it.state_path.c_str(), &sb) == 0) {
                LOG_INFO("%s registered again: its pods are left to its new node",
                         d->prefix_.c_str());
            } else {
                size_t n = 0;
                for (const auto &pod : api::items(api::field(*r, "items"))) {
                    api::ObjectMeta md = api::object_meta(pod);
                    if (md.name.empty() || md.ns.empty()) continue;
                    Json::Value body = KubeClient::uid_precondition(md.uid);
                    body["gracePeriodSeconds"] = 0;
                    Item pi{"pod " + md.ns + "/" + md.name, KubeClient::pod(md.ns, md.name), body,
                            ""};
                    // Nothing runs it any more: its final status says why
                    // (as the PodGC controller fails a pod of a deleted node).
                    if (!it.final_reason.empty())
                        pi.status_patch = orphan_final_status_patch(pod, it.final_reason, it.job_id,
                                                                    d->ctx_.clock->now_s());
                    keep->push_back(pi);
                    n++;
                }
                LOG_INFO("%s %zu pods bound to the node listed (background retry)",
                         d->prefix_.c_str(), n);
                d->backoff_.reset();  // progress: their deletes follow at once
            }
            if (--*left == 0) d->after_round(std::move(*keep));
        });
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

    AgentContext ctx_;
    std::string prefix_;
    std::vector<Item> items_;
    ControllerTimer timer_;
    Backoff backoff_{500, 8000};
    int64_t deadline_us_ = 0;
    std::shared_ptr<LeftoverDeleter> self_;
};

LeftoverDeleter::Item pod_list_item(AgentContext &ctx, const std::string &node_name,
                                    uint32_t job_id, const std::string &slurm_node,
                                    const std::string &final_reason) {
    LeftoverDeleter::Item it{"pod list", KubeClient::pods_on_node(node_name), Json::Value(),
                             ctx.store->path_of(job_id, slurm_node)};
    it.final_reason = final_reason;
    it.job_id = job_id;
    return it;
}

}  // namespace

void cancel_leftover_deletes(AgentContext &ctx) {
    LeftoverDeleter::cancel_all(ctx);
}

void delete_unlisted_pods(AgentContext &ctx, const std::string &node_name, uint32_t job_id,
                          const std::string &slurm_node, const std::string &final_reason) {
    LeftoverDeleter::start(ctx, "[node " + node_name + "]",
                           {pod_list_item(ctx, node_name, job_id, slurm_node, final_reason)});
}

Drain::Drain(AgentContext &ctx, JobRecord &rec, NodeLeaseController &node, PodController &pods)
    : ctx_(ctx), rec_(rec), node_(node), pods_(pods), timer_(*ctx.timers) {}

void Drain::start(uint32_t grace_s, const std::string &reason, std::function<void(uint32_t)> done) {
    // A retry that comes once the node is gone (before its owner drops it)
    // is answered at once: the first drain's done will not run again.
    if (phase_ == Phase::Done) return done(pods_.asked_to_stop());
    if (active()) {  // a second deregister (epilog retry): answer when the first ends
        auto prev = std::move(done_);
        done_ = [prev, done](uint32_t n) {
            if (prev) prev(n);
            done(n);
        };
        return;
    }
    phase_ = Phase::Stopping;
    reason_ = reason.empty() ? "JobEnded" : reason;
    done_ = std::move(done);
    rec_.draining = true;
    if (auto st = ctx_.store->save(rec_); !st)
        LOG_WARN("%s cannot save state: %s", prefix().c_str(), st.message().c_str());
    LOG_INFO("%s deregistering (%s, grace %us, %zu pods)", prefix().c_str(), reason_.c_str(),
             grace_s, pods_.size());
    node_.release();
    post_end_event(grace_s);
    timer_.start((static_cast<uint64_t>(grace_s) + 5) * 1000, guard([this] {
                     LOG_WARN(
                         "%s pods did not stop within the grace budget; removing the node "
                         "anyway",
                         prefix().c_str());
                     remove_node();
                 }));
    if (node_.ready())
        node_.cordon({kEndedTaintKey, std::to_string(rec_.job.job_id), "NoExecute"},
                     guard([this](const Status &st) {
                         if (!st)
                             LOG_WARN("%s cordon failed: %s", prefix().c_str(),
                                      st.message().c_str());
                     }));
    pods_.stop_all(grace_s, reason_, guard([this] { remove_node(); }));
}

void Drain::stop() {
    timer_.stop();
}

// The Node's Event naming why the job ended (what `kubectl describe node`
// and `kubectl get events` show once the Node is gone): Warning when the
// job did not end by itself or by its owner's hand.
void Drain::post_end_event(uint32_t grace_s) {
    Json::Value ev = build_node_event(
        rec_.node_name,
        job_end_event(reason_, rec_.job.job_id,
                      ": stopping " + std::to_string(pods_.unfinished()) + " pod(s) within " +
                          std::to_string(grace_s) + " s, then removing the node"),
        ctx_.clock->now_us());
    ctx_.kube->post(KubeClient::events("default"), ev, [](const Result<Json::Value> &r) {
        if (!r) LOG_VERBOSE("node event post failed: %s", r.message().c_str());
    });
}

void Drain::remove_node() {
    if (phase_ != Phase::Stopping) return;
    phase_ = Phase::Removing;
    timer_.stop();
    pods_.end_stop_all();
    // What is still in the API when the node is done: pods not deleted (yet),
    // plus the Lease and the Node when their delete fails below.
    auto leftovers = std::make_shared<std::vector<LeftoverDeleter::Item>>();
    for (const auto &p : pods_.remaining()) {
        Json::Value body = KubeClient::uid_precondition(p.uid);
        body["gracePeriodSeconds"] = 0;
        leftovers->push_back(
            {"pod " + p.ns + "/" + p.name, KubeClient::pod(p.ns, p.name), body, ""});
    }
    // Never listed (the drain's time ran out first): pods nobody knew of
    // would stay in the API for good, with no kubelet to clean them up.
    if (!pods_.listed())
        leftovers->push_back(
            pod_list_item(ctx_, rec_.node_name, rec_.job.job_id, rec_.job.slurm_node, reason_));
    auto finish = guard([this, leftovers] {
        LeftoverDeleter::start(ctx_, prefix(), std::move(*leftovers));
        if (auto st = ctx_.store->remove(rec_.job.job_id, rec_.job.slurm_node); !st)
            LOG_WARN("%s %s", prefix().c_str(), st.message().c_str());
        LOG_INFO("%s removed", prefix().c_str());
        if (PodRuntime *rt = pods_.runtime())
            if (auto why = stop_reason_of(reason_, "shutdown"))  // else nothing to send
                rt->shutdown(0, *why, [](const Status &) {});
        node_.stop();
        pods_.stop();
        phase_ = Phase::Done;
        auto done = std::move(done_);
        if (done) done(pods_.asked_to_stop());
    });
    Json::Value lease_body = KubeClient::uid_precondition(node_.lease_uid());
    Json::Value node_body = KubeClient::uid_precondition(rec_.node_uid);
    ctx_.kube->del(
        KubeClient::lease(rec_.node_name), lease_body,
        guard([this, finish, leftovers, lease_body, node_body](const Result<Json::Value> &r) {
            if (!r && r.error() != Error::NotFound && r.error() != Error::Conflict) {
                LOG_WARN("%s lease delete failed: %s", prefix().c_str(), r.message().c_str());
                leftovers->push_back({"Lease", KubeClient::lease(rec_.node_name), lease_body, ""});
            }
            // A node identity may not delete its Node: the agent's does.
            ctx_.agent_api().del(
                KubeClient::node(rec_.node_name), node_body,
                guard([this, finish, leftovers, node_body](const Result<Json::Value> &r2) {
                    if (!r2 && r2.error() != Error::NotFound && r2.error() != Error::Conflict) {
                        LOG_WARN("%s node delete failed: %s", prefix().c_str(),
                                 r2.message().c_str());
                        leftovers->push_back(
                            {"Node", KubeClient::node(rec_.node_name), node_body, ""});
                    }
                    finish();
                }));
        }));
}

}  // namespace sk::agent
