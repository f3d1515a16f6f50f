#include "agent/controllers/pod_status_patch.h"

#include <cstdio>
#include <map>
#include <set>

#include "agent/kube/api_object.h"
#include "common/rfc3339.h"

namespace sk::agent {
namespace {

// Fields of PodStatus the agent owns; anything else (qosClass,
// nominatedNodeName, ...) belongs to other writers.
const char *const kOwnedFields[] = {"phase",
                                    "conditions",
                                    "containerStatuses",
                                    "initContainerStatuses",
                                    "hostIP",
                                    "podIP",
                                    "podIPs",
                                    "startTime",
                                    "reason",
                                    "message"};

bool is_runtime_condition(const std::string &type) {
    return type == "Initialized" || type == "Ready" || type == "ContainersReady";
}

// The entries of a list by `key`; the first of a repeated key wins.
std::map<std::string, Json::Value> by_key(const Json::Value &list, const char *key) {
    std::map<std::string, Json::Value> m;
    for (const auto &e : api::items(list))
        m.emplace(api::text(api::field(e, key)), e);
    return m;
}

bool same_list(const Json::Value &a, const Json::Value &b, const char *key) {
    if (!a.isArray() || !b.isArray()) return a == b;
    return a.size() == b.size() && by_key(a, key) == by_key(b, key);
}

bool same_field(const std::string &f, const Json::Value &a, const Json::Value &b) {
    if (f == "conditions") return same_list(a, b, "type");
    if (f == "containerStatuses" || f == "initContainerStatuses") return same_list(a, b, "name");
    return a == b;
}

}  // namespace

bool is_terminal_phase(const std::string &p) {
    return p == "Succeeded" || p == "Failed";
}

bool pod_is_terminal(const Json::Value &v) {
    const Json::Value &s = api::object(v).isMember("status") ? v["status"] : v;
    return is_terminal_phase(api::text(api::field(s, "phase")));
}

Json::Value desired_pod_status(const Json::Value &rt, const Json::Value &api_pod,
                               const std::string &node_ip, const std::string &pod_ip) {
    Json::Value s(Json::objectValue);
    for (const char *f : kOwnedFields)
        if (!api::field(rt, f).isNull()) s[f] = rt[f];
    // A pod on the node's network has the node's address as podIP, from the
    // first write on (as hostNetwork pods on a kubelet); one with a network
    // of its own (agent/core/pod_networks.h) its own.
    s["hostIP"] = node_ip;
    s["podIP"] = pod_ip.empty() ? node_ip : pod_ip;
    Json::Value ip(Json::objectValue);
    ip["ip"] = s["podIP"];
    s["podIPs"] = Json::Value(Json::arrayValue);
    s["podIPs"].append(ip);
    Json::Value conds(Json::arrayValue);
    // DisruptionTarget is the agent's when it sets one (the drain ahead of
    // the job's end), the controller-manager's otherwise.
    bool own_disruption = false;
    for (const auto &c : api::items(api::field(rt, "conditions"))) {
        std::string type = api::text(api::field(c, "type"));
        bool disruption = type == "DisruptionTarget";
        if (is_runtime_condition(type) || disruption) conds.append(c);
        own_disruption |= disruption;
    }
    bool scheduled = false;
    const Json::Value &api_status = api::field(api_pod, "status");
    for (const auto &c : api::items(api::field(api_status, "conditions"))) {
        std::string type = api::text(api::field(c, "type"));
        if (is_runtime_condition(type) || (own_disruption && type == "DisruptionTarget")) continue;
        scheduled |= type == "PodScheduled";
        conds.append(c);
    }
    if (!scheduled) {
        // Bound by spec.nodeName without the scheduler: PodScheduled is the
        // agent's to write (the scheduler writes it otherwise).
        Json::Value c(Json::objectValue);
        c["type"] = "PodScheduled";
        c["status"] = "True";
        c["lastProbeTime"] = Json::Value();
        c["lastTransitionTime"] = api::field(api::field(api_pod, "metadata"), "creationTimestamp");
        conds.append(c);
    }
    s["conditions"] = conds;
    if (api::object(api_status).isMember("qosClass")) s["qosClass"] = api_status["qosClass"];
    return s;
}

Json::Value pod_status_patch(const Json::Value &api_pod, const Json::Value &desired) {
    const Json::Value &cur = api::field(api_pod, "status");
    Json::Value st(Json::objectValue);
    for (const char *f : kOwnedFields) {
        bool in_d = !api::field(desired, f).isNull();
        bool in_c = !api::field(cur, f).isNull();
        if (in_d && (!in_c || !same_field(f, cur[f], desired[f])))
            st[f] = desired[f];
        else if (!in_d && in_c && (std::string(f) == "reason" || std::string(f) == "message"))
            st[f] = Json::Value();  // cleared: strategic merge deletes on null
    }
    if (st.empty()) return Json::Value();
    if (st.isMember("conditions")) {
        // Conditions merge by type: a reason or message the condition had
        // and no longer has (Ready=False ContainersNotReady, then True) is
        // deleted by a null, as a kubelet's patch does; else it stays.
        auto was = by_key(api::field(cur, "conditions"), "type");
        for (auto &c : st["conditions"]) {
            auto it = was.find(api::text(api::field(c, "type")));
            if (it == was.end()) continue;
            for (const char *f : {"reason", "message"})
                if (!api::field(it->second, f).isNull() && api::field(c, f).isNull())
                    c[f] = Json::Value();
        }
        Json::Value order(Json::arrayValue);
        for (const auto &c : st["conditions"]) {
            Json::Value o(Json::objectValue);
            o["type"] = api::field(c, "type");
            order.append(o);
        }
        st["$setElementOrder/conditions"] = order;
    }
    Json::Value p(Json::objectValue);
    p["metadata"]["uid"] = api::field(api::field(api_pod, "metadata"), "uid");
    p["status"] = st;
    return p;
}

Json::Value refused_pod_status(const Json::Value &api_pod, const std::string &reason,
                               const std::string &message, const std::string &node_ip,
                               int64_t now_s) {
    Json::Value rt(Json::objectValue);
    rt["phase"] = "Failed";
    rt["reason"] = reason;
    rt["message"] = message;
    const Json::Value &api_status = api::object(api::field(api_pod, "status"));
    rt["startTime"] =
        api_status.isMember("startTime") ? api_status["startTime"] : Json::Value(rfc3339(now_s));
    return desired_pod_status(rt, api_pod, node_ip);
}

Json::Value start_blocked_status(const Json::Value &api_pod, const std::string &waiting_reason,
                                 const std::string &message, int64_t now_s) {
    Json::Value rt(Json::objectValue);
    rt["phase"] = "Pending";
    const Json::Value &api_status = api::object(api::field(api_pod, "status"));
    std::string now = rfc3339(now_s);
    rt["startTime"] = api_status.isMember("startTime") ? api_status["startTime"] : Json::Value(now);
    const Json::Value &spec = api::field(api_pod, "spec");
    std::string names;
    bool inits = !api::items(api::field(spec, "initContainers")).empty();
    for (const char *list : {"initContainers", "containers"}) {
        const char *out = list[0] == 'i' ? "initContainerStatuses" : "containerStatuses";
        for (const auto &c : api::items(api::field(spec, list))) {
            Json::Value cs(Json::objectValue);
            cs["name"] = api::field(c, "name");
            cs["image"] = api::field(c, "image");
            cs["imageID"] = "";
            cs["ready"] = false;
            cs["restartCount"] = 0;
            cs["started"] = false;
            cs["state"]["waiting"]["reason"] = waiting_reason;
            cs["state"]["waiting"]["message"] = message;
            rt[out].append(cs);
            if (list[0] == 'c') names += (names.empty() ? "" : " ") + api::text(cs["name"]);
        }
    }
    for (const char *type : {"Initialized", "Ready", "ContainersReady"}) {
        Json::Value c(Json::objectValue);
        c["type"] = type;
        bool init = std::string(type) == "Initialized";
        c["status"] = init && !inits ? "True" : "False";
        c["lastProbeTime"] = Json::Value();
        c["lastTransitionTime"] = now;
        if (init && inits) {
            c["reason"] = "ContainersNotInitialized";
            c["message"] = "containers with incomplete status: [init containers]: " + message;
        } else if (!init) {
            c["reason"] = waiting_reason;
            c["message"] = "containers with unready status: [" + names + "]: " + message;
        }
        rt["conditions"].append(c);
    }
    return rt;
}

std::string job_end_message(const std::string &reason, uint32_t job_id) {
    std::string job = "the Slurm job " + std::to_string(job_id) + " lending this node ";
    if (reason == "JobCompleted")
        return job + "completed (its batch script or salloc's command ended with 0)";
    if (reason == "JobFailed")
        return job + "failed (its batch script or salloc's command ended non-zero)";
    if (reason == "JobCancelled") return job + "was cancelled (scancel)";
    if (reason == "TimeLimit") return job + "reached its time limit";
    if (reason == "NodeFail") return job + "ended: Slurm declared the node failed";
    if (reason == "Preempted") return job + "was preempted by a job of higher priority";
    if (reason == "Requeued") return job + "was requeued (it runs again later, maybe elsewhere)";
    return job + "ended";
}

Json::Value orphan_final_status_patch(const Json::Value &api_pod, const std::string &reason,
                                      uint32_t job_id, int64_t now_s) {
    if (pod_is_terminal(api_pod)) return Json::Value();
    const Json::Value &cur = api::object(api::field(api_pod, "status"));
    Json::Value st = job_end_status(cur, reason, job_id);
    for (const char *list : {"initContainerStatuses", "containerStatuses"}) {
        if (!st.isMember(list) || !st[list].isArray()) continue;
        for (auto &cs : st[list]) {
            if (!cs.isObject()) continue;
            const Json::Value &run = api::field(api::field(cs, "state"), "running");
            if (!run.isObject()) continue;
            Json::Value term(Json::objectValue);
            term["exitCode"] = 137;
            term["reason"] = "ContainerStatusUnknown";
            term["message"] = "The container could not be located when the pod was terminated";
            term["startedAt"] = api::field(run, "startedAt");
            term["finishedAt"] = rfc3339(now_s);
            cs["state"] = Json::Value(Json::objectValue);
            cs["state"]["terminated"] = term;
            cs["ready"] = false;
            cs["started"] = false;
        }
    }
    if (st.isMember("conditions") && st["conditions"].isArray())
        for (auto &c : st["conditions"]) {
            std::string type = api::text(api::field(c, "type"));
            if (type != "Ready" && type != "ContainersReady") continue;
            if (api::text(api::field(c, "status")) != "False")
                c["lastTransitionTime"] = rfc3339(now_s);
            c["status"] = "False";
            c["reason"] = "PodFailed";
            c.removeMember("message");
        }
    return pod_status_patch(api_pod, st);
}

EventSpec job_end_event(const std::string &reason, uint32_t job_id, const std::string &tail) {
    bool warn = reason == "NodeFail" || reason == "Preempted" || reason == "JobFailed";
    return {warn ? "Warning" : "Normal", reason, job_end_message(reason, job_id) + tail, ""};
}

std::string end_drain_message(uint32_t job_id, int64_t end_time) {
    return "Pod was terminated in response to the imminent end of the Slurm job " +
           std::to_string(job_id) + " lending this node (its time limit, at " + rfc3339(end_time) +
           ")";
}

Json::Value end_drain_status(const Json::Value &status, uint32_t job_id, int64_t end_time,
                             int64_t now_s) {
    Json::Value s = api::object(status);
    std::string msg = end_drain_message(job_id, end_time);
    s["phase"] = "Failed";
    s["reason"] = "Terminated";
    s["message"] = msg;
    Json::Value conds(Json::arrayValue);
    for (const auto &c : api::items(api::field(s, "conditions")))
        if (api::text(api::field(c, "type")) != "DisruptionTarget") conds.append(c);
    Json::Value d(Json::objectValue);
    d["type"] = "DisruptionTarget";
    d["status"] = "True";
    d["reason"] = "TerminationByKubelet";
    d["message"] = msg;
    d["lastProbeTime"] = Json::Value();
    d["lastTransitionTime"] = rfc3339(now_s);
    conds.append(d);
    s["conditions"] = conds;
    return s;
}

Json::Value job_end_status(const Json::Value &status, const std::string &reason, uint32_t job_id) {
    Json::Value s = api::object(status);
    if (!is_terminal_phase(api::text(s["phase"]))) s["phase"] = "Failed";
    s["reason"] = reason.empty() ? "JobEnded" : reason;
    s["message"] = job_end_message(s["reason"].asString(), job_id);
    return s;
}

std::vector<EventSpec> status_events(const Json::Value &api_pod, const Json::Value &old_status,
                                     const Json::Value &new_status, bool backoff_from_status) {
    std::vector<EventSpec> out;
    api::ObjectMeta md = api::object_meta(api_pod);
    std::string pod_ref = md.name + "_" + md.ns + "(" + md.uid + ")";
    for (const char *list : {"initContainerStatuses", "containerStatuses"}) {
        auto olds = by_key(api::field(old_status, list), "name");
        std::set<std::string> seen;
        for (const auto &cs : api::items(api::field(new_status, list))) {
            std::string name = api::text(api::field(cs, "name"));
            // A name is one container; a repeated one (never from the shim,
            // which refuses duplicate names) is ignored, as by_key does.
            if (!seen.insert(name).second) continue;
            const Json::Value &o = olds[name];
            const Json::Value &o_state = api::field(o, "state");
            std::string fp =
                std::string(list[0] == 'i' ? "spec.initContainers{" : "spec.containers{") + name +
                "}";
            const Json::Value &state = api::field(cs, "state");
            const Json::Value &run = api::field(state, "running");
            // Created then Started, as a kubelet posts them at each (re)start.
            if (run.isObject() &&
                run["startedAt"] != api::field(api::field(o_state, "running"), "startedAt")) {
                out.push_back({"Normal", "Created", "Created container " + name, fp});
                out.push_back({"Normal", "Started", "Started container " + name, fp});
            }
            const Json::Value &w = api::field(state, "waiting");
            std::string wr = api::text(api::field(w, "reason"));
            bool changed = wr != api::text(api::field(api::field(o_state, "waiting"), "reason")) ||
                           api::field(cs, "restartCount") != api::field(o, "restartCount");
            if (wr == "CrashLoopBackOff" && changed && backoff_from_status)
                out.push_back(
                    {"Warning", "BackOff",
                     "Back-off restarting failed container " + name + " in pod " + pod_ref, fp});
            if ((wr == "CreateContainerConfigError" || wr == "CreateContainerError") && changed)
                out.push_back(
                    {"Warning", "Failed", "Error: " + api::text(api::field(w, "message")), fp});
        }
    }
    if (api::text(api::field(new_status, "phase")) == "Failed" &&
        api::text(api::field(old_status, "phase")) != "Failed" &&
        api::object(new_status).isMember("reason") &&
        !api::field(new_status, "containerStatuses").size())
        out.push_back({"Warning", api::text(new_status["reason"]),
                       api::text(api::field(new_status, "message")), ""});
    return out;
}

namespace {

// An Event as the kubelet writes it, about the object `name` in `ns`
// (name <object>.<hex ns>, source kubelet@node, count 1); the caller fills
// involvedObject.
Json::Value kubelet_event(const std::string &name, const Json::Value &ns, const EventSpec &e,
                          const std::string &node_name, int64_t now_us) {
    Json::Value ev(Json::objectValue);
    char hex[32];
    snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(now_us) * 1000ull);
    ev["apiVersion"] = "v1";
    ev["kind"] = "Event";
    ev["metadata"]["name"] = name + "." + hex;
    ev["metadata"]["namespace"] = ns;
    ev["reason"] = e.reason;
    ev["message"] = e.message;
    ev["source"]["component"] = "kubelet";
    ev["source"]["host"] = node_name;
    std::string ts = rfc3339(now_us / 1000000);
    ev["firstTimestamp"] = ts;
    ev["lastTimestamp"] = ts;
    ev["count"] = 1;
    ev["type"] = e.type;
    ev["eventTime"] = Json::Value();
    ev["reportingComponent"] = "kubelet";
    ev["reportingInstance"] = node_name;
    return ev;
}

}  // namespace

Json::Value build_node_event(const std::string &node_name, const EventSpec &e, int64_t now_us) {
    Json::Value ev = kubelet_event(node_name, "default", e, node_name, now_us);
    Json::Value &io = ev["involvedObject"];
    io["kind"] = "Node";
    io["name"] = node_name;
    io["uid"] = node_name;
    return ev;
}

Json::Value build_pod_event(const Json::Value &pod, const EventSpec &e,
                            const std::string &node_name, int64_t now_us) {
    const Json::Value &md = api::field(pod, "metadata");
    Json::Value ev = kubelet_event(api::text(api::field(md, "name")), api::field(md, "namespace"),
                                   e, node_name, now_us);
    Json::Value &io = ev["involvedObject"];
    io["kind"] = "Pod";
    io["namespace"] = api::field(md, "namespace");
    io["name"] = api::field(md, "name");
    io["uid"] = api::field(md, "uid");
    io["apiVersion"] = "v1";
    io["resourceVersion"] = api::field(md, "resourceVersion");
    if (!e.field_path.empty()) io["fieldPath"] = e.field_path;
    return ev;
}

}  // namespace sk::agent
