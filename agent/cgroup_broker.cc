#include "agent/cgroup_broker.h"

#include <algorithm>

#include "agent/controllers/env_resolver.h"
#include "agent/core/peer_auth.h"
#include "common/cgroup/cgroup_devices.h"
#include "common/cgroup/cgroup_files.h"
#include "common/log.h"
#include "common/strings.h"

namespace sk::agent {
namespace {

// The v1 hierarchies a pod gets a cgroup of its own in, where the job has one.
const std::vector<std::string> kPodCgroupControllers = {"devices", "memory"};
// ... and those Slurm makes no job directory in on v1: there in the project's
// own tree of the job (common/cgroup/pod_cgroup.h).
const std::vector<std::string> kOwnPodCgroupControllers = {"cpu", "cpuacct", "pids"};

// resources.<kind>.<name> of a list of containers, in milli-units (0: none or
// unreadable): "memory" 64Mi -> 67108864000, "cpu" 500m -> 500.
std::vector<int64_t> quantities_milli(const Json::Value &containers, const char *kind,
                                      const char *name) {
    std::vector<int64_t> out;
    for (const auto &c : containers.isArray() ? containers : Json::Value(Json::arrayValue)) {
        const Json::Value &q = c.isObject() ? c["resources"][kind][name] : Json::Value();
        auto milli = q.isString() ? parse_quantity_milli(q.asString()) : Result<int64_t>(0);
        out.push_back(milli && *milli > 0 ? *milli : 0);
    }
    return out;
}

// The memory limits of a list of containers, in bytes (0: none or unreadable).
std::vector<int64_t> memory_limits(const Json::Value &containers) {
    auto out = quantities_milli(containers, "limits", "memory");
    for (auto &v : out)
        v /= 1000;
    return out;
}

// The container named `name` among a pod spec's containers and init
// containers (null when none is).
Json::Value container_in(const Json::Value &spec, const std::string &name) {
    for (const char *list : {"containers", "initContainers"})
        for (const auto &c : spec[list].isArray() ? spec[list] : Json::Value(Json::arrayValue))
            if (c.isObject() && c["name"].isString() && c["name"].asString() == name) return c;
    return Json::Value();
}

}  // namespace

Result<PodCgroupSettings> pod_cgroup_limits(const Json::Value &spec, const std::string &container,
                                            const proto::RegisterRequest &job, uint64_t pids_max) {
    PodCgroupSettings set;
    const int64_t lent_memory = static_cast<int64_t>(job.memory_mib) << 20;
    const int64_t lent_cpu_milli = static_cast<int64_t>(job.cpus) * 1000;
    set.memory_limit = pod_memory_limit(memory_limits(spec["containers"]),
                                        memory_limits(spec["initContainers"]), lent_memory);
    // CPU as the kubelet sets it: the quota from the pod's limit (else what
    // the job lends the node: a pod without a limit cannot take the
    // trainer's CPUs), the shares from its requests.
    set.cpu_quota_us = cpu_quota_for(
        pod_limit(quantities_milli(spec["containers"], "limits", "cpu"),
                  quantities_milli(spec["initContainers"], "limits", "cpu"), lent_cpu_milli),
        set.cpu_period_us);
    int64_t requested = 0;
    for (int64_t r : quantities_milli(spec["containers"], "requests", "cpu"))
        requested += r;
    set.cpu_shares = cpu_shares_for(requested);
    set.pids_max = static_cast<int64_t>(pids_max);
    // The container's own cgroup below the pod's, with its own limits.
    Json::Value one(Json::arrayValue);
    one.append(container_in(spec, container));
    if (one[0].isNull()) return fail(Error::NotFound, "no container '" + container + "'");
    set.container = container;
    set.container_memory_limit = memory_limits(one)[0];
    set.container_cpu_quota_us =
        cpu_quota_for(quantities_milli(one, "limits", "cpu")[0], set.cpu_period_us);
    // All the job's pods together: what the job lends the node.
    set.pods_memory_limit = lent_memory;
    set.pods_cpu_quota_us = cpu_quota_for(lent_cpu_milli, set.cpu_period_us);
    // A limit above what the job lends (vLLM's manifest asks for 10 CPUs of
    // a 4-CPU job) is what the job lends: the parent's quota bounds it
    // anyway, and cgroup v1 refuses a child quota above its parent's (EINVAL).
    if (set.pods_cpu_quota_us > 0) {
        if (set.cpu_quota_us > set.pods_cpu_quota_us) set.cpu_quota_us = set.pods_cpu_quota_us;
        if (set.container_cpu_quota_us > set.cpu_quota_us && set.cpu_quota_us > 0)
            set.container_cpu_quota_us = set.cpu_quota_us;
    }
    return set;
}

Result<std::vector<PodCgroupParent>> CgroupBroker::parents(int shim_pid, uint32_t job_id) const {
    if (shim_pid <= 0) return fail(Error::Unavailable, "the job's shim is not attached");
    return pod_cgroup_parents(read_proc_cgroup(shim_pid), job_id, kPodCgroupControllers,
                              kCgroupRoot, kOwnPodCgroupControllers);
}

Status CgroupBroker::enter(const VirtualNode &vn, int pid, const proto::CgroupEnter &m) {
    const Json::Value *pod = vn.runtime_pod(m.pod_uid);
    if (!pod)
        return fail(Error::NotFound,
                    "pod uid '" + m.pod_uid + "' does not run on " + vn.record().node_name);
    const auto &lent = vn.record().job.gpus;
    for (int g : m.gpus)
        if (std::find(lent.begin(), lent.end(), g) == lent.end())
            return fail(Error::Forbidden,
                        "GPU " + std::to_string(g) + " is not lent on " + vn.record().node_name);
    auto where = parents(vn.shim_pid(), vn.record().job.job_id);
    if (!where) return where.failure();
    auto deny = gpu_char_devices(cfg_.gpu_device, indices_without(lent, m.gpus));
    if (!deny) return deny.failure();
    auto own_gpus = gpu_char_devices(cfg_.gpu_device, m.gpus);
    if (!own_gpus) return own_gpus.failure();
    auto set = pod_cgroup_limits((*pod)["spec"], m.container, vn.record().job, cfg_.pod_pids_max);
    if (!set) return fail(Error::NotFound, "pod uid '" + m.pod_uid + "' has " + set.message());
    set->deny = std::move(*deny);
    set->gpus = std::move(*own_gpus);
    sweep(vn);
    if (auto s = enter_pod_cgroup(*where, m.pod_uid, *set, pid); !s) {
        LOG_ERROR("%s pod %s: %s", vn.prefix().c_str(), m.pod_uid.c_str(), s.message().c_str());
        return s;
    }
    LOG_VERBOSE("%s pod %s: supervisor %d in its cgroup (GPUs %s)", vn.prefix().c_str(),
                m.pod_uid.c_str(), pid, format_index_list(m.gpus).c_str());
    return {};
}

void CgroupBroker::sweep(const VirtualNode &vn) {
    auto where = parents(vn.shim_pid(), vn.record().job.job_id);
    if (!where) return;
    for (const auto &uid : pod_cgroup_uids(*where)) {
        // A pod the shim still runs keeps its directory between its
        // containers' runs (its OOM count goes on: k8s-shim reads it).
        if (vn.runtime_pod(uid)) continue;
        for (const auto &left : remove_pod_cgroup(*where, uid))
            if (left.find("Device or resource busy") == std::string::npos)
                LOG_WARN("%s pod cgroup not removed: %s", vn.prefix().c_str(), left.c_str());
    }
    // The own tree's job directories go when no pod's is left (made again by
    // the next pod; the plugin's job-end sweep removes them too).
    for (const auto &left : remove_own_job_cgroups(*where))
        LOG_WARN("%s cgroup not removed: %s", vn.prefix().c_str(), left.c_str());
}

}  // namespace sk::agent
