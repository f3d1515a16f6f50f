#include "agent/controllers/pod_volumes.h"

#include <algorithm>
#include <utility>

#include "agent/controllers/host_volumes.h"
#include "agent/controllers/pod_status_patch.h"
#include "agent/kube/api_object.h"
#include "common/log.h"
#include "common/rfc3339.h"
#include "common/strings.h"

namespace sk::agent {
namespace {

constexpr int64_t kTokenRetryS = 10;

std::string pod_ref(const Json::Value &pod) {
    api::ObjectMeta m = api::object_meta(pod);
    return "[pod " + m.ns + "/" + m.name + "]";
}

}  // namespace

PodVolumes::PodVolumes(AgentContext &ctx, Pods &pods)
    : ctx_(ctx), pods_(pods), token_timer_(*ctx.timers), files_timer_(*ctx.timers) {}

void PodVolumes::start() {
    stopped_ = false;
    if (uint64_t ms = ctx_.cfg->volume_refresh_s * 1000)
        files_timer_.start(ms, guard([this] { refresh_all_files(); }), ms);
}

void PodVolumes::stop() {
    stopped_ = true;
    token_timer_.stop();
    files_timer_.stop();
}

void PodVolumes::started(const std::string &uid, const Json::Value &pod,
                         const proto::PodFiles &files, const FetchedObjects &fetched) {
    Volumes &v = volumes_[uid];
    v.pod = pod;
    v.files = files;
    note_tokens(v, fetched);
}

void PodVolumes::adopted(const std::string &uid, const Json::Value &pod) {
    if (token_requests(pod).empty()) return;
    Volumes &v = volumes_[uid];
    v.pod = pod;
    v.token_refresh_at_s = ctx_.clock->now_s();
    arm_token_timer();
}

void PodVolumes::forget(const std::string &uid) {
    volumes_.erase(uid);
}

void PodVolumes::note_tokens(Volumes &v, const FetchedObjects &fetched) {
    int64_t now = ctx_.clock->now_s(), at = 0;
    for (const auto &need : token_requests(v.pod)) {
        auto it = fetched.find(need.ref);
        if (it == fetched.end()) continue;
        int64_t exp = parse_rfc3339(
            api::text(api::field(api::field(it->second, "status"), "expirationTimestamp")));
        int64_t life = exp > now ? exp - now : need.expiration_s;
        int64_t t = now + std::max<int64_t>(1, life * 8 / 10);
        at = at ? std::min(at, t) : t;
    }
    v.token_refresh_at_s = at;
    if (at) arm_token_timer();
}

void PodVolumes::arm_token_timer() {
    int64_t next = 0;
    for (const auto &[uid, v] : volumes_)
        if (v.token_refresh_at_s && pods_.runs(uid))
            next = next ? std::min(next, v.token_refresh_at_s) : v.token_refresh_at_s;
    if (!next || stopped_) return token_timer_.stop();
    int64_t wait_s = std::max<int64_t>(0, next - ctx_.clock->now_s());
    token_timer_.start(
        static_cast<uint64_t>(wait_s) * 1000, guard([this] {
            int64_t now = ctx_.clock->now_s();
            std::vector<std::string> due;
            for (const auto &[uid, v] : volumes_)
                if (v.token_refresh_at_s && v.token_refresh_at_s <= now && pods_.runs(uid))
                    due.push_back(uid);
            for (const auto &uid : due)
                refresh_tokens(uid);
            arm_token_timer();
        }));
}

void PodVolumes::refresh_tokens(const std::string &uid) {
    Volumes &v = volumes_[uid];
    v.token_refresh_at_s = 0;  // under way
    auto needs = token_requests(v.pod);
    auto fetched = std::make_shared<FetchedObjects>();
    auto error = std::make_shared<Status>();
    auto finish = guard([this, uid, fetched, error] {
        auto it = volumes_.find(uid);
        if (it == volumes_.end() || !pods_.runs(uid) || !pods_.has_runtime()) return;
        auto retry = [this, uid](const std::string &why) {
            auto i = volumes_.find(uid);
            if (i == volumes_.end()) return;
            LOG_WARN("%s: its ServiceAccount token was not renewed (%s); again in %llds",
                     pod_ref(i->second.pod).c_str(), why.c_str(),
                     static_cast<long long>(kTokenRetryS));
            i->second.token_refresh_at_s = ctx_.clock->now_s() + kTokenRetryS;
            arm_token_timer();
        };
        if (!*error) return retry(error->message());
        proto::PodFilesUpdate m;
        m.uid = uid;
        for (const auto &[ref, tr] : *fetched) {
            const Json::Value &token = api::field(api::field(tr, "status"), "token");
            if (!token.isString()) return retry("the TokenRequest gave no token");
            auto slash = ref.second.find('/');  // volume names are DNS labels: no '/'
            m.files[ref.second.substr(0, slash)][ref.second.substr(slash + 1)] = token.asString();
        }
        FetchedObjects got = *fetched;
        pods_.update_files(m, guard([this, uid, got, retry](const Status &st) {
                               auto i = volumes_.find(uid);
                               if (i == volumes_.end()) return;
                               // The runtime no longer runs it (refused, ended): done.
                               if (!st && st.error() == Error::NotFound) return;
                               if (!st) return retry(st.message());
                               LOG_VERBOSE("%s: ServiceAccount token renewed",
                                           pod_ref(i->second.pod).c_str());
                               note_tokens(i->second, got);
                           }));
    });
    request_tokens(v.pod, needs, fetched, error, finish);
}

void PodVolumes::get_objects(const std::string &ns, const std::set<ObjectRef> &refs,
                             const std::shared_ptr<FetchedObjects> &fetched,
                             const std::shared_ptr<size_t> &remaining,
                             const std::shared_ptr<Status> &error,
                             const std::function<void()> &done) {
    for (const auto &ref : refs) {
        // PersistentVolumes are cluster-scoped.
        std::string path = ref.first == kVolumeKind
                               ? "/api/v1/" + ref.first + "/" + ref.second
                               : "/api/v1/namespaces/" + ns + "/" + ref.first + "/" + ref.second;
        ctx_.kube->get(path, [ref, fetched, remaining, error, done](Result<Json::Value> r) {
            if (r)
                (*fetched)[ref] = *r;
            else if (r.error() != Error::NotFound && *error)
                *error = r.failure();
            if (--*remaining == 0) done();
        });
    }
}

void PodVolumes::refresh_all_files() {
    if (stopped_ || !pods_.has_runtime()) return;
    std::vector<std::string> due;
    for (const auto &[uid, v] : volumes_)
        if (pods_.runs(uid) && !v.files_refreshing && !v.files.empty()) due.push_back(uid);
    for (const auto &uid : due)
        refresh_files(uid);
}

void PodVolumes::refresh_files(const std::string &uid) {
    Volumes &v = volumes_[uid];
    auto refs = volume_objects(v.pod);
    if (refs.empty() || v.files.empty()) return;
    v.files_refreshing = true;
    std::string ns = api::object_meta(v.pod).ns;
    auto fetched = std::make_shared<FetchedObjects>();
    auto remaining = std::make_shared<size_t>(refs.size());
    auto error = std::make_shared<Status>();
    auto finish = guard([this, uid, fetched, error] {
        auto it = volumes_.find(uid);
        if (it == volumes_.end()) return;
        Volumes &q = it->second;
        q.files_refreshing = false;
        if (!*error) {
            LOG_VERBOSE("%s: its volumes' objects could not be read again (%s): next round",
                        pod_ref(q.pod).c_str(), error->message().c_str());
            return;
        }
        if (!pods_.runs(uid) || !pods_.has_runtime()) return;
        proto::PodFiles now = object_volume_files(q.pod, *fetched);
        proto::PodFilesUpdate m;
        m.uid = uid;
        for (const auto &[vol, entries] : now) {
            auto had_vol = q.files.find(vol);
            if (had_vol == q.files.end()) continue;
            for (const auto &[path, bytes] : entries) {
                auto had = had_vol->second.find(path);  // only files the pod started with
                if (had == had_vol->second.end() || had->second == bytes) continue;
                m.files[vol][path] = bytes;
            }
        }
        if (m.files.empty()) return;
        proto::PodFiles changed = m.files;
        pods_.update_files(m, guard([this, uid, changed](const Status &st) {
                               auto i = volumes_.find(uid);
                               if (i == volumes_.end()) return;
                               if (!st) {
                                   // NotFound: the runtime no longer runs it.
                                   if (st.error() != Error::NotFound)
                                       LOG_WARN(
                                           "%s: its volumes' new contents not written: "
                                           "%s; next round",
                                           pod_ref(i->second.pod).c_str(), st.message().c_str());
                                   return;
                               }
                               std::vector<std::string> names;
                               for (const auto &[vol, entries] : changed)
                                   for (const auto &[path, bytes] : entries) {
                                       i->second.files[vol][path] = bytes;
                                       names.push_back(vol + "/" + path);
                                   }
                               LOG_INFO("%s: updated in place: %s", pod_ref(i->second.pod).c_str(),
                                        join(names, ", ").c_str());
                           }));
    });
    get_objects(ns, refs, fetched, remaining, error, finish);
}

void PodVolumes::request_tokens(const Json::Value &pod, const std::vector<TokenNeed> &needs,
                                const std::shared_ptr<FetchedObjects> &fetched,
                                const std::shared_ptr<Status> &error,
                                const std::function<void()> &done) {
    if (needs.empty()) return done();
    auto remaining = std::make_shared<size_t>(needs.size());
    std::string ns = api::object_meta(pod).ns;
    for (const auto &need : needs) {
        auto path = token_request_path(ns, need);
        if (!path) {
            if (*error) *error = path.failure();
            if (--*remaining == 0) done();
            continue;
        }
        ctx_.kube->post(*path, token_request_body(pod, need),
                        [need, fetched, remaining, error, done](Result<Json::Value> r) {
                            if (r)
                                (*fetched)[need.ref] = *r;
                            else if (*error)
                                *error =
                                    fail(r.error(), "failed to fetch token for service account " +
                                                        need.service_account + ": " + r.message());
                            if (--*remaining == 0) done();
                        });
    }
}

}  // namespace sk::agent
