#include "agent/controllers/node_builder.h"

#include <algorithm>

#include "agent/kube/api_object.h"
#include "common/rfc3339.h"

namespace sk::agent {
namespace {

Json::Value condition(const char *type, bool status, const char *reason, const char *message,
                      int64_t hb, int64_t tr) {
    Json::Value c(Json::objectValue);
    c["type"] = type;
    c["status"] = status ? "True" : "False";
    c["lastHeartbeatTime"] = rfc3339(hb);
    c["lastTransitionTime"] = rfc3339(tr);
    c["reason"] = reason;
    c["message"] = message;
    return c;
}

Json::Value resources(const NodeSpecInput &in) {
    Json::Value r(Json::objectValue);
    uint32_t cpus = in.job.cpus ? in.job.cpus : in.host_cpus;
    uint64_t mem = in.job.memory_mib ? in.job.memory_mib : in.host_memory_mib;
    r["cpu"] = std::to_string(cpus);
    r["memory"] = std::to_string(mem * 1024) + "Ki";
    r["pods"] = std::to_string(in.max_pods);
    if (in.ephemeral_storage_bytes)
        r["ephemeral-storage"] = std::to_string(in.ephemeral_storage_bytes / 1024) + "Ki";
    r["nvidia.com/gpu"] = std::to_string(in.job.gpus.size());
    return r;
}

Json::Value status_fields(const NodeSpecInput &in) {
    Json::Value s(Json::objectValue);
    s["capacity"] = resources(in);
    s["allocatable"] = resources(in);
    Json::Value addrs(Json::arrayValue);
    Json::Value ip(Json::objectValue);
    ip["type"] = "InternalIP";
    ip["address"] = in.node_address;
    addrs.append(ip);
    // Never the virtual node's own name: nothing resolves it, and the API
    // server would dial it before the InternalIP (agent/core/node_address.h).
    if (!in.node_hostname.empty()) {
        Json::Value host(Json::objectValue);
        host["type"] = "Hostname";
        host["address"] = in.node_hostname;
        addrs.append(host);
    }
    s["addresses"] = addrs;
    s["daemonEndpoints"]["kubeletEndpoint"]["Port"] = in.kubelet_port;
    Json::Value &ni = s["nodeInfo"];
    ni["machineID"] = in.machine_id;
    ni["systemUUID"] = in.machine_id;
    ni["bootID"] = in.boot_id;
    ni["kernelVersion"] = in.kernel_version;
    ni["osImage"] = in.os_image;
    ni["containerRuntimeVersion"] = "slurm-k8s://" + in.agent_version;
    ni["kubeletVersion"] = "v1.28.0-slurm-k8s-" + in.agent_version;
    ni["kubeProxyVersion"] = "";
    ni["operatingSystem"] = "linux";
    ni["architecture"] = in.architecture;
    return s;
}

Json::Value taints_json(const std::vector<k8s::Taint> &taints) {
    Json::Value a(Json::arrayValue);
    for (const auto &t : taints) {
        Json::Value o(Json::objectValue);
        o["key"] = t.key;
        if (!t.value.empty()) o["value"] = t.value;
        o["effect"] = t.effect;
        a.append(o);
    }
    return a;
}

}  // namespace

std::map<std::string, std::string> node_labels(const NodeSpecInput &in) {
    std::map<std::string, std::string> l = in.site_labels;
    for (const auto &[k, v] : in.job.labels)
        if (k.rfind(kLabelPrefix, 0) != 0) l[k] = v;
    std::string p = kLabelPrefix;
    l[p + "job-id"] = std::to_string(in.job.job_id);
    // The whole array / het job, for a selector over its tasks or components.
    if (in.job.array_job_id) {
        l[p + "array-job-id"] = std::to_string(in.job.array_job_id);
        l[p + "array-task-id"] = std::to_string(in.job.array_task_id);
    }
    if (in.job.het_job_id) {
        l[p + "het-job-id"] = std::to_string(in.job.het_job_id);
        l[p + "het-component"] = std::to_string(in.job.het_offset);
    }
    l[p + "user"] = in.job.user;
    l[p + "partition"] = in.job.partition;
    l[p + "slurm-node"] = in.job.slurm_node;
    l[p + "cluster"] = in.cluster;
    l["kubernetes.io/hostname"] = in.node_name;
    l["kubernetes.io/os"] = "linux";
    l["kubernetes.io/arch"] = in.architecture;
    l["node.kubernetes.io/instance-type"] = "slurm-k8s";
    // As NVIDIA's GPU feature discovery labels a GPU node, from what Slurm
    // knows: the lent count, and the model as the site's gres.conf Type=.
    if (!in.job.gpus.empty()) {
        l["nvidia.com/gpu.count"] = std::to_string(in.job.gpus.size());
        if (!in.job.gpu_type.empty()) l["nvidia.com/gpu.product"] = in.job.gpu_type;
    }
    for (auto it = l.begin(); it != l.end();)  // a label value must be valid or absent
        it = k8s::is_label_value(it->second) ? std::next(it) : l.erase(it);
    return l;
}

std::vector<k8s::Taint> node_taints(const NodeSpecInput &in) {
    std::vector<k8s::Taint> t = in.job.taints;
    if (t.empty()) t.push_back({kJobTaintKey, std::to_string(in.job.job_id), "NoSchedule"});
    for (const auto &s : in.site_taints)
        if (std::find(t.begin(), t.end(), s) == t.end()) t.push_back(s);
    return t;
}

Json::Value node_conditions(bool ready, int64_t hb, int64_t tr, const NotReadyWhy &why) {
    Json::Value a(Json::arrayValue);
    a.append(condition("MemoryPressure", false, "KubeletHasSufficientMemory",
                       "kubelet has sufficient memory available", hb, tr));
    a.append(condition("DiskPressure", false, "KubeletHasNoDiskPressure",
                       "kubelet has no disk pressure", hb, tr));
    a.append(condition("PIDPressure", false, "KubeletHasSufficientPID",
                       "kubelet has sufficient PID available", hb, tr));
    if (ready)
        a.append(
            condition("Ready", true, "KubeletReady", "kubelet is posting ready status", hb, tr));
    else
        a.append(condition("Ready", false, why.reason.c_str(), why.message.c_str(), hb, tr));
    return a;
}

std::vector<std::string> effective_namespaces(const proto::RegisterRequest &job,
                                              const std::vector<std::string> &site) {
    return job.namespaces.empty() ? site : job.namespaces;
}

bool namespace_allowed(const std::vector<std::string> &effective, const std::string &ns) {
    for (const auto &a : effective)
        if (a == "*" || a == ns) return true;
    return false;
}

namespace {
constexpr const char *kNoNamespace =
    "the job named no namespace (sbatch --k8s-namespace=NS) and this site allows none by "
    "default";
}  // namespace

std::string namespace_refusal(const std::vector<std::string> &effective, const std::string &ns,
                              uint32_t job_id) {
    std::string msg =
        "namespace " + ns + " may not use the nodes of Slurm job " + std::to_string(job_id);
    if (effective.empty()) return msg + ": " + kNoNamespace;
    std::string list;
    for (const auto &a : effective)
        list += (list.empty() ? "" : ",") + a;
    return msg + " (allowed: " + list + ")";
}

std::string namespaces_annotation(const std::vector<std::string> &effective) {
    if (effective.empty()) return std::string("none: ") + kNoNamespace;
    std::string list;
    for (const auto &a : effective)
        list += (list.empty() ? "" : ",") + a;
    return list;
}

Json::Value build_node(const NodeSpecInput &in, int64_t now_s) {
    Json::Value n(Json::objectValue);
    n["apiVersion"] = "v1";
    n["kind"] = "Node";
    n["metadata"]["name"] = in.node_name;
    n["metadata"]["labels"] = Json::Value(Json::objectValue);
    for (const auto &[k, v] : node_labels(in))
        n["metadata"]["labels"][k] = v;
    n["metadata"]["annotations"]["slurm-k8s/agent-version"] = in.agent_version;
    n["metadata"]["annotations"][kNamespacesAnnotation] =
        namespaces_annotation(effective_namespaces(in.job, in.site_namespaces));
    n["spec"]["taints"] = taints_json(node_taints(in));
    if (!in.pod_cidr.empty()) {
        n["spec"]["podCIDR"] = in.pod_cidr;
        n["spec"]["podCIDRs"].append(in.pod_cidr);
    }
    n["status"] = status_fields(in);
    n["status"]["conditions"] = node_conditions(true, now_s, now_s);
    return n;
}

Json::Value build_node_status_patch(const NodeSpecInput &in, bool ready, int64_t now_s,
                                    int64_t transition_s, const NotReadyWhy &why) {
    Json::Value p(Json::objectValue);
    p["status"] = status_fields(in);
    p["status"]["conditions"] = node_conditions(ready, now_s, transition_s, why);
    Json::Value order(Json::arrayValue);
    for (const char *t : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}) {
        Json::Value o(Json::objectValue);
        o["type"] = t;
        order.append(o);
    }
    p["status"]["$setElementOrder/conditions"] = order;
    return p;
}

Json::Value build_cordon_patch(const Json::Value &node, const k8s::Taint &extra) {
    Json::Value p(Json::objectValue);
    p["metadata"]["resourceVersion"] = api::field(api::field(node, "metadata"), "resourceVersion");
    p["spec"]["unschedulable"] = true;
    Json::Value taints(Json::arrayValue);
    bool have = false;
    for (const auto &t : api::items(api::field(api::field(node, "spec"), "taints"))) {
        if (api::text(api::field(t, "key")) == extra.key &&
            api::text(api::field(t, "effect")) == extra.effect)
            have = true;
        taints.append(t);
    }
    if (!have) taints.append(taints_json({extra})[0]);
    p["spec"]["taints"] = taints;
    return p;
}

Json::Value build_end_cordon_patch(const Json::Value &node, const k8s::Taint &taint,
                                   const char *annotation) {
    Json::Value p = build_cordon_patch(node, taint);
    const Json::Value &unsched = api::field(api::field(node, "spec"), "unschedulable");
    if (!(unsched.isBool() && unsched.asBool()))
        p["metadata"]["annotations"][annotation] = "unschedulable";
    return p;
}

bool has_taint(const Json::Value &node, const std::string &key, const std::string &effect) {
    for (const auto &t : api::items(api::field(api::field(node, "spec"), "taints")))
        if (api::text(api::field(t, "key")) == key && api::text(api::field(t, "effect")) == effect)
            return true;
    return false;
}

namespace {

Json::Value taints_without(const Json::Value &node, const std::string &key,
                           const std::string &effect) {
    Json::Value taints(Json::arrayValue);
    for (const auto &t : api::items(api::field(api::field(node, "spec"), "taints")))
        if (!(api::text(api::field(t, "key")) == key &&
              api::text(api::field(t, "effect")) == effect))
            taints.append(t);
    return taints;
}

}  // namespace

Json::Value build_not_ready_lift_patch(const Json::Value &node) {
    if (!has_taint(node, kNotReadyTaintKey, "NoSchedule")) return Json::Value();
    Json::Value p(Json::objectValue);
    p["metadata"]["resourceVersion"] = api::field(api::field(node, "metadata"), "resourceVersion");
    p["spec"]["taints"] = taints_without(node, kNotReadyTaintKey, "NoSchedule");
    return p;
}

Json::Value build_end_uncordon_patch(const Json::Value &node, const k8s::Taint &taint,
                                     const char *annotation) {
    const Json::Value &meta = api::field(node, "metadata");
    bool ours = api::field(api::field(meta, "annotations"), annotation).isString();
    if (!ours && !has_taint(node, taint.key, taint.effect)) return Json::Value();
    Json::Value p(Json::objectValue);
    p["metadata"]["resourceVersion"] = api::field(meta, "resourceVersion");
    p["spec"]["taints"] = taints_without(node, taint.key, taint.effect);
    if (ours) {
        // The end's cordon and the suspension's: the one that stays keeps the Node cordoned.
        bool end = std::string_view(annotation) == kEndCordonAnnotation;
        const char *other_key = end ? kSuspendedTaintKey : kEndingTaintKey;
        const char *other_annotation = end ? kSuspendCordonAnnotation : kEndCordonAnnotation;
        if (has_taint(node, other_key, "NoSchedule"))
            p["metadata"]["annotations"][other_annotation] = "unschedulable";
        else
            p["spec"]["unschedulable"] = false;
        p["metadata"]["annotations"][annotation] = Json::Value();  // null: removed
    }
    return p;
}

bool node_is_ours(const Json::Value &node, const std::string &cluster,
                  const std::string &slurm_node) {
    const Json::Value &l = api::field(api::field(node, "metadata"), "labels");
    std::string p = kLabelPrefix;
    return l.isObject() && api::text(l[p + "cluster"]) == cluster &&
           api::text(l[p + "slurm-node"]) == slurm_node && l.isMember(p + "job-id");
}

Json::Value build_lease(const std::string &node_name, const std::string &node_uid,
                        uint32_t duration_s, int64_t now_us) {
    Json::Value l(Json::objectValue);
    l["apiVersion"] = "coordination.k8s.io/v1";
    l["kind"] = "Lease";
    l["metadata"]["name"] = node_name;
    l["metadata"]["namespace"] = "kube-node-lease";
    Json::Value owner(Json::objectValue);
    owner["apiVersion"] = "v1";
    owner["kind"] = "Node";
    owner["name"] = node_name;
    owner["uid"] = node_uid;
    l["metadata"]["ownerReferences"].append(owner);
    l["spec"]["holderIdentity"] = node_name;
    l["spec"]["leaseDurationSeconds"] = duration_s;
    l["spec"]["renewTime"] = micro_time(now_us);
    return l;
}

Json::Value renew_lease(const Json::Value &current, const std::string &node_name,
                        const std::string &node_uid, uint32_t duration_s, int64_t now_us) {
    Json::Value l = build_lease(node_name, node_uid, duration_s, now_us);
    const Json::Value &md = api::object(api::field(current, "metadata"));
    l["metadata"]["resourceVersion"] = api::field(md, "resourceVersion");
    if (md.isMember("uid")) l["metadata"]["uid"] = md["uid"];
    return l;
}

}  // namespace sk::agent
