#include "agent/garbage_collector.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "agent/controllers/drain.h"
#include "agent/controllers/node_builder.h"
#include "agent/pod_tmpfs.h"
#include "common/daemons/log_paths.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/rfc3339.h"
#include "common/strings.h"
#include "uv/handles.h"

namespace sk::agent {

namespace {

// What rootless podman stored for a container with --userns=keep-id belongs
// to the user's subordinate ids (/etc/subuid), which the user reaches only
// in a user namespace: the shim's `podman system reset` removes it, and when
// the shim could not (it died), a second `rm -rf` runs, still as the owner,
// in a user namespace that maps the owner's subordinate ids (util-linux
// unshare --map-auto). Best effort: a failure is logged and leaves the
// directory.
void remove_job_dir_as_owner(uv_loop_t *loop, const std::string &dir, bool in_userns = false) {
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
    // The process owns itself until its exit (so that it is reaped).
    auto *rm = new Process;
    SpawnOptions o;
    if (in_userns) {
        o.file = "/usr/bin/unshare";
        o.args = {"unshare", "--map-root-user",   "--map-auto", "/bin/rm",
                  "-rf",     "--one-file-system", "--",         dir};
    } else {
        o.file = "/bin/rm";
        o.args = {"rm", "-rf", "--one-file-system", "--", dir};
    }
    o.uid = st.st_uid;
    o.gid = st.st_gid;
    int e = rm->spawn(loop, o, [loop, rm, dir, in_userns](int64_t, int) {
        if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
            if (errno == ENOTEMPTY && !in_userns)
                remove_job_dir_as_owner(loop, dir, true);
            else
                LOG_WARN("cannot remove the shim dir %s: %s", dir.c_str(), strerror(errno));
        }
        delete rm;
    });
    if (e != 0) {
        LOG_WARN("cannot remove the shim dir %s: %s", dir.c_str(), uv_strerror(e));
        delete rm;
    }
}

}  // namespace

// The podman runtime's run directory of the job (common/daemons/log_paths.h), which
// its shim removes at its end; one that died leaves it. Its state directory's
// owner is the job's user; both go the same way (rm as their owner).
void remove_job_dirs(uv_loop_t *loop, const std::string &state_dir, uint32_t job_id,
                     const std::string &slurm_node) {
    // Its pods' memory volumes first: rm stays on one file system.
    if (size_t n = TmpfsMounts().unmount(job_tag_for(job_id, slurm_node), ""))
        LOG_INFO("job %u on %s: %zu memory volumes unmounted", job_id, slurm_node.c_str(), n);
    unshare_job_dir(state_dir);  // its bind onto itself (agent/pod_tmpfs.h share_job_dir)
    struct stat st;
    if (lstat(state_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        remove_job_dir_as_owner(loop, podman_run_dir(st.st_uid, job_id, slurm_node));
    remove_job_dir_as_owner(loop, state_dir);
}

GarbageCollector::GarbageCollector(AgentContext &ctx, KubeClient &kube, SlurmJobs &slurm,
                                   JobStore &store, uv_loop_t *loop, Registered registered)
    : ctx_(ctx),
      kube_(kube),
      slurm_(slurm),
      store_(store),
      loop_(loop),
      registered_(std::move(registered)) {}

void GarbageCollector::collect_nodes() {
    std::string sel = std::string(kLabelPrefix) + "slurm-node=" + ctx_.host.job.slurm_node + "," +
                      kLabelPrefix + "cluster=" + ctx_.cfg->cluster_name;
    kube_.get("/api/v1/nodes?labelSelector=" + url_escape(sel), [this](Result<Json::Value> r) {
        if (!r) {
            LOG_VERBOSE("gc: node list failed: %s", r.message().c_str());
            return;
        }
        for (const auto &n : (*r)["items"]) {
            std::string name = n["metadata"]["name"].asString();
            const Json::Value &l = n["metadata"]["labels"];
            auto job = parse_uint(l[std::string(kLabelPrefix) + "job-id"].asString(), "job-id",
                                  UINT32_MAX);
            if (!job) continue;
            std::string slurm_node = l[std::string(kLabelPrefix) + "slurm-node"].asString();
            std::string key = job_key(static_cast<uint32_t>(*job), slurm_node);
            if (registered_(key)) continue;
            uint32_t job_id = static_cast<uint32_t>(*job);
            slurm_.end_state(job_id, [this, key, name, job_id, slurm_node](
                                         JobState s, const std::string &reason) {
                // Alive, Slurm could not tell, or registered meanwhile: not garbage.
                if (s != JobState::Gone || registered_(key)) return;
                LOG_INFO(
                    "[node %s] gc: job %u is gone (%s): deleting its pods, the Node and its "
                    "Lease",
                    name.c_str(), job_id, reason.c_str());
                post_job_end_event(name, job_id, reason);
                delete_unlisted_pods(ctx_, name, job_id, slurm_node, reason);
                kube_.del(KubeClient::lease(name), Json::Value(),
                          [](const Result<Json::Value> &) {});
                kube_.del(KubeClient::node(name), Json::Value(),
                          [name](const Result<Json::Value> &d) {
                              if (!d && d.error() != Error::NotFound)
                                  LOG_WARN("[node %s] gc: delete failed: %s", name.c_str(),
                                           d.message().c_str());
                          });
            });
        }
    });
}

// The Event a drain posts on the job's Node (how the job ended), for a Node
// the garbage collection deletes: `kubectl get events` keeps it after the
// Node is gone.
void GarbageCollector::post_job_end_event(const std::string &node_name, uint32_t job_id,
                                          const std::string &reason) {
    Json::Value ev = build_node_event(
        node_name, job_end_event(reason, job_id, ": its node's agent did not stop the pods"),
        ctx_.clock->now_us());
    kube_.post(KubeClient::events("default"), ev, [](const Result<Json::Value> &r) {
        if (!r) LOG_VERBOSE("gc: node event post failed: %s", r.message().c_str());
    });
}

// A failed Slurm node runs nothing: neither its agent nor the job's end
// there, so its virtual nodes and their pods would stay in the API. With
// gc_failed_nodes this agent also collects the virtual nodes of the
// cluster's other Slurm nodes whose Lease has not been renewed for
// lease_duration + 2 renew periods (the agent there is gone) once Slurm says
// their job is gone: the pods bound to them, the Lease and the Node, each
// delete with its uid precondition (a second collector, or an agent that
// came back and re-created them, makes it a no-op). Cost per gc_interval:
// one Node list (the cluster's label), one Lease list, and a job query only
// for the expired ones.
void GarbageCollector::collect_failed_nodes() {
    std::string sel = std::string(kLabelPrefix) + "cluster=" + ctx_.cfg->cluster_name;
    kube_.get("/api/v1/nodes?labelSelector=" + url_escape(sel), [this](Result<Json::Value> nodes) {
        if (!nodes) {
            LOG_VERBOSE("gc: node list failed: %s", nodes.message().c_str());
            return;
        }
        kube_.get(KubeClient::leases(), [this,
                                         items = (*nodes)["items"]](Result<Json::Value> leases) {
            if (!leases) {
                LOG_VERBOSE("gc: lease list failed: %s", leases.message().c_str());
                return;
            }
            std::map<std::string, Json::Value> lease_of;
            for (const auto &l : (*leases)["items"])
                lease_of[l["metadata"]["name"].asString()] = l;
            const int64_t now = ctx_.clock->now_s();
            const int64_t stale =
                static_cast<int64_t>(ctx_.cfg->lease_duration_s + 2 * ctx_.cfg->lease_renew_s);
            for (const auto &n : items) {
                const Json::Value &md = n["metadata"];
                std::string name = md["name"].asString();
                const Json::Value &l = md["labels"];
                std::string slurm_node = l[std::string(kLabelPrefix) + "slurm-node"].asString();
                if (slurm_node.empty() || slurm_node == ctx_.host.job.slurm_node) continue;
                auto job = parse_uint(l[std::string(kLabelPrefix) + "job-id"].asString(), "job-id",
                                      UINT32_MAX);
                if (!job) continue;
                auto lease = lease_of.find(name);
                int64_t last = parse_rfc3339(lease != lease_of.end()
                                                 ? lease->second["spec"]["renewTime"].asString()
                                                 : md["creationTimestamp"].asString());
                if (last < 0 || now - last <= stale) {
                    LOG_DEBUG("[node %s] gc: Slurm node %s renewed %llds ago", name.c_str(),
                              slurm_node.c_str(), static_cast<long long>(now - last));
                    continue;
                }
                uint32_t job_id = static_cast<uint32_t>(*job);
                std::string node_uid = md["uid"].asString();
                std::string lease_uid =
                    lease != lease_of.end() ? lease->second["metadata"]["uid"].asString() : "";
                slurm_.end_state(job_id, [this, name, job_id, slurm_node, node_uid, lease_uid,
                                          age = now - last](JobState s, const std::string &reason) {
                    if (s != JobState::Gone) return;  // alive, or Slurm could not tell
                    LOG_INFO(
                        "[node %s] gc: Slurm node %s renewed nothing for %llds and job %u is "
                        "gone (%s): deleting its pods, the Node and its Lease",
                        name.c_str(), slurm_node.c_str(), static_cast<long long>(age), job_id,
                        reason.c_str());
                    post_job_end_event(name, job_id, reason);
                    delete_unlisted_pods(ctx_, name, job_id, slurm_node, reason);
                    if (!lease_uid.empty())
                        kube_.del(KubeClient::lease(name), KubeClient::uid_precondition(lease_uid),
                                  [](const Result<Json::Value> &) {});
                    kube_.del(
                        KubeClient::node(name), KubeClient::uid_precondition(node_uid),
                        [name](const Result<Json::Value> &d) {
                            if (!d && d.error() != Error::NotFound && d.error() != Error::Conflict)
                                LOG_WARN("[node %s] gc: delete failed: %s", name.c_str(),
                                         d.message().c_str());
                        });
                });
            }
        });
    });
}

// What a job leaves on this machine when its end went wrong (the agent
// stalled or was killed during the deregisters, a record unreadable at
// start): its shim state dir (pod state and logs, <shim_state_dir>/job_N_node),
// its job store record, and the temporary files of writers that died
// mid-write. A job registered here is never touched (its end cleans up);
// for any other, Slurm decides: only a job Slurm says is Gone loses its
// files, one Slurm cannot tell about (JobState::Unknown) keeps them, and a
// job registered while the answer was on its way keeps them too.
void GarbageCollector::collect_files() {
    if (size_t n = remove_stale_temp_files(store_.dir()))
        LOG_INFO("gc: removed %zu temporary file(s) of dead writers in %s", n,
                 store_.dir().c_str());
    if (size_t n = remove_stale_temp_files(ctx_.cfg->shim_state_dir))
        LOG_INFO("gc: removed %zu temporary file(s) of dead writers in %s", n,
                 ctx_.cfg->shim_state_dir.c_str());
    auto collect = [this](const proto::JobKey &k, std::function<void()> remove) {
        std::string key = job_key(k.job_id, k.slurm_node);
        if (registered_(key)) return;
        slurm_.state(k.job_id, [this, key, remove = std::move(remove)](JobState s) {
            if (s == JobState::Gone && !registered_(key)) remove();
        });
    };
    for (const auto &k : store_.record_keys())
        collect(k, [this, k] {
            LOG_INFO("gc: job %u is gone: removing its record %s", k.job_id,
                     store_.path_of(k.job_id, k.slurm_node).c_str());
            (void)store_.remove(k.job_id, k.slurm_node);
        });
    DIR *d = opendir(ctx_.cfg->shim_state_dir.c_str());
    if (!d) return;
    std::vector<proto::JobKey> dirs;
    while (struct dirent *e = readdir(d))
        if (auto k = parse_job_file_name(e->d_name, "")) dirs.push_back(std::move(*k));
    closedir(d);
    for (const auto &k : dirs)
        collect(k, [this, k] {
            std::string dir = shim_state_dir_for(*ctx_.cfg, k.job_id, k.slurm_node);
            LOG_INFO("gc: job %u is gone: removing its shim dir %s", k.job_id, dir.c_str());
            remove_job_dirs(loop_, dir, k.job_id, k.slurm_node);
        });
}

}  // namespace sk::agent
