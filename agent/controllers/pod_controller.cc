#include "agent/controllers/pod_controller.h"

#include "common/k8s_names.h"

#include <algorithm>
#include <set>
#include <utility>

#include "agent/controllers/agent_context.h"
#include "agent/controllers/env_resolver.h"
#include "agent/controllers/host_volumes.h"
#include "agent/controllers/lost_shim.h"
#include "agent/controllers/node_builder.h"
#include "agent/kube/api_object.h"
#include "common/daemons/base64.h"
#include "common/daemons/image_ref.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/rfc3339.h"
#include "common/strings.h"

namespace sk::agent {

static std::string pod_ref(const Json::Value &pod) {
    api::ObjectMeta m = api::object_meta(pod);
    return "[pod " + m.ns + "/" + m.name + "]";
}

PodController::PodController(AgentContext &ctx, const JobRecord &rec)
    : ctx_(ctx),
      rec_(rec),
      watch_timer_(*ctx.timers),
      shim_timer_(*ctx.timers),
      start_timer_(*ctx.timers),
      refusal_timer_(*ctx.timers),
      volumes_(ctx, *this) {}

std::string PodController::prefix() const {
    return "[node " + rec_.node_name + "]";
}

void PodController::start() {
    list_pods();
    volumes_.start();
}

void PodController::stop() {
    stopped_ = true;
    if (watch_id_) ctx_.kube->cancel(watch_id_);
    watch_id_ = 0;
    watch_timer_.stop();
    shim_timer_.stop();
    volumes_.stop();
    start_timer_.stop();
    refusal_timer_.stop();
}

void PodController::set_node(const Json::Value &node) {
    int64_t created =
        parse_rfc3339(api::text(api::field(api::field(node, "metadata"), "creationTimestamp")));
    // The first Node of the job counts: one re-created later (deleted by
    // hand) must not turn the job's own waiting pods into an earlier job's.
    if (node_created_s_ >= 0) return;
    node_created_s_ = created < 0 ? 0 : created;
    if (rec_.slot < 0) return;
    // The pods held for it (sync_pod) are looked at now.
    std::vector<Json::Value> held;
    for (const auto &[uid, p] : pods_)
        if (p.state == PodState::Pending) held.push_back(p.api);
    for (const auto &pod : held)
        sync_pod(pod);
}

namespace {

// When the pod was bound to its node: the scheduler's binding sets
// PodScheduled True (its lastTransitionTime); a pod created with
// spec.nodeName was bound at its creation. -1 = unknown.
int64_t bound_at(const Json::Value &pod) {
    for (const auto &c : api::items(api::field(api::field(pod, "status"), "conditions")))
        if (api::text(api::field(c, "type")) == "PodScheduled" &&
            api::text(api::field(c, "status")) == "True")
            if (int64_t t = parse_rfc3339(api::text(api::field(c, "lastTransitionTime"))); t >= 0)
                return t;
    return parse_rfc3339(api::text(api::field(api::field(pod, "metadata"), "creationTimestamp")));
}

bool host_network(const Json::Value &pod) {
    return pod["spec"].isObject() && pod["spec"]["hostNetwork"].isBool() &&
           pod["spec"]["hostNetwork"].asBool();
}

std::string pod_hostname(const Json::Value &pod) {
    std::string h = k8s::pod_hostname(pod["spec"].isObject() && pod["spec"]["hostname"].isString()
                                          ? pod["spec"]["hostname"].asString()
                                          : "",
                                      api::object_meta(pod).name);
    return h.empty() ? "pod" : h;
}

// The pod's hostPorts (CNI portmap): each container port that names one.
std::vector<HostPort> host_ports(const Json::Value &pod) {
    std::vector<HostPort> v;
    for (const char *list : {"initContainers", "containers"})
        for (const auto &c : api::items(api::field(pod["spec"], list)))
            for (const auto &port : api::items(api::field(c, "ports"))) {
                int64_t hp = port["hostPort"].isIntegral() ? port["hostPort"].asInt64() : 0;
                int64_t cp =
                    port["containerPort"].isIntegral() ? port["containerPort"].asInt64() : 0;
                if (hp <= 0 || hp > 65535 || cp <= 0 || cp > 65535) continue;
                HostPort h;
                h.host_port = static_cast<uint16_t>(hp);
                h.container_port = static_cast<uint16_t>(cp);
                std::string proto =
                    port["protocol"].isString() ? port["protocol"].asString() : "TCP";
                for (auto &ch : proto)
                    ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
                h.protocol = proto;
                if (port["hostIP"].isString()) h.host_ip = port["hostIP"].asString();
                v.push_back(h);
            }
    return v;
}

}  // namespace

void PodController::relist_if_idle() {
    if (watch_id_ != 0) return;
    watch_timer_.stop();
    watch_backoff_.reset();
    list_pods();
}

void PodController::list_pods() {
    if (!watching()) return;
    ctx_.kube->get(KubeClient::pods_on_node(rec_.node_name), guard([this](Result<Json::Value> r) {
                       // Sent before end_stop_all, answered after it: the node goes.
                       if (!watching()) return;
                       if (!r) {
                           uint64_t ms = watch_backoff_.next_ms(r.failure());
                           LOG_WARN("%s pod list failed: %s; retrying in %llu ms", prefix().c_str(),
                                    r.message().c_str(), static_cast<unsigned long long>(ms));
                           watch_timer_.start(ms, guard([this] { list_pods(); }));
                           return;
                       }
                       pods_rv_ = api::object_meta(*r).resource_version;
                       std::set<std::string> seen;
                       for (const auto &pod : api::items(api::field(*r, "items"))) {
                           seen.insert(api::object_meta(pod).uid);
                           sync_pod(pod);
                       }
                       std::vector<std::string> gone;
                       for (const auto &[uid, p] : pods_)
                           if (!seen.count(uid)) gone.push_back(uid);
                       for (const auto &uid : gone)
                           forget_pod(uid);
                       listed_ = true;
                       reconcile_adopted();
                       // A stop_all that began before the first list (the job
                       // ended while the agent was down) now also finishes the
                       // pods it did not know of.
                       if (stopping()) stop_step();
                       start_watch();
                   }));
}

void PodController::start_watch() {
    if (!watching()) return;
    std::string path = KubeClient::pods_on_node(rec_.node_name) +
                       "&watch=1&allowWatchBookmarks=true&resourceVersion=" + url_escape(pods_rv_);
    watch_id_ = ctx_.kube->watch(path, guard([this](const WatchEvent &e) { on_watch_event(e); }),
                                 guard([this](const Status &st) { on_watch_end(st); }));
}

void PodController::on_watch_event(const WatchEvent &e) {
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

void PodController::on_watch_end(const Status &st) {
    watch_id_ = 0;
    if (stopped_) return;
    if (st && !pods_rv_.empty()) {  // the server closed a healthy stream: resume
        start_watch();
        return;
    }
    if (!st && ctx_.obs && ctx_.obs->watch_restart) ctx_.obs->watch_restart("pods");
    uint64_t ms = st ? 0 : watch_backoff_.next_ms(st.failure());
    if (!st) LOG_WARN("%s pod watch ended: %s", prefix().c_str(), st.message().c_str());
    bool relist = pods_rv_.empty() || (!st && st.error() == Error::Gone);
    watch_timer_.start(ms, guard([this, relist] {
                           if (relist)
                               list_pods();
                           else
                               start_watch();
                       }));
}

std::optional<std::pair<std::string, std::string>> PodController::admission_refusal(
    const Json::Value &pod) const {
    std::string ns = api::object_meta(pod).ns;
    if (rec_.slot >= 0) {
        int64_t bound = bound_at(pod);
        if (bound >= 0 && bound < node_created_s_)
            return std::make_pair(
                std::string("PreviousJobPod"),
                "the pod was bound to " + rec_.node_name + " at " + rfc3339(bound) +
                    ", before job " + std::to_string(rec_.job.job_id) +
                    "'s Node of that name was created (" + rfc3339(node_created_s_) +
                    "): it was meant for an earlier job on this slot; create it again to run it "
                    "here");
    }
    auto allowed = effective_namespaces(rec_.job, ctx_.cfg->allowed_namespaces);
    if (!namespace_allowed(allowed, ns))
        return std::make_pair(std::string("NamespaceNotAllowed"),
                              namespace_refusal(allowed, ns, rec_.job.job_id));
    if (!ctx_.cfg->allow_daemonsets) {
        for (const auto &o : api::items(api::field(api::field(pod, "metadata"), "ownerReferences")))
            if (api::text(api::field(o, "kind")) == "DaemonSet" &&
                api::field(o, "controller").isBool() && api::field(o, "controller").asBool())
                return std::make_pair(
                    std::string("DaemonSetNotAllowed"),
                    "pods of DaemonSet " + ns + "/" + api::text(api::field(o, "name")) +
                        " do not run on the nodes Slurm jobs lend (they would run inside the job "
                        "of user " +
                        rec_.job.user +
                        "); keep the DaemonSet off them with a nodeAffinity on slurm-k8s/job-id "
                        "DoesNotExist, or ask the site to set allow_daemonsets");
    }
    return std::nullopt;
}

void PodController::sync_pod(const Json::Value &pod) {
    std::string uid = api::object_meta(pod).uid;
    if (uid.empty()) return;
    BoundPod &p = pods_[uid];
    if (p.seen_us == 0) {
        p.seen_us = ctx_.clock->now_us();
        // Attached before an agent restart: its address again.
        if (const PodAddress *a = ctx_.networks ? ctx_.networks->find(uid) : nullptr)
            p.pod_ip = a->ip;
    }
    // Keep the newest object: a PATCH reply may be newer than a watch event.
    p.api = pod;
    bool deleting = api::object_meta(pod).deleting;
    bool terminal = pod_is_terminal(pod);
    if (deleting) {
        if (p.in_runtime() && !terminal && !pod_is_terminal(p.rt_status)) {
            uint32_t grace = api::object_meta(pod).deletion_grace_s;
            kill_pod(uid, grace, "Killing");
        } else if (!p.in_flight.status_patch) {
            delete_pod(uid);
        }
        return;
    }
    if (!terminal && end_drain_at_ && !stopping() && end_drain_pod(uid)) return;
    if (terminal || p.state != PodState::Pending) return;
    if (stopping()) return;
    if (rec_.slot >= 0 && node_created_s_ < 0) return;  // set_node() looks again
    if (auto refusal = admission_refusal(pod)) return refuse(uid, refusal->first, refusal->second);
    if (!runtime_) {  // runs once the shim attaches
        if (shim_dead_) fail_shim_lost(uid);
        return;
    }
    run_pod(uid);
}

// A refused pod's owner (a ReplicaSet, a Job) makes the next one at once:
// refused at once too, that would be thousands of Failed pods a minute. The
// refusals of one owner (or of one bare pod's name) are spaced: the first at
// once, then 1 s, 2 s, 4 s ... up to 5 min apart; a pod waiting its turn
// stays Pending with its reason in an Event. An owner refused nothing for
// 10 min starts over.
namespace {
constexpr int64_t kRefusalFirstUs = 1000000, kRefusalMaxUs = 300 * 1000000LL,
                  kRefusalForgetUs = 600 * 1000000LL;

std::string refusal_key(const Json::Value &pod) {
    api::ObjectMeta md = api::object_meta(pod);
    for (const auto &o : api::items(api::field(api::field(pod, "metadata"), "ownerReferences")))
        if (api::field(o, "controller").isBool() && api::field(o, "controller").asBool())
            return md.ns + "/owner/" + api::text(api::field(o, "uid"));
    return md.ns + "/pod/" + md.name;
}
}  // namespace

void PodController::hand_to_runtime(const std::string &uid, const FetchedObjects &fetched,
                                    NodeFacts facts, proto::HostVolumes host) {
    BoundPod &e = pods_.at(uid);
    if (!e.pod_ip.empty()) facts.pod_ip = e.pod_ip;
    Result<proto::PodRun> run = resolve_pod(e.api, fetched, facts);
    if (!run) return start_failed(uid, run.failure(), StartStage::Config);
    run->host_volumes = std::move(host);
    if (const PodAddress *a = ctx_.networks ? ctx_.networks->find(uid) : nullptr) {
        run->net_ns = a->net_ns;
        run->uts_ns = a->uts_ns;
    }
    if (auto st = mount_memory_volumes(uid, e.api); !st) {
        if (st.error() == Error::Refused) return refuse_pod(uid, st.message());
        return start_failed(uid, st, StartStage::Mount);
    }
    if (e.start_retry.failures)
        LOG_INFO("%s starts after %u failed attempts", pod_ref(e.api).c_str(),
                 e.start_retry.failures);
    e.start_retry = {};
    std::vector<std::string> no_auth;
    (void)pull_auth(e.api, fetched, &no_auth);
    if (!no_auth.empty())  // the kubelet's warning; the pull may still work
        post_event(e.api, {"Warning", "FailedToRetrieveImagePullSecret",
                           "Unable to retrieve some image pull secrets (" + join(no_auth, ", ") +
                               "); attempting to pull the image may not succeed.",
                           ""});
    e.state = PodState::Running;
    volumes_.started(uid, e.api, run->files, fetched);
    LOG_INFO("%s handing to the runtime", pod_ref(e.api).c_str());
    runtime_->run(*run, guard([this, uid](const Status &st) {
        if (st) return;
        auto it2 = pods_.find(uid);
        if (it2 == pods_.end()) return;
        BoundPod &q = it2->second;
        LOG_WARN("%s refused by the runtime: %s", pod_ref(q.api).c_str(), st.message().c_str());
        if (st.error() == Error::Unavailable) {  // the shim went away: retry
                                                 // on attach
            if (q.in_runtime()) q.state = PodState::Pending;
            return;
        }
        if (q.rt_status.isNull() || !pod_is_terminal(q.rt_status)) {
            q.rt_status =
                refused_pod_status(q.api, st.error() == Error::TooLarge ? "PodTooLarge" : "Refused",
                                   st.message(), ctx_.cfg->node_address, ctx_.clock->now_s());
            push_status(uid);
        }
    }));
}

void PodController::refuse(const std::string &uid, const std::string &reason,
                           const std::string &msg) {
    BoundPod &p = pods_[uid];
    int64_t now = ctx_.clock->now_us();
    if (refusals_.size() > 256)  // owners refused nothing for long are forgotten
        for (auto it = refusals_.begin(); it != refusals_.end();)
            it = now - it->second.last_us > kRefusalForgetUs ? refusals_.erase(it) : std::next(it);
    auto &r = refusals_[refusal_key(p.api)];
    if (r.last_us && now - r.last_us > kRefusalForgetUs) r = {};
    if (r.next_us > now) {
        // Not yet: held Pending until the owner's turn, said once.
        if (p.refuse_at_us == 0) {
            LOG_VERBOSE("%s refusal held for %lld ms (its owner was refused %u times)",
                        pod_ref(p.api).c_str(), static_cast<long long>((r.next_us - now) / 1000),
                        r.count);
            post_event(p.api, {"Warning", reason, msg, ""});
        }
        p.refuse_at_us = r.next_us;
        arm_refusal_timer();
        return;
    }
    r.count++;
    r.last_us = now;
    int64_t gap = kRefusalFirstUs;
    for (unsigned i = 1; i < r.count && gap < kRefusalMaxUs; i++)
        gap *= 2;
    r.next_us = now + std::min(gap, kRefusalMaxUs);
    p.refuse_at_us = 0;
    p.state = PodState::Refused;
    LOG_WARN("%s refused: %s", pod_ref(p.api).c_str(), msg.c_str());
    p.rt_status =
        refused_pod_status(p.api, reason, msg, ctx_.cfg->node_address, ctx_.clock->now_s());
    post_event(p.api, {"Warning", reason, msg, ""});
    push_status(uid);
}

void PodController::arm_pending_timer(ControllerTimer &timer, int64_t &(*at)(BoundPod &),
                                      void (PodController::*due)(const std::string &),
                                      void (PodController::*rearm)()) {
    int64_t next = 0;
    for (auto &[uid, p] : pods_)
        if (at(p) && p.state == PodState::Pending) next = next ? std::min(next, at(p)) : at(p);
    if (!next || stopped_) return timer.stop();
    int64_t wait_us = std::max<int64_t>(0, next - ctx_.clock->now_us());
    timer.start(static_cast<uint64_t>(wait_us + 999) / 1000, guard([this, at, due, rearm] {
                    int64_t now = ctx_.clock->now_us();
                    std::vector<std::string> ready;
                    for (auto &[uid, p] : pods_)
                        if (at(p) && at(p) <= now) {
                            at(p) = 0;
                            if (p.state == PodState::Pending) ready.push_back(uid);
                        }
                    for (const auto &uid : ready)
                        if (pods_.count(uid)) (this->*due)(uid);
                    (this->*rearm)();
                }));
}

void PodController::arm_refusal_timer() {
    arm_pending_timer(
        refusal_timer_, [](BoundPod &p) -> int64_t & { return p.refuse_at_us; },
        &PodController::refusal_due, &PodController::arm_refusal_timer);
}

// As a change of the pod: deleted, ended or no longer refused (the job's
// namespaces) meanwhile is sync_pod's to see.
void PodController::refusal_due(const std::string &uid) {
    sync_pod(Json::Value(pods_.at(uid).api));
}

void PodController::run_pod(const std::string &uid) {
    BoundPod &p = pods_[uid];
    Json::Value pod = p.api;
    std::string ns = api::object_meta(pod).ns;
    auto refs = referenced_objects(pod);
    auto claims = claim_refs(pod);
    refs.insert(claims.begin(), claims.end());
    auto tokens = token_requests(pod);
    auto fetched = std::make_shared<FetchedObjects>();
    auto remaining = std::make_shared<size_t>(refs.size() + tokens.size());
    auto error = std::make_shared<Status>();
    auto token_error = std::make_shared<Status>();
    p.state = PodState::Resolving;
    p.start_retry.at_us = 0;
    auto finish = guard([this, uid, fetched, error, token_error] {
        auto it = pods_.find(uid);
        if (it == pods_.end()) return;
        BoundPod &e = it->second;
        // A runtime that reported the pod meanwhile holds it already; a shim
        // that died meanwhile made it ShimLost.
        if (e.state != PodState::Resolving) return;
        e.state = PodState::Pending;
        if (!runtime_ || stopping()) return;
        NodeFacts facts{rec_.node_name, ctx_.cfg->node_address,
                        rec_.job.cpus ? rec_.job.cpus : ctx_.host.host_cpus,
                        rec_.job.memory_mib ? rec_.job.memory_mib : ctx_.host.host_memory_mib};
        if (auto api = api_endpoint(ctx_.cfg->api.server)) {
            facts.api_host = api->first;
            facts.api_port = api->second;
        }
        if (!*token_error) return start_failed(uid, *token_error, StartStage::Mount);
        if (!*error) return start_failed(uid, *error, StartStage::Config);
        // hostPath and claim volumes: refused for good when this node may
        // not mount them, waited for while a claim is not bound.
        auto host =
            resolve_host_volumes(e.api, *fetched, ctx_.cfg->volume_roots, node_nfs_mounts());
        if (!host && host.error() == Error::Refused) return refuse_pod(uid, host.message());
        if (!host) return start_failed(uid, host.failure(), StartStage::Mount);
        // Its own network first (the address is in its env and status).
        if (ctx_.networks && !host_network(e.api)) {
            e.state = PodState::Resolving;
            return attach_network(
                uid, guard([this, uid, fetched, facts, host = *host] {
                    auto again = pods_.find(uid);
                    if (again == pods_.end() || again->second.state != PodState::Resolving) return;
                    again->second.state = PodState::Pending;
                    if (!runtime_ || stopping()) return;
                    hand_to_runtime(uid, *fetched, facts, host);
                }));
        }
        hand_to_runtime(uid, *fetched, facts, std::move(*host));
    });
    // A claim's PersistentVolume, once the claim says which: a second read.
    auto then_volumes = guard([this, uid, fetched, error, finish] {
        auto it = pods_.find(uid);
        if (it == pods_.end() || !*error) return finish();
        std::set<ObjectRef> pvs;
        for (const auto &ref : bound_volume_refs(it->second.api, *fetched))
            if (!fetched->count(ref)) pvs.insert(ref);
        if (pvs.empty()) return finish();
        auto left = std::make_shared<size_t>(pvs.size());
        volumes_.get_objects("", pvs, fetched, left, error, finish);
    });
    std::function<void()> reads_done =
        claims.empty() ? std::function<void()>(finish) : then_volumes;
    if (refs.empty() && tokens.empty()) return finish();
    // A projected volume's token, as the kubelet gets it: a TokenRequest
    // bound to the pod. Refused (the ServiceAccount missing, no right): the
    // pod does not start, and the message says why.
    if (!tokens.empty())
        volumes_.request_tokens(pod, tokens, fetched, token_error,
                                [remaining, reads_done, n = tokens.size()] {
                                    *remaining -= n;
                                    if (*remaining == 0) reads_done();
                                });
    volumes_.get_objects(ns, refs, fetched, remaining, error, reads_done);
}

Status PodController::mount_memory_volumes(const std::string &uid, const Json::Value &pod) {
    if (!ctx_.mounts) return {};
    uint64_t mib = rec_.job.memory_mib ? rec_.job.memory_mib : ctx_.host.host_memory_mib;
    auto vols = memory_volumes(pod, mib << 20);
    if (!vols) return vols.failure();
    for (const auto &m : *vols) {
        MemoryVolume v{shim_state_dir_for(*ctx_.cfg, rec_.job.job_id, rec_.job.slurm_node),
                       job_tag_for(rec_.job.job_id, rec_.job.slurm_node),
                       uid,
                       m.volume,
                       m.bytes,
                       rec_.job.uid,
                       rec_.job.gid};
        if (auto st = ctx_.mounts->mount_memory(v); !st)
            return fail(st.error() == Error::Refused ? Error::Refused : Error::Io,
                        "volume " + m.volume + " (emptyDir, medium Memory): " + st.message());
    }
    return {};
}

void PodController::attach_network(const std::string &uid, const std::function<void()> &then) {
    BoundPod &p = pods_.at(uid);
    if (const PodAddress *a = ctx_.networks->find(uid)) {
        p.pod_ip = a->ip;
        return then();
    }
    p.network_released = false;
    proto::PodSandbox m{uid, pod_hostname(p.api), {}};
    for (const char *list : {"initContainers", "containers"})
        for (const auto &c : api::items(api::field(p.api["spec"], list)))
            if (c["image"].isString()) m.images.push_back(c["image"].asString());
    runtime_->sandbox(
        m, guard([this, uid, then](Result<proto::PodSandboxReply> reply) {
            auto it = pods_.find(uid);
            if (it == pods_.end() || it->second.state != PodState::Resolving) return;
            if (!reply) {
                it->second.state = PodState::Pending;
                return start_failed(uid, reply.failure(), StartStage::Sandbox);
            }
            if (!reply->node_network.empty()) {
                // The runtime keeps it on the node's network
                // (its image containers): said as an Event.
                it->second.network_released = true;
                post_event(it->second.api,
                           {"Normal", "NodeNetwork",
                            "The pod shares the node's network: " + reply->node_network, ""});
                return then();
            }
            PodNetworkRequest r;
            r.pod_uid = uid;
            r.pod_name = pod_ref(it->second.api);
            r.sandbox_pid = reply->pid;
            r.uid = rec_.job.uid;
            r.job_tag = job_tag_for(rec_.job.job_id, rec_.job.slurm_node);
            r.host_ports = host_ports(it->second.api);
            ctx_.networks->attach(r, guard([this, uid, then](Result<PodAddress> a) {
                                      auto it2 = pods_.find(uid);
                                      if (it2 == pods_.end()) {  // gone meanwhile
                                          ctx_.networks->detach(uid, {});
                                          return;
                                      }
                                      if (it2->second.state != PodState::Resolving) return;
                                      if (!a) {
                                          it2->second.state = PodState::Pending;
                                          return start_failed(uid, a.failure(),
                                                              StartStage::Sandbox);
                                      }
                                      it2->second.pod_ip = a->ip;
                                      then();
                                  }));
        }));
}

void PodController::detach_network(const std::string &uid) {
    auto it = pods_.find(uid);
    if (!ctx_.networks || it == pods_.end() || it->second.network_released) return;
    it->second.network_released = true;
    ctx_.networks->detach(uid, {});
}

void PodController::release_memory_volumes(BoundPod &p, const std::string &uid) {
    if (!ctx_.mounts || p.memory_released) return;
    auto vols = memory_volumes(p.api, 1);
    if (!vols || vols->empty()) return;
    p.memory_released = true;
    ctx_.mounts->unmount(job_tag_for(rec_.job.job_id, rec_.job.slurm_node), uid);
}

std::vector<NfsMount> PodController::node_nfs_mounts() const {
    // The agent's own view of the node's mounts (bounded: a node with
    // thousands of mounts has a mountinfo of a few MiB).
    auto text = read_file("/proc/self/mountinfo", size_t{16} << 20);
    if (!text) {
        LOG_WARN(
            "cannot read /proc/self/mountinfo (%s): nfs PersistentVolumes cannot be "
            "found on this node",
            text.message().c_str());
        return {};
    }
    return nfs_mounts(*text);
}

void PodController::refuse_pod(const std::string &uid, const std::string &why) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    BoundPod &q = it->second;
    LOG_WARN("%s refused: %s", pod_ref(q.api).c_str(), why.c_str());
    q.state = PodState::Running;
    q.start_retry = {};
    detach_network(uid);
    if (q.rt_status.isNull() || !pod_is_terminal(q.rt_status)) {
        q.rt_status =
            refused_pod_status(q.api, "Refused", why, ctx_.cfg->node_address, ctx_.clock->now_s());
        push_status(uid);
    }
}

namespace {
// A start refused for a reason that may pass by itself (a 403 while the
// Node authorizer catches up with a binding, an API server briefly away)
// is reported once it lasted this long; a missing object or key at once,
// as a kubelet does.
constexpr int64_t kStartReportAfterUs = int64_t{5} * 1000000;
// The start's retries: 200 ms doubling up to 10 s, a kubelet's pod sync
// back-off on error being 10 s.
constexpr uint64_t kStartRetryFirstMs = 200, kStartRetryMaxMs = 10000;

bool may_pass(Error e) {
    return e == Error::Forbidden || e == Error::Unauthorized || e == Error::Transient ||
           e == Error::Timeout || e == Error::Unavailable || e == Error::Io;
}
}  // namespace

std::string PodController::start_failure_hint(const Status &st, const std::string &ns,
                                              bool token) const {
    if (st.error() != Error::Forbidden) return "";
    if (ctx_.kube->acts_as_node())
        return "; the API server refused the node's own identity system:node:" + rec_.node_name +
               ": its Node authorizer lets a node read only what the pods bound to it use, and "
               "learns of a binding a moment after it, so the read is retried; if it goes on, the "
               "API server does not run the Node authorizer and NodeRestriction "
               "(--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction: "
               "docs/admin-guide.md, node identities)";
    if (!token) return "";  // the API's answer names etc/rbac.yaml already
    return "; bind the ClusterRole slurm-k8s-agent-tokens to the agent's identity in namespace " +
           ns + " (docs/admin-guide.md)";
}

void PodController::start_failed(const std::string &uid, const Status &st, StartStage stage) {
    const bool config_error = stage == StartStage::Config;
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    BoundPod &p = it->second;
    auto &r = p.start_retry;
    int64_t now = ctx_.clock->now_us();
    if (r.failures++ == 0) r.first_us = now;
    // The attempt's back-off from the count of failures: the same delays
    // a Backoff gives, held in the pod's record.
    Backoff b(kStartRetryFirstMs, kStartRetryMaxMs);
    uint64_t ms = 0;
    for (unsigned i = 1; i < r.failures; i++)
        (void)b.next_ms();
    ms = b.next_ms(st.failure());  // and the server's Retry-After
    r.at_us = now + static_cast<int64_t>(ms) * 1000;
    std::string msg =
        st.message() + start_failure_hint(st, api::object_meta(p.api).ns, !config_error);
    bool report = !may_pass(st.error()) || now - r.first_us >= kStartReportAfterUs;
    if (!report) {
        LOG_VERBOSE("%s cannot start yet (attempt %u, again in %llu ms): %s",
                    pod_ref(p.api).c_str(), r.failures, static_cast<unsigned long long>(ms),
                    msg.c_str());
    } else if (r.reported != msg) {
        LOG_WARN("%s cannot start (attempt %u, again in %llu ms): %s", pod_ref(p.api).c_str(),
                 r.failures, static_cast<unsigned long long>(ms), msg.c_str());
        r.reported = msg;
        // A kubelet's words: CreateContainerConfigError (its status change
        // posts the Failed event, status_events) or a volume it could not
        // set up (FailedMount).
        if (stage == StartStage::Sandbox)
            post_event(p.api, {"Warning", "FailedCreatePodSandBox",
                               "Failed to create pod sandbox: " + msg, ""});
        else if (!config_error)
            post_event(p.api, {"Warning", "FailedMount", "MountVolume.SetUp failed: " + msg, ""});
        p.rt_status = start_blocked_status(
            p.api, config_error ? "CreateContainerConfigError" : "ContainerCreating", msg,
            ctx_.clock->now_s());
        push_status(uid);
    }
    arm_start_timer();
}

void PodController::arm_start_timer() {
    arm_pending_timer(
        start_timer_, [](BoundPod &p) -> int64_t & { return p.start_retry.at_us; },
        &PodController::start_due, &PodController::arm_start_timer);
}

// As sync_pod would: not while the job ends, not without a runtime
// (set_runtime runs it).
void PodController::start_due(const std::string &uid) {
    const BoundPod &p = pods_.at(uid);
    if (stopping() || !runtime_ || api::object_meta(p.api).deleting || pod_is_terminal(p.api))
        return;
    if (end_drain_at_ && end_drain_pod(uid)) return;
    run_pod(uid);
}

// The kubelet's rule (token manager): a token is requested again once 80 %
// of its lifetime has passed, the lifetime being what the API server
// reported (status.expirationTimestamp; kube-apiserver reports the 3607 s
// the admission asks for even when it extends the token to a year).
bool PodController::runs(const std::string &uid) const {
    auto it = pods_.find(uid);
    return it != pods_.end() && it->second.state == PodState::Running &&
           !pod_is_terminal(it->second.rt_status);
}

void PodController::update_files(const proto::PodFilesUpdate &m,
                                 std::function<void(const Status &)> done) {
    if (!runtime_) return done(fail(Error::Unavailable, "no runtime attached"));
    runtime_->update_files(m, std::move(done));
}

void PodController::kill_pod(const std::string &uid, uint32_t grace_s, const std::string &reason) {
    BoundPod &p = pods_[uid];
    if (p.state == PodState::Killing || !runtime_) return;
    p.state = PodState::Killing;
    for (const auto &c : api::items(api::field(api::field(p.api, "spec"), "containers"))) {
        std::string name = api::text(api::field(c, "name"));
        post_event(p.api, {"Normal", "Killing", "Stopping container " + name,
                           "spec.containers{" + name + "}"});
    }
    LOG_INFO("%s stopping (grace %us, %s)", pod_ref(p.api).c_str(), grace_s, reason.c_str());
    auto done = guard([this, uid](const Status &st) {
        if (st) return;
        auto it = pods_.find(uid);
        if (it == pods_.end()) return;
        LOG_WARN("%s kill failed: %s", pod_ref(it->second.api).c_str(), st.message().c_str());
        if (it->second.state == PodState::Killing) it->second.state = PodState::Running;
    });
    auto why = stop_reason_of(reason, "pod_kill");
    if (!why) return done(why.failure());
    runtime_->kill(uid, grace_s, *why, done);
}

void PodController::drain_before_end(int64_t end_time) {
    end_drain_at_ = end_time;
    if (!end_time || stopping()) return;
    std::vector<std::string> uids;
    for (const auto &[uid, p] : pods_)
        uids.push_back(uid);
    for (const auto &uid : uids)
        end_drain_pod(uid);
}

bool PodController::end_drain_pod(const std::string &uid) {
    BoundPod &p = pods_[uid];
    if (pod_is_terminal(p.api) || pod_is_terminal(p.rt_status)) return false;
    if (api::object_meta(p.api).deleting) return false;  // its own delete stops it
    if (p.in_runtime()) {
        if (p.end_drained || p.state == PodState::Killing || !runtime_) return p.end_drained;
        const Json::Value &g =
            api::field(api::field(p.api, "spec"), "terminationGracePeriodSeconds");
        int64_t grace = g.isIntegral() && g.asInt64() >= 0 ? g.asInt64() : 30;
        int64_t left = std::max<int64_t>(0, end_drain_at_ - ctx_.clock->now_s());
        p.end_drained = true;
        kill_pod(uid, static_cast<uint32_t>(std::min(grace, left)), "Killing");
        return true;
    }
    if (p.state != PodState::Pending && p.state != PodState::Resolving) return false;
    // As a kubelet refuses pods while its node shuts down.
    p.state = PodState::Refused;
    std::string msg = "Pod was rejected as the node is shutting down: the Slurm job " +
                      std::to_string(rec_.job.job_id) + " lending it ends at " +
                      rfc3339(end_drain_at_);
    LOG_WARN("%s refused: %s", pod_ref(p.api).c_str(), msg.c_str());
    p.rt_status =
        refused_pod_status(p.api, "NodeShutdown", msg, ctx_.cfg->node_address, ctx_.clock->now_s());
    post_event(p.api, {"Warning", "NodeShutdown", msg, ""});
    push_status(uid);
    return true;
}

void PodController::delete_pod(const std::string &uid) {
    BoundPod &p = pods_[uid];
    if (p.in_flight.del) return;
    p.in_flight.del = true;
    // Counted whatever the phase: a DELETE sent before stop_all may be
    // answered during it, and the drain waits for every one in flight.
    deletes_in_flight_++;
    Json::Value body(Json::objectValue);
    body["gracePeriodSeconds"] = 0;
    body["preconditions"]["uid"] = uid;
    std::string ref = pod_ref(p.api);
    ctx_.kube->del(KubeClient::pod(api::object_meta(p.api).ns, api::object_meta(p.api).name), body,
                   guard([this, uid, ref](const Result<Json::Value> &r) {
                       deletes_in_flight_--;
                       bool gone =
                           r || r.error() == Error::NotFound || r.error() == Error::Conflict;
                       if (gone) {
                           LOG_INFO("%s deleted", ref.c_str());
                           unindex_logs(uid);
                       } else {
                           LOG_WARN("%s delete failed: %s", ref.c_str(), r.message().c_str());
                           auto it = pods_.find(uid);
                           if (it != pods_.end() && !stopping())
                               it->second.in_flight.del = false;  // next event retries
                           if (it != pods_.end() && stopping()) {
                               // The drain retries it after a pause, not in a tight loop
                               // against an unreachable API server.
                               ctx_.timers->defer(guard([this, uid] {
                                                      auto it2 = pods_.find(uid);
                                                      if (it2 == pods_.end()) return;
                                                      it2->second.in_flight.del = false;
                                                      stop_step();
                                                  }),
                                                  1000);
                           }
                       }
                       if (stopping()) {
                           if (gone) pods_.erase(uid);
                           stop_step();
                       }
                   }));
}

void PodController::forget_pod(const std::string &uid) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    unindex_logs(uid);
    // Deleted from the API: stop it if it may still run (force delete), and
    // in any case let the runtime forget it: on the kill reason "Deleted" the
    // shim frees the pod and removes its directory (docs/protocol.md). A
    // ShimLost pod is held by the shim that attached after the dead one, if
    // any; a shim answers a kill of a pod it does not hold with success.
    const BoundPod &p = it->second;
    if ((p.in_runtime() || p.state == PodState::ShimLost) && runtime_)
        runtime_->kill(uid, 0, proto::StopReason::Deleted, [](const Status &) {});
    release_memory_volumes(it->second, uid);
    detach_network(uid);
    pods_.erase(it);
    volumes_.forget(uid);
    if (stopping()) stop_step();
}

void PodController::on_runtime_status(const PodSnapshot &snap) {
    auto it = pods_.find(snap.uid);
    if (it == pods_.end()) {
        if (!listed_) {
            adopted_[snap.uid] = snap;
            return;
        }
        LOG_INFO("[pod %s/%s] runs but is not bound to %s: stopping it", snap.ns.c_str(),
                 snap.name.c_str(), rec_.node_name.c_str());
        if (runtime_)
            runtime_->kill(snap.uid, 0, proto::StopReason::Orphaned, [](const Status &) {});
        return;
    }
    BoundPod &p = it->second;
    // A later shim reports the pods of the dead one as failed too: the
    // agent's ShimLost status stays the final word.
    if (p.state == PodState::ShimLost && pod_is_terminal(snap.status)) return;
    if (p.state == PodState::Pending || p.state == PodState::Resolving) {
        p.state = PodState::Running;  // the runtime holds it (adopted after a restart)
        // Its tokens' lifetimes were not kept: renewed now, as a kubelet
        // that restarts does.
        if (!pod_is_terminal(snap.status)) volumes_.adopted(snap.uid, p.api);
    }
    p.rt_status = snap.status;
    p.rt_events = p.rt_events || snap.reports_events;
    if (pod_is_terminal(snap.status)) {
        release_memory_volumes(p, snap.uid);
        detach_network(snap.uid);
    }
    if (!p.running_seen && api::text(api::field(snap.status, "phase")) == "Running") {
        p.running_seen = true;
        if (ctx_.obs && ctx_.obs->pod_running && p.seen_us)
            ctx_.obs->pod_running(static_cast<double>(ctx_.clock->now_us() - p.seen_us) / 1e6);
    }
    index_logs(snap);
    post_runtime_events(p.api, snap.events);
    if (stopping() && pod_is_terminal(snap.status))
        p.rt_status = job_end_status(snap.status, stop_->reason, rec_.job.job_id);
    else if (p.end_drained && pod_is_terminal(snap.status))
        p.rt_status =
            end_drain_status(snap.status, rec_.job.job_id, end_drain_at_, ctx_.clock->now_s());
    else if (end_drain_at_ && !stopping() && !pod_is_terminal(snap.status))
        end_drain_pod(snap.uid);  // adopted after an agent restart
    push_status(snap.uid);
}

void PodController::push_status(const std::string &uid) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    BoundPod &p = it->second;
    if (p.in_flight.status_patch) {
        p.in_flight.patch_again = true;
        return;
    }
    Json::Value desired = desired_pod_status(p.rt_status, p.api, ctx_.cfg->node_address, p.pod_ip);
    Json::Value patch = pod_status_patch(p.api, desired);
    auto after = [this, uid](BoundPod &e) {
        bool deleting = api::object_meta(e.api).deleting;
        if ((deleting || stopping()) && pod_is_terminal(e.rt_status)) delete_pod(uid);
        if (stopping()) stop_step();
    };
    if (patch.isNull()) return after(p);  // no change: nothing to write
    Json::Value old_status = p.api["status"];
    p.in_flight.status_patch = true;
    const api::ObjectMeta md = api::object_meta(p.api);
    ctx_.kube->patch(
        KubeClient::pod(md.ns, md.name) + "/status", patch, kStrategicMerge,
        guard([this, uid, old_status, after](Result<Json::Value> r) {
            auto it2 = pods_.find(uid);
            if (it2 == pods_.end()) return;
            BoundPod &e = it2->second;
            e.in_flight.status_patch = false;
            if (r) {
                const Json::Value &ns = api::field(*r, "status");
                for (const auto &ev : status_events(*r, old_status, ns, !e.rt_events))
                    post_event(*r, ev);
                if (!e.start_reported && api::text(api::field(ns, "phase")) == "Running") {
                    e.start_reported = true;
                    if (ctx_.obs && ctx_.obs->pod_started && e.seen_us)
                        ctx_.obs->pod_started(
                            static_cast<double>(ctx_.clock->now_us() - e.seen_us) / 1e6);
                }
                e.api = *r;
            } else if (r.error() == Error::NotFound) {
                forget_pod(uid);  // deleted meanwhile: the runtime forgets it too
                return;
            } else {
                LOG_WARN("%s status update failed: %s", pod_ref(e.api).c_str(),
                         r.message().c_str());
                // Retried below after a pause, with the newest status then.
                e.in_flight.patch_again = true;
            }
            if (e.in_flight.patch_again) {
                e.in_flight.patch_again = false;
                if (!r) {
                    // Back off a little before retrying the same write.
                    ctx_.timers->defer(guard([this, uid] { push_status(uid); }), 1000);
                    return;
                }
                push_status(uid);
                return;
            }
            after(e);
        }));
}

void PodController::post_event(const Json::Value &pod, const EventSpec &e) {
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
    auto forget = guard([ev, corr] { corr->forget(ev); });
    auto on_reply = [ev, forget](const Result<Json::Value> &r) {
        if (r) return;
        LOG_VERBOSE("event %s failed: %s", ev["reason"].asString().c_str(), r.message().c_str());
        forget();
    };
    if (a.create)
        ctx_.kube->post(KubeClient::events(ns), a.body, on_reply);
    else
        ctx_.kube->patch(KubeClient::events(a.ns) + "/" + a.name, a.body, kStrategicMerge,
                         on_reply);
}

void PodController::post_runtime_events(const Json::Value &pod,
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

void PodController::index_logs(const PodSnapshot &snap) {
    if (!ctx_.logs) return;
    auto it = pods_.find(snap.uid);
    if (it == pods_.end()) return;
    const api::ObjectMeta md = api::object_meta(it->second.api);
    ctx_.logs->update(md.ns, md.name, snap.uid,
                      shim_state_dir_for(*ctx_.cfg, rec_.job.job_id, rec_.job.slurm_node),
                      snap.status);
}

void PodController::unindex_logs(const std::string &uid) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    const api::ObjectMeta md = api::object_meta(it->second.api);
    if (ctx_.logs) ctx_.logs->remove(md.ns, md.name, uid);
    if (ctx_.events) ctx_.events->forget_object(uid);
}

void PodController::set_runtime(std::unique_ptr<PodRuntime> rt, int shim_pid) {
    runtime_ = std::move(rt);
    if (!runtime_) return;
    shim_timer_.stop();
    shim_dead_ = false;
    shim_pid_ = shim_pid;
    shim_start_ticks_ = shim_pid > 0 ? proc_start_ticks(shim_pid) : 0;
    runtime_->set_status_sink(guard([this](const PodSnapshot &snap) { on_runtime_status(snap); }));
    runtime_->set_lost_sink(guard([this] { on_runtime_lost(); }));
    runtime_->snapshot(guard([this](Result<std::vector<PodSnapshot>> r) {
        if (!r) {
            LOG_WARN("%s runtime snapshot failed: %s", prefix().c_str(), r.message().c_str());
        } else {
            for (const auto &snap : *r)
                adopted_[snap.uid] = snap;
            LOG_INFO("%s runtime attached with %zu pods", prefix().c_str(), r->size());
        }
        if (listed_) reconcile_adopted();
    }));
}

void PodController::reconcile_adopted() {
    auto adopted = std::move(adopted_);
    adopted_.clear();
    for (const auto &[uid, snap] : adopted)
        on_runtime_status(snap);  // marks known ones as held; unknown ones are stopped there
    if (!runtime_) return;
    std::vector<Json::Value> todo;
    for (const auto &[uid, p] : pods_)
        if (!p.in_runtime() && p.state != PodState::Resolving) todo.push_back(p.api);
    for (const auto &pod : todo)
        sync_pod(pod);
}

void PodController::on_runtime_lost() {
    LOG_WARN("%s the job's shim went away; pods wait for it to re-attach", prefix().c_str());
    // Destroying the runtime from inside its own callback is not allowed: defer.
    ctx_.timers->defer(guard([this] {
        runtime_.reset();
        for (auto &[uid, p] : pods_)
            if (p.in_runtime()) p.state = PodState::Pending;
        if (stopping()) stop_step();
        watch_lost_shim();
    }));
}

// A live shim reconnects on its own (its first retry comes 500 ms after the
// connection dropped, k8s-shim/shim.cc); a dead one never will. So while no
// shim is attached the old one's pid is checked every 200 ms (pid + start
// time, a zombie counts as dead): death is acted on within 200 ms, a
// reconnect simply stops the check. With no pid (a fake runtime) the pods
// keep waiting, as before.
void PodController::watch_lost_shim() {
    if (stopped_ || runtime_ || shim_pid_ <= 0 || shim_start_ticks_ == 0) return;
    shim_timer_.start(0, guard([this] {
                          if (runtime_ || stopped_) return shim_timer_.stop();
                          if (!process_gone(shim_pid_, shim_start_ticks_)) return;
                          shim_timer_.stop();
                          on_shim_dead();
                      }),
                      200);
}

// The shim died: nothing stops or reports its pods any more. Their recorded
// containers are stopped whole (stop_recorded_processes, agent/controllers/lost_shim.h:
// every process of each, in the background), and each pod becomes
// Failed/ShimLost with a Warning event. The owner is told
// (set_on_shim_dead): the Node is NotReady until a new shim attaches (the
// job still holds its GPUs, and its extern step starts a new shim). A pod
// bound here meanwhile fails at once with ShimLost instead of sitting
// Pending with no explanation: that is what a user checking `kubectl get
// pods` can act on, and what a kubelet does with pods it cannot admit.
void PodController::on_shim_dead() {
    shim_dead_ = true;
    int n =
        stop_recorded_processes(shim_state_dir_for(*ctx_.cfg, rec_.job.job_id, rec_.job.slurm_node),
                                rec_.job.uid, rec_.job.gid);
    LOG_WARN(
        "%s the job's shim (pid %d) died without re-attaching: stopping its %d running "
        "containers; its pods are reported Failed (ShimLost)",
        prefix().c_str(), shim_pid_, n);
    if (stopping()) return stop_step();  // final statuses name the job's end
    if (on_shim_dead_) on_shim_dead_(shim_pid_);
    std::vector<std::string> uids;
    for (const auto &[uid, p] : pods_)
        if (!pod_is_terminal(p.api) && !pod_is_terminal(p.rt_status) &&
            p.state != PodState::Refused)
            uids.push_back(uid);
    for (const auto &uid : uids)
        fail_shim_lost(uid);
}

void PodController::fail_shim_lost(const std::string &uid) {
    BoundPod &p = pods_[uid];
    if (p.state == PodState::ShimLost) return;
    p.state = PodState::ShimLost;
    detach_network(uid);
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

void PodController::stop_all(uint32_t grace_s, const std::string &reason,
                             std::function<void()> done) {
    stop_ = StopAll{reason, std::move(done)};
    std::vector<std::string> uids;
    for (const auto &[uid, p] : pods_)
        uids.push_back(uid);
    for (const auto &uid : uids) {
        BoundPod &p = pods_[uid];
        if (p.in_runtime() && runtime_ && !pod_is_terminal(p.rt_status)) {
            stop_->asked++;
            kill_pod(uid, grace_s, reason);
        } else if (!p.in_runtime() && !pod_is_terminal(p.api)) {
            // Never ran here: final status Failed naming the job's end.
            Json::Value st(Json::objectValue);
            st["phase"] = "Failed";
            p.rt_status = job_end_status(st, reason, rec_.job.job_id);
            push_status(uid);
        }
    }
    stop_step();
}

bool PodController::all_stopped() const {
    // Not before the first pod list: pods nobody knew of yet would be left
    // behind (the drain's timer still bounds the wait when the API is down).
    return listed_ && deletes_in_flight_ == 0 && pods_.empty();
}

void PodController::stop_step() {
    if (!stop_ || stop_->ended) return;
    // Pods that reached a terminal status get deleted from push_status; the
    // node goes once nothing is running, patching or deleting any more.
    std::vector<std::string> todo;
    for (const auto &[uid, p] : pods_)
        if (!p.in_flight.del && !p.in_flight.status_patch &&
            (pod_is_terminal(p.rt_status) || !p.in_runtime() || !runtime_))
            todo.push_back(uid);
    for (const auto &uid : todo) {
        BoundPod &p = pods_[uid];
        if (!pod_is_terminal(p.rt_status)) {
            Json::Value st(Json::objectValue);
            st["phase"] = "Failed";
            p.rt_status = job_end_status(p.rt_status.isObject() ? p.rt_status : st, stop_->reason,
                                         rec_.job.job_id);
        }
        Json::Value desired =
            desired_pod_status(p.rt_status, p.api, ctx_.cfg->node_address, p.pod_ip);
        if (!pod_status_patch(p.api, desired).isNull())
            push_status(uid);
        else
            delete_pod(uid);
    }
    if (!all_stopped()) return;
    auto done = std::exchange(stop_->done, nullptr);
    if (done) done();
}

void PodController::end_stop_all() {
    if (stop_) stop_->ended = true;
    if (watch_id_) ctx_.kube->cancel(watch_id_);
    watch_id_ = 0;
    watch_timer_.stop();
}

std::vector<PodController::PodName> PodController::remaining() const {
    std::vector<PodName> out;
    for (const auto &[uid, p] : pods_) {
        const Json::Value &md = p.api["metadata"];
        if (md["name"].asString().empty()) continue;
        out.push_back({uid, md["namespace"].asString(), md["name"].asString()});
    }
    return out;
}

void PodController::images_in_use(std::set<std::string> *out) const {
    for (const auto &[uid, p] : pods_) {
        if (p.state == PodState::Refused || p.state == PodState::ShimLost) continue;
        const Json::Value &spec = p.api["spec"];
        for (const char *list : {"initContainers", "containers"})
            for (const auto &c : spec[list])
                if (c["image"].isString())
                    out->insert(image_store_name(normalize_image(c["image"].asString())));
    }
}

bool PodController::networks_in_use(std::set<std::string> *out) const {
    if (!listed_) return false;
    for (const auto &[uid, p] : pods_)
        if (!p.network_released) out->insert(uid);
    for (const auto &[uid, snap] : adopted_)
        out->insert(uid);
    return true;
}

uint32_t PodController::unfinished() const {
    uint32_t n = 0;
    for (const auto &[uid, p] : pods_)
        if (!pod_is_terminal(p.api)) n++;
    return n;
}

void PodController::count_phases(std::map<std::string, int64_t> *by_phase) const {
    for (const auto &[uid, p] : pods_) {
        std::string ph = api::text(api::field(api::field(p.api, "status"), "phase"));
        (*by_phase)[ph.empty() ? "Pending" : ph]++;
    }
}

const Json::Value *PodController::runtime_pod(const std::string &uid) const {
    auto it = pods_.find(uid);
    return it != pods_.end() && it->second.in_runtime() ? &it->second.api : nullptr;
}

const Json::Value *PodController::running_pod(const std::string &ns,
                                              const std::string &name) const {
    for (const auto &[uid, p] : pods_) {
        const Json::Value &md = p.api["metadata"];
        if (p.in_runtime() && md["namespace"].asString() == ns && md["name"].asString() == name)
            return &p.api;
    }
    return nullptr;
}

}  // namespace sk::agent
