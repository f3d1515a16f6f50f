#include "agent/controllers/host_volumes.h"

#include <algorithm>

#include "agent/kube/api_object.h"
#include "common/fs.h"
#include "common/k8s_names.h"
#include "common/procfs.h"
#include "common/strings.h"

namespace sk::agent {
namespace {

const std::set<std::string> kHostPathTypes = {
    "",       "DirectoryOrCreate", "Directory",  "FileOrCreate", "File",
    "Socket", "CharDevice",        "BlockDevice"};

Failure refused(const std::string &msg) {
    return fail(Error::Refused, msg);
}

std::string roots_text(const std::vector<std::string> &roots) {
    return roots.empty() ? "none" : join(roots, ", ");
}

// `path` (from the pod or a PersistentVolume) clean, and the root it is
// under; Refused otherwise.
Result<proto::HostVolume> allowed(const std::string &what, const std::string &path,
                                  const std::vector<std::string> &roots) {
    auto clean = clean_absolute_path(path);
    if (!clean) return refused(what + ": " + clean.message());
    for (const auto &r : roots)
        if (path_within(*clean, r)) return proto::HostVolume{*clean, r, "", false};
    if (roots.empty())
        return refused(what + " is the node path " + *clean +
                       "; this node lets pods mount no node path (agent.conf volume_roots is "
                       "empty). Ask the admins to allow the shared file system it is on, or use "
                       "an emptyDir volume");
    return refused(what + " is the node path " + *clean +
                   ", outside the paths this node lets pods mount (" + roots_text(roots) +
                   ": agent.conf volume_roots). Use a path under them, or ask the admins");
}

// Where the nfs export server:path is on this node.
Result<std::string> nfs_local_path(const std::string &what, const std::string &server,
                                   const std::string &path, const std::vector<NfsMount> &nfs) {
    auto clean = clean_absolute_path(path);
    if (!clean) return refused(what + ": nfs path " + clean.message());
    const NfsMount *best = nullptr;
    size_t best_len = 0;
    std::string rest;
    for (const auto &m : nfs) {
        auto colon = m.source.find(':');
        if (colon == std::string::npos || m.source.substr(0, colon) != server) continue;
        auto exp = clean_absolute_path(m.source.substr(colon + 1));
        if (!exp || !path_within(*clean, *exp) || (best && exp->size() <= best_len)) continue;
        best = &m;
        best_len = exp->size();
        rest = *exp == "/" ? *clean : clean->substr(exp->size());
    }
    if (!best)
        return refused(what + " is the nfs export " + server + ":" + *clean +
                       ", which this node has not mounted; pods mount the site's shared file "
                       "systems where the node has them. Ask the admins to mount it on the "
                       "Slurm nodes");
    std::string local = best->mount_point == "/" ? rest : best->mount_point + rest;
    return local.empty() ? std::string("/") : local;
}

// The PersistentVolume `pv` bound to claim `claim` of the pod's volume.
Result<proto::HostVolume> from_volume(const std::string &vol, const Json::Value &claim,
                                      const Json::Value &pv, const std::vector<std::string> &roots,
                                      const std::vector<NfsMount> &nfs) {
    std::string pv_name = api::object_meta(pv).name;
    std::string what = "volume " + vol + " (PersistentVolume " + pv_name + ")";
    const Json::Value &spec = api::field(pv, "spec");
    const Json::Value &ref = api::field(spec, "claimRef");
    api::ObjectMeta cm = api::object_meta(claim);
    if (api::text(api::field(ref, "name")) != cm.name ||
        api::text(api::field(ref, "namespace")) != cm.ns ||
        (!api::text(api::field(ref, "uid")).empty() && api::text(api::field(ref, "uid")) != cm.uid))
        return fail(Error::NotFound, "PersistentVolume " + pv_name + " is not bound to claim " +
                                         cm.ns + "/" + cm.name + " (its claimRef names another)");
    proto::HostVolume hv;
    bool ro = false;
    if (api::object(spec).isMember("hostPath")) {
        const Json::Value &hp = api::field(spec, "hostPath");
        auto a = allowed(what, api::text(api::field(hp, "path")), roots);
        if (!a) return a;
        hv = *a;
        hv.type = api::text(api::field(hp, "type"));
        if (!kHostPathTypes.count(hv.type))
            return refused(what + " has hostPath type '" + hv.type +
                           "', which Kubernetes does "
                           "not define");
    } else if (api::object(spec).isMember("local")) {
        auto a = allowed(what, api::text(api::field(api::field(spec, "local"), "path")), roots);
        if (!a) return a;
        hv = *a;
    } else if (api::object(spec).isMember("nfs")) {
        const Json::Value &n = api::field(spec, "nfs");
        auto local = nfs_local_path(what, api::text(api::field(n, "server")),
                                    api::text(api::field(n, "path")), nfs);
        if (!local) return local.failure();
        auto a = allowed(what, *local, roots);
        if (!a) return a;
        hv = *a;
        hv.type = "Directory";
        ro = api::field(n, "readOnly").isBool() && api::field(n, "readOnly").asBool();
    } else {
        return refused(what +
                       " has a source Slurm nodes cannot mount; they mount the hostPath, local "
                       "and nfs PersistentVolumes of the site's shared file systems");
    }
    hv.read_only = ro;
    return hv;
}

}  // namespace

std::set<ObjectRef> claim_refs(const Json::Value &pod) {
    std::set<ObjectRef> out;
    for (const auto &v : api::items(api::field(api::field(pod, "spec"), "volumes"))) {
        std::string name =
            api::text(api::field(api::field(v, "persistentVolumeClaim"), "claimName"));
        // A name only: it becomes part of an API path (resolve_host_volumes
        // refuses the pod otherwise).
        if (k8s::is_dns1123_subdomain(name)) out.insert({kClaimKind, name});
    }
    return out;
}

std::set<ObjectRef> bound_volume_refs(const Json::Value &pod, const FetchedObjects &objects) {
    std::set<ObjectRef> out;
    for (const auto &ref : claim_refs(pod)) {
        auto it = objects.find(ref);
        if (it == objects.end()) continue;
        std::string pv = api::text(api::field(api::field(it->second, "spec"), "volumeName"));
        if (k8s::is_dns1123_subdomain(pv)) out.insert({kVolumeKind, pv});
    }
    return out;
}

std::vector<NfsMount> nfs_mounts(std::string_view mountinfo) {
    std::vector<NfsMount> out;
    for (const auto &m : parse_mountinfo(mountinfo))
        if (m.fstype == "nfs" || m.fstype == "nfs4") out.push_back({m.source, m.mount_point});
    return out;
}

Result<proto::HostVolumes> resolve_host_volumes(const Json::Value &pod,
                                                const FetchedObjects &objects,
                                                const std::vector<std::string> &roots,
                                                const std::vector<NfsMount> &nfs) {
    proto::HostVolumes out;
    std::string ns = api::object_meta(pod).ns;
    for (const auto &v : api::items(api::field(api::field(pod, "spec"), "volumes"))) {
        std::string vol = api::text(api::field(v, "name"));
        if (api::object(v).isMember("hostPath")) {
            const Json::Value &hp = api::field(v, "hostPath");
            auto a =
                allowed("volume " + vol + " (hostPath)", api::text(api::field(hp, "path")), roots);
            if (!a) return a.failure();
            a->type = api::text(api::field(hp, "type"));
            if (!kHostPathTypes.count(a->type))
                return refused("volume " + vol + " has hostPath type '" + a->type +
                               "', which Kubernetes does not define");
            out[vol] = *a;
            continue;
        }
        if (!api::object(v).isMember("persistentVolumeClaim")) continue;
        const Json::Value &src = api::field(v, "persistentVolumeClaim");
        std::string claim_name = api::text(api::field(src, "claimName"));
        if (!k8s::is_dns1123_subdomain(claim_name))
            return refused("volume " + vol + ": claimName '" + claim_name.substr(0, 64) +
                           "' is not a claim's name");
        auto c = objects.find({kClaimKind, claim_name});
        if (c == objects.end())
            return fail(Error::NotFound, "persistentvolumeclaim \"" + claim_name + "\" not found");
        const Json::Value &claim = c->second;
        if (!api::text(api::field(api::field(claim, "metadata"), "deletionTimestamp")).empty())
            return fail(Error::NotFound, "can't start pod because PVC " + ns + "/" + claim_name +
                                             " is being deleted");
        std::string phase = api::text(api::field(api::field(claim, "status"), "phase"));
        std::string pv_name = api::text(api::field(api::field(claim, "spec"), "volumeName"));
        if (phase != "Bound" || pv_name.empty())
            return fail(Error::NotFound,
                        "PVC " + ns + "/" + claim_name + " has non-bound phase (\"" + phase +
                            "\") or empty pvc.Spec.VolumeName (\"" + pv_name + "\")");
        auto p = objects.find({kVolumeKind, pv_name});
        if (p == objects.end())
            return fail(Error::NotFound,
                        "failed to fetch PV \"" + pv_name + "\" from API server: not found");
        auto hv = from_volume(vol, claim, p->second, roots, nfs);
        if (!hv) return hv.failure();
        if (api::field(src, "readOnly").isBool() && api::field(src, "readOnly").asBool())
            hv->read_only = true;
        out[vol] = *hv;
    }
    return out;
}

Result<std::vector<MemoryVolumeSize>> memory_volumes(const Json::Value &pod, uint64_t node_bytes) {
    std::vector<MemoryVolumeSize> out;
    const Json::Value &spec = api::field(pod, "spec");
    // What the pod may use: its containers' memory limits, when each has one.
    uint64_t pod_bytes = 0;
    bool limited = true;
    for (const auto &c : api::items(api::field(spec, "containers"))) {
        std::string lim =
            api::text(api::field(api::field(api::field(c, "resources"), "limits"), "memory"));
        auto milli =
            lim.empty() ? Result<int64_t>(fail(Error::NotFound, "")) : parse_quantity_milli(lim);
        if (!milli || *milli <= 0) {
            limited = false;
            break;
        }
        pod_bytes += static_cast<uint64_t>(*milli / 1000);
    }
    uint64_t cap = limited && pod_bytes ? std::min(pod_bytes, node_bytes) : node_bytes;
    for (const auto &v : api::items(api::field(spec, "volumes"))) {
        const Json::Value &ed = api::field(v, "emptyDir");
        if (api::text(api::field(ed, "medium")) != "Memory") continue;
        MemoryVolumeSize m{api::text(api::field(v, "name")), cap};
        // It names a directory root makes (the API server's rule, relied on
        // by nothing here).
        if (!k8s::is_dns1123_label(m.volume))
            return refused("volume name '" + m.volume.substr(0, 64) +
                           "' must be a DNS label (lowercase letters, digits, '-')");
        std::string limit = api::text(api::field(ed, "sizeLimit"));
        if (api::field(ed, "sizeLimit").isIntegral())
            limit = api::field(ed, "sizeLimit").asString();
        if (!limit.empty()) {
            auto milli = parse_quantity_milli(limit);
            if (!milli || *milli <= 0)
                return refused("volume " + m.volume + ": sizeLimit '" + limit +
                               "' is not a positive quantity");
            m.bytes = std::min<uint64_t>(cap, static_cast<uint64_t>(*milli / 1000));
        }
        if (m.bytes == 0) m.bytes = cap;
        out.push_back(m);
    }
    return out;
}

}  // namespace sk::agent
