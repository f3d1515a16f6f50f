// Pods: API -> runtime (list + watch by spec.nodeName, env resolution, run,
// kill on deletionTimestamp, final delete) and runtime -> API (status PATCH
// only when it changed, kubelet-like Events).
#include "agent/controllers/virtual_node.h"

#include <algorithm>

#include "agent/api_object.h"
#include "agent/env_resolver.h"
#include "agent/lost_shim.h"
#include "common/log.h"

namespace sk::agent {

static std::string pod_ref(const Json::Value &pod) {
    api::ObjectMeta m = api::object_meta(pod);
    return "[pod " + m.ns + "/" + m.name + "]";
}

void VirtualNode::list_pods() {
    if (stopped_) return;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    ctx_.kube->get(KubeClient::pods_on_node(rec_.node_name), [w](Result<Json::Value> r) {
        auto self = w.lock();
        if (!self || self->stopped_) return;
        if (!r) {
            uint64_t ms = self->watch_backoff_.next_ms();
            LOG_WARN("%s pod list failed: %s; retrying in %llu ms", self->prefix().c_str(),
                     r.message().c_str(), static_cast<unsigned long long>(ms));
            self->watch_timer_.start(ms, [w] {
                if (auto s = w.lock()) s->list_pods();
            });
            return;
        }
        self->pods_rv_ = api::object_meta(*r).resource_version;
        std::set<std::string> seen;
        for (const auto &pod : api::items(api::field(*r, "items"))) {
            seen.insert(api::object_meta(pod).uid);
            self->sync_pod(pod);
        }
        std::vector<std::string> gone;
        for (const auto &[uid, p] : self->pods_)
            if (!seen.count(uid)) gone.push_back(uid);
        for (const auto &uid : gone)
            self->forget_pod(uid);
        self->listed_ = true;
        self->reconcile_adopted();
        // A deregister that began before the first list (the job ended while
        // the agent was down) now also finishes the pods it did not know of.
        if (self->draining_) self->drain_step();
        self->start_watch();
    });
}

void VirtualNode::start_watch() {
    if (stopped_) return;
    std::string path = KubeClient::pods_on_node(rec_.node_name) +
                       "&watch=1&allowWatchBookmarks=true&resourceVersion=" + url_escape(pods_rv_);
    std::weak_ptr<VirtualNode> w = weak_from_this();
    watch_id_ = ctx_.kube->watch(
        path,
        [w](const WatchEvent &e) {
            if (auto s = w.lock()) s->on_watch_event(e);
        },
        [w](const Status &st) {
            if (auto s = w.lock()) s->on_watch_end(st);
        });
}

void VirtualNode::on_watch_event(const WatchEvent &e) {
    watch_backoff_.reset();
    switch (e.type) {
        case WatchType::Error:
            LOG_INFO("%s watch error %d (%s): relisting", prefix().c_str(), e.error_code,
                     e.error_message.c_str());
            if (ctx_.obs && ctx_.obs->watch_restart) ctx_.obs->watch_restart("pods");
            pods_rv_.clear();  // 410 or anything else: a fresh list
            return;
        case WatchType::Bookmark:
            pods_rv_ = e.resource_version;
            return;
        case WatchType::Deleted:
            pods_rv_ = e.resource_version;
            forget_pod(api::object_meta(e.object).uid);
            return;
        default:
            pods_rv_ = e.resource_version;
            sync_pod(e.object);
    }
}

void VirtualNode::on_watch_end(const Status &st) {
    watch_id_ = 0;
    if (stopped_) return;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    if (st && !pods_rv_.empty()) {  // the server closed a healthy stream: resume
        start_watch();
        return;
    }
    if (!st && ctx_.obs && ctx_.obs->watch_restart) ctx_.obs->watch_restart("pods");
    uint64_t ms = st ? 0 : watch_backoff_.next_ms();
    if (!st) LOG_WARN("%s pod watch ended: %s", prefix().c_str(), st.message().c_str());
    bool relist = pods_rv_.empty() || (!st && st.error() == Error::Gone);
    watch_timer_.start(ms, [w, relist] {
        auto s = w.lock();
        if (!s) return;
        if (relist)
            s->list_pods();
        else
            s->start_watch();
    });
}

bool VirtualNode::namespace_allowed(const std::string &ns) const {
    const auto &allowed =
        rec_.job.namespaces.empty() ? ctx_.cfg->allowed_namespaces : rec_.job.namespaces;
    return allowed.empty() || std::find(allowed.begin(), allowed.end(), ns) != allowed.end();
}

void VirtualNode::sync_pod(const Json::Value &pod) {
    std::string uid = api::object_meta(pod).uid;
    if (uid.empty()) return;
    PodEntry &p = pods_[uid];
    if (p.seen_us == 0) p.seen_us = ctx_.clock->now_us();
    // Keep the newest object: a PATCH reply may be newer than a watch event.
    p.api = pod;
    bool deleting = api::object_meta(pod).deleting;
    bool terminal = pod_is_terminal(pod);
    if (deleting) {
        if (p.sent && !terminal && !pod_is_terminal(p.rt_status)) {
            uint32_t grace = api::object_meta(pod).deletion_grace_s;
            kill_pod(uid, grace, "Killing");
        } else if (!p.patching) {
            delete_pod(uid);
        }
        return;
    }
    if (terminal || p.sent || p.resolving || p.shim_lost) return;
    if (draining_) return;
    if (!namespace_allowed(api::object_meta(pod).ns)) {
        if (p.refused) return;
        p.refused = true;
        std::string msg = "namespace " + api::object_meta(pod).ns +
                          " may not use the nodes of Slurm job " + std::to_string(rec_.job.job_id);
        LOG_WARN("%s refused: %s", pod_ref(pod).c_str(), msg.c_str());
        p.rt_status = refused_pod_status(pod, "NamespaceNotAllowed", msg, ctx_.cfg->node_address,
                                         ctx_.clock->now_s());
        post_event(pod, {"Warning", "NamespaceNotAllowed", msg, ""});
        push_status(uid);
        return;
    }
    if (!runtime_) {  // runs once the shim attaches
        if (shim_dead_) fail_shim_lost(uid);
        return;
    }
    run_pod(uid);
}

void VirtualNode::run_pod(const std::string &uid) {
    PodEntry &p = pods_[uid];
    Json::Value pod = p.api;
    std::string ns = api::object_meta(pod).ns;
    auto refs = referenced_objects(pod);
    auto fetched = std::make_shared<FetchedObjects>();
    auto remaining = std::make_shared<size_t>(refs.size());
    auto error = std::make_shared<Status>();
    p.resolving = true;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    auto finish = [w, uid, fetched, error] {
        auto self = w.lock();
        if (!self) return;
        auto it = self->pods_.find(uid);
        if (it == self->pods_.end()) return;
        PodEntry &e = it->second;
        e.resolving = false;
        if (!self->runtime_ || self->draining_) return;
        NodeFacts facts{self->rec_.node_name, self->ctx_.cfg->node_address,
                        self->rec_.job.cpus ? self->rec_.job.cpus : self->ctx_.host.host_cpus,
                        self->rec_.job.memory_mib ? self->rec_.job.memory_mib
                                                  : self->ctx_.host.host_memory_mib};
        Result<Json::Value> body =
            *error ? resolve_pod(e.api, *fetched, facts) : Result<Json::Value>(error->failure());
        if (!body) {
            LOG_WARN("%s cannot start: %s", pod_ref(e.api).c_str(), body.message().c_str());
            self->post_event(e.api, {"Warning", "Failed", "Error: " + body.message(), ""});
            // Retried on the next change of the pod, as the kubelet does.
            return;
        }
        e.sent = true;
        LOG_INFO("%s handing to the runtime", pod_ref(e.api).c_str());
        self->runtime_->run(*body, [w, uid](const Status &st) {
            auto s = w.lock();
            if (!s || st) return;
            auto it2 = s->pods_.find(uid);
            if (it2 == s->pods_.end()) return;
            LOG_WARN("%s refused by the runtime: %s", pod_ref(it2->second.api).c_str(),
                     st.message().c_str());
            if (st.error() == Error::Unavailable) {  // the shim went away: retry on attach
                it2->second.sent = false;
                return;
            }
            if (it2->second.rt_status.isNull() || !pod_is_terminal(it2->second.rt_status)) {
                it2->second.rt_status =
                    refused_pod_status(it2->second.api, "Refused", st.message(),
                                       s->ctx_.cfg->node_address, s->ctx_.clock->now_s());
                s->push_status(uid);
            }
        });
    };
    if (refs.empty()) return finish();
    for (const auto &ref : refs) {
        std::string path = "/api/v1/namespaces/" + ns + "/" + ref.first + "/" + ref.second;
        ctx_.kube->get(path, [ref, fetched, remaining, error, finish](Result<Json::Value> r) {
            if (r)
                (*fetched)[ref] = *r;
            else if (r.error() != Error::NotFound && *error)
                *error = r.failure();
            if (--*remaining == 0) finish();
        });
    }
}

void VirtualNode::kill_pod(const std::string &uid, uint32_t grace_s, const std::string &reason) {
    PodEntry &p = pods_[uid];
    if (p.killing || !runtime_) return;
    p.killing = true;
    for (const auto &c : api::items(api::field(api::field(p.api, "spec"), "containers"))) {
        std::string name = api::text(api::field(c, "name"));
        post_event(p.api, {"Normal", "Killing", "Stopping container " + name,
                           "spec.containers{" + name + "}"});
    }
    LOG_INFO("%s stopping (grace %us, %s)", pod_ref(p.api).c_str(), grace_s, reason.c_str());
    std::weak_ptr<VirtualNode> w = weak_from_this();
    runtime_->kill(uid, grace_s, reason, [w, uid](const Status &st) {
        auto s = w.lock();
        if (!s || st) return;
        auto it = s->pods_.find(uid);
        if (it == s->pods_.end()) return;
        LOG_WARN("%s kill failed: %s", pod_ref(it->second.api).c_str(), st.message().c_str());
        it->second.killing = false;
    });
}

void VirtualNode::delete_pod(const std::string &uid) {
    PodEntry &p = pods_[uid];
    if (p.deleting) return;
    p.deleting = true;
    if (draining_) pending_deletes_++;
    Json::Value body(Json::objectValue);
    body["gracePeriodSeconds"] = 0;
    body["preconditions"]["uid"] = uid;
    std::string ref = pod_ref(p.api);
    std::weak_ptr<VirtualNode> w = weak_from_this();
    ctx_.kube->del(KubeClient::pod(api::object_meta(p.api).ns, api::object_meta(p.api).name), body,
                   [w, uid, ref](const Result<Json::Value> &r) {
                       auto s = w.lock();
                       if (!s) return;
                       if (r || r.error() == Error::NotFound || r.error() == Error::Conflict) {
                           LOG_INFO("%s deleted", ref.c_str());
                           s->unindex_logs(uid);
                       } else {
                           LOG_WARN("%s delete failed: %s", ref.c_str(), r.message().c_str());
                           auto it = s->pods_.find(uid);
                           if (it != s->pods_.end() && !s->draining_)
                               it->second.deleting = false;  // next event retries
                           if (it != s->pods_.end() && s->draining_) {
                               // The drain retries it after a pause, not in a
                               // tight loop against an unreachable API server.
                               defer(
                                   s->ctx_.loop,
                                   [w, uid] {
                                       auto s2 = w.lock();
                                       if (!s2) return;
                                       auto it2 = s2->pods_.find(uid);
                                       if (it2 == s2->pods_.end()) return;
                                       it2->second.deleting = false;
                                       s2->drain_step();
                                   },
                                   1000);
                           }
                       }
                       if (s->draining_) {
                           s->pending_deletes_--;
                           if (r || r.error() == Error::NotFound || r.error() == Error::Conflict)
                               s->pods_.erase(uid);
                           s->drain_step();
                       }
                   });
}

void VirtualNode::forget_pod(const std::string &uid) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    unindex_logs(uid);
    // Deleted from the API: stop it if it may still run (force delete), and
    // in any case let the runtime forget it (the shim frees the pod and
    // removes its directory; reason "Deleted", contract 2).
    if (it->second.sent && runtime_) runtime_->kill(uid, 0, "Deleted", [](const Status &) {});
    pods_.erase(it);
    if (draining_) drain_step();
}

void VirtualNode::on_runtime_status(const PodSnapshot &snap) {
    auto it = pods_.find(snap.uid);
    if (it == pods_.end()) {
        if (!listed_) {
            adopted_[snap.uid] = snap;
            return;
        }
        LOG_INFO("[pod %s/%s] runs but is not bound to %s: stopping it", snap.ns.c_str(),
                 snap.name.c_str(), rec_.node_name.c_str());
        if (runtime_) runtime_->kill(snap.uid, 0, "Orphaned", [](const Status &) {});
        return;
    }
    PodEntry &p = it->second;
    p.sent = true;
    // A later shim reports the pods of the dead one as failed too: the
    // agent's ShimLost status stays the final word.
    if (p.shim_lost && pod_is_terminal(snap.status)) return;
    p.rt_status = snap.status;
    p.rt_events = p.rt_events || snap.reports_events;
    index_logs(snap);
    post_runtime_events(p.api, snap.events);
    if (draining_ && pod_is_terminal(snap.status))
        p.rt_status = job_end_status(snap.status, drain_reason_, rec_.job.job_id);
    push_status(snap.uid);
}

void VirtualNode::push_status(const std::string &uid) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    PodEntry &p = it->second;
    if (p.patching) {
        p.dirty = true;
        return;
    }
    Json::Value desired = desired_pod_status(p.rt_status, p.api, ctx_.cfg->node_address);
    Json::Value patch = pod_status_patch(p.api, desired);
    auto after = [this, uid](PodEntry &e) {
        bool deleting = api::object_meta(e.api).deleting;
        if ((deleting || draining_) && pod_is_terminal(e.rt_status)) delete_pod(uid);
        if (draining_) drain_step();
    };
    if (patch.isNull()) return after(p);
    Json::Value old_status = p.api["status"];
    p.patching = true;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    const api::ObjectMeta md = api::object_meta(p.api);
    ctx_.kube->patch(
        KubeClient::pod(md.ns, md.name) + "/status", patch, kStrategicMerge,
        [w, uid, old_status, after](Result<Json::Value> r) {
            auto s = w.lock();
            if (!s) return;
            auto it2 = s->pods_.find(uid);
            if (it2 == s->pods_.end()) return;
            PodEntry &e = it2->second;
            e.patching = false;
            if (r) {
                const Json::Value &ns = api::field(*r, "status");
                for (const auto &ev : status_events(*r, old_status, ns, !e.rt_events))
                    s->post_event(*r, ev);
                if (!e.start_reported && api::text(api::field(ns, "phase")) == "Running") {
                    e.start_reported = true;
                    if (s->ctx_.obs && s->ctx_.obs->pod_started && e.seen_us)
                        s->ctx_.obs->pod_started(
                            static_cast<double>(s->ctx_.clock->now_us() - e.seen_us) / 1e6);
                }
                e.api = *r;
            } else if (r.error() == Error::NotFound) {
                s->forget_pod(uid);  // deleted meanwhile: the runtime forgets it too
                return;
            } else {
                LOG_WARN("%s status update failed: %s", pod_ref(e.api).c_str(),
                         r.message().c_str());
                // Retried below after a pause, with the newest status then.
                e.dirty = true;
            }
            if (e.dirty) {
                e.dirty = false;
                if (!r) {
                    // Back off a little before retrying the same write.
                    defer(
                        s->ctx_.loop,
                        [w, uid] {
                            if (auto s2 = w.lock()) s2->push_status(uid);
                        },
                        1000);
                    return;
                }
                s->push_status(uid);
                return;
            }
            after(e);
        });
}

void VirtualNode::post_events(const Json::Value &pod, const Json::Value &old_status,
                              const Json::Value &new_status) {
    for (const auto &e : status_events(pod, old_status, new_status))
        post_event(pod, e);
}

void VirtualNode::post_event(const Json::Value &pod, const EventSpec &e) {
    Json::Value ev = build_pod_event(pod, e, rec_.node_name, ctx_.clock->now_us());
    std::string ns = api::object_meta(pod).ns;
    EventCorrelator *corr = ctx_.events;
    if (!corr) {
        ctx_.kube->post(KubeClient::events(ns), ev, [](const Result<Json::Value> &r) {
            if (!r) LOG_VERBOSE("event post failed: %s", r.message().c_str());
        });
        return;
    }
    // A repeat within the correlator's window: count + lastTimestamp, as the
    // kubelet does. Failures make the next repeat a fresh Event.
    auto a = corr->observe(ev, ctx_.clock->now_s());
    std::weak_ptr<VirtualNode> w = weak_from_this();
    auto on_reply = [w, ev, corr](const Result<Json::Value> &r) {
        if (r) return;
        LOG_VERBOSE("event %s failed: %s", ev["reason"].asString().c_str(), r.message().c_str());
        if (w.lock()) corr->forget(ev);
    };
    if (a.create)
        ctx_.kube->post(KubeClient::events(ns), a.body, on_reply);
    else
        ctx_.kube->patch(KubeClient::events(a.ns) + "/" + a.name, a.body, kStrategicMerge,
                         on_reply);
}

void VirtualNode::post_runtime_events(const Json::Value &pod,
                                      const std::vector<RuntimeEvent> &events) {
    for (const auto &re : events) {
        std::string fp;
        if (!re.container.empty()) {
            bool init = false;
            for (const auto &c : api::items(api::field(api::field(pod, "spec"), "initContainers")))
                init = init || api::text(api::field(c, "name")) == re.container;
            fp = std::string(init ? "spec.initContainers{" : "spec.containers{") + re.container +
                 "}";
        }
        post_event(pod, {re.type, re.reason, re.message, fp});
    }
}

void VirtualNode::index_logs(const PodSnapshot &snap) {
    if (!ctx_.logs) return;
    auto it = pods_.find(snap.uid);
    if (it == pods_.end()) return;
    const api::ObjectMeta md = api::object_meta(it->second.api);
    ctx_.logs->update(md.ns, md.name, snap.uid,
                      shim_state_dir_for(*ctx_.cfg, rec_.job.job_id, rec_.job.slurm_node),
                      snap.status);
}

void VirtualNode::unindex_logs(const std::string &uid) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    const api::ObjectMeta md = api::object_meta(it->second.api);
    if (ctx_.logs) ctx_.logs->remove(md.ns, md.name, uid);
    if (ctx_.events) ctx_.events->forget_object(uid);
}

void VirtualNode::set_runtime(std::unique_ptr<PodRuntime> rt, int shim_pid) {
    runtime_ = std::move(rt);
    if (!runtime_) return;
    shim_timer_.stop();
    shim_dead_ = false;
    shim_pid_ = shim_pid;
    shim_start_ticks_ = shim_pid > 0 ? proc_start_ticks(shim_pid) : 0;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    runtime_->set_status_sink([w](const PodSnapshot &snap) {
        if (auto s = w.lock()) s->on_runtime_status(snap);
    });
    runtime_->set_lost_sink([w] {
        if (auto s = w.lock()) s->on_runtime_lost();
    });
    runtime_->snapshot([w](Result<std::vector<PodSnapshot>> r) {
        auto s = w.lock();
        if (!s) return;
        if (!r) {
            LOG_WARN("%s runtime snapshot failed: %s", s->prefix().c_str(), r.message().c_str());
        } else {
            for (const auto &snap : *r)
                s->adopted_[snap.uid] = snap;
            LOG_INFO("%s runtime attached with %zu pods", s->prefix().c_str(), r->size());
        }
        if (s->listed_) s->reconcile_adopted();
    });
}

void VirtualNode::reconcile_adopted() {
    auto adopted = std::move(adopted_);
    adopted_.clear();
    for (const auto &[uid, snap] : adopted) {
        if (pods_.count(uid)) pods_[uid].sent = true;
        on_runtime_status(snap);  // unknown ones are stopped there
    }
    if (!runtime_) return;
    std::vector<Json::Value> todo;
    for (const auto &[uid, p] : pods_)
        if (!p.sent && !p.resolving) todo.push_back(p.api);
    for (const auto &pod : todo)
        sync_pod(pod);
}

void VirtualNode::on_runtime_lost() {
    LOG_WARN("%s the job's shim went away; pods wait for it to re-attach", prefix().c_str());
    // Destroying the runtime from inside its own callback is not allowed: defer.
    std::weak_ptr<VirtualNode> w = weak_from_this();
    defer(ctx_.loop, [w] {
        auto s = w.lock();
        if (!s) return;
        s->runtime_.reset();
        for (auto &[uid, p] : s->pods_) {
            p.sent = false;
            p.killing = false;
        }
        if (s->draining_) s->drain_step();
        s->watch_lost_shim();
    });
}

// A live shim reconnects on its own (contract 4: first retry after 500 ms);
// a dead one never will. So while no shim is attached the old one's pid is
// checked every 200 ms (pid + start time, a zombie counts as dead): death is
// acted on within 200 ms, a reconnect simply stops the check. With no pid
// (a fake runtime) the pods keep waiting, as before.
void VirtualNode::watch_lost_shim() {
    if (stopped_ || runtime_ || shim_pid_ <= 0 || shim_start_ticks_ == 0) return;
    std::weak_ptr<VirtualNode> w = weak_from_this();
    shim_timer_.start(
        0,
        [w] {
            auto s = w.lock();
            if (!s) return;
            if (s->runtime_ || s->stopped_) return s->shim_timer_.stop();
            if (!process_gone(s->shim_pid_, s->shim_start_ticks_)) return;
            s->shim_timer_.stop();
            s->on_shim_dead();
        },
        200);
}

// The shim died: nothing stops or reports its pods any more. Their recorded
// process groups are killed, and each pod becomes Failed/ShimLost with a
// Warning event. The node stays Ready (the job still holds its GPUs and a
// new shim may attach), but until one does a pod bound here fails at once
// with ShimLost instead of sitting Pending with no explanation: that is what
// a user checking `kubectl get pods` can act on, and what a kubelet does with
// pods it cannot admit.
void VirtualNode::on_shim_dead() {
    shim_dead_ = true;
    int n =
        stop_recorded_processes(shim_state_dir_for(*ctx_.cfg, rec_.job.job_id, rec_.job.slurm_node),
                                rec_.job.uid, rec_.job.gid);
    LOG_WARN(
        "%s the job's shim (pid %d) died without re-attaching: stopped %d pod process "
        "groups; its pods are reported Failed (ShimLost)",
        prefix().c_str(), shim_pid_, n);
    if (draining_) return drain_step();  // final statuses name the job's end
    std::vector<std::string> uids;
    for (const auto &[uid, p] : pods_)
        if (!pod_is_terminal(p.api) && !pod_is_terminal(p.rt_status) && !p.refused)
            uids.push_back(uid);
    for (const auto &uid : uids)
        fail_shim_lost(uid);
}

void VirtualNode::fail_shim_lost(const std::string &uid) {
    PodEntry &p = pods_[uid];
    if (p.shim_lost) return;
    p.shim_lost = true;
    bool ran = p.rt_status.isObject() && p.rt_status["containerStatuses"].size() > 0;
    std::string msg =
        ran ? "the job's pod runner (slurm-k8s-shim) died; the pod's processes were stopped"
            : "the job's pod runner (slurm-k8s-shim) died; no pod can start on this node "
              "until it is restarted or the Slurm job ends";
    int64_t now = ctx_.clock->now_s();
    LOG_WARN("%s failed: %s", pod_ref(p.api).c_str(), msg.c_str());
    if (ran) {
        p.rt_status = shim_lost_status(p.rt_status, msg, rfc3339(now));
        // Without container statuses push_status posts the pod-level
        // Warning itself (status_events); with them it is posted here.
        post_event(p.api, {"Warning", "ShimLost", msg, ""});
    } else {
        p.rt_status = refused_pod_status(p.api, "ShimLost", msg, ctx_.cfg->node_address, now);
    }
    push_status(uid);
}

}  // namespace sk::agent
