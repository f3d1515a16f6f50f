#include "k8s-shim/pod_status.h"

#include "common/daemons/pod_loss.h"
#include "common/rfc3339.h"
#include "common/strings.h"

namespace sk::shim {

namespace {

bool succeeded(const ContainerRun &c) {
    return c.state == CState::Terminated && c.terminated && c.terminated->exit_code == 0;
}

// An init container's part is done: a regular one succeeded, a sidecar
// started once.
bool init_passed(const ContainerPlan &p, const ContainerRun &c) {
    return p.sidecar ? c.init_passed : succeeded(c);
}

bool init_done(const PodPlan &plan, const PodRun &run) {
    for (size_t i = 0; i < run.init.size(); i++)
        if (!init_passed(plan.init_containers[i], run.init[i])) return false;
    return true;
}

Json::Value termination_json(const Termination &t) {
    Json::Value v(Json::objectValue);
    v["exitCode"] = t.exit_code;
    v["reason"] = t.reason;
    if (!t.message.empty()) v["message"] = t.message;
    v["startedAt"] = rfc3339(t.started_ms / 1000);
    v["finishedAt"] = rfc3339(t.finished_ms / 1000);
    v["containerID"] = t.container_id;
    return v;
}

Json::Value container_json(const ContainerPlan &p, const ContainerRun &c,
                           const std::string &default_waiting) {
    Json::Value v(Json::objectValue);
    v["name"] = p.name;
    Json::Value state(Json::objectValue);
    switch (c.state) {
        case CState::Waiting: {
            Json::Value w(Json::objectValue);
            w["reason"] = c.waiting_reason.empty() ? default_waiting : c.waiting_reason;
            if (!c.waiting_message.empty()) w["message"] = c.waiting_message;
            state["waiting"] = w;
            break;
        }
        case CState::Running:
            state["running"]["startedAt"] = rfc3339(c.started_ms / 1000);
            break;
        case CState::Terminated:
            if (c.terminated) state["terminated"] = termination_json(*c.terminated);
            break;
    }
    v["state"] = state;
    Json::Value last(Json::objectValue);
    if (c.last) last["terminated"] = termination_json(*c.last);
    v["lastState"] = last;
    // An init container that completed is ready (reference 07-init-containers).
    v["ready"] = c.ready || (p.init && !p.sidecar && succeeded(c));
    v["restartCount"] = c.restart_count;
    v["image"] = p.image;
    v["imageID"] = c.ever_started ? p.image : "";
    if (!c.container_id.empty()) v["containerID"] = c.container_id;
    v["started"] = c.started;
    return v;
}

Json::Value condition(const std::string &type, bool status, const std::string &reason,
                      const std::string &message, const Json::Value &prev, int64_t now_ms) {
    Json::Value c(Json::objectValue);
    c["type"] = type;
    c["status"] = status ? "True" : "False";
    c["lastProbeTime"] = Json::Value();
    std::string when = rfc3339(now_ms / 1000);
    for (const auto &pc : prev["conditions"])
        if (pc["type"].asString() == type && pc["status"].asString() == c["status"].asString())
            when = pc["lastTransitionTime"].asString();
    c["lastTransitionTime"] = when;
    if (!reason.empty()) c["reason"] = reason;
    if (!message.empty()) c["message"] = message;
    return c;
}

std::string names_list(const std::vector<std::string> &names) {
    return "[" + join(names, " ") + "]";
}

}  // namespace

std::string container_id(const std::string &uid, const std::string &name, int n) {
    return "slurm-k8s://" + uid + "/" + name + "/" + std::to_string(n);
}

std::string pod_phase(const PodPlan &plan, const PodRun &run) {
    if (run.failed || run.deadline_exceeded) return "Failed";
    bool any_running = false;
    for (const auto &c : run.init)
        any_running |= c.state == CState::Running;
    for (const auto &c : run.app)
        any_running |= c.state == CState::Running;
    if (!init_done(plan, run)) {
        for (size_t i = 0; i < run.init.size(); i++) {
            const ContainerRun &c = run.init[i];
            if (!plan.init_containers[i].sidecar && c.state == CState::Terminated &&
                !succeeded(c) && plan.restart_policy == RestartPolicy::Never)
                return "Failed";
        }
        if (run.stopping && !any_running) return "Failed";
        return "Pending";
    }
    int running = 0, waiting = 0, stopped = 0, ok = 0;
    for (const auto &c : run.app) {
        if (c.state == CState::Running) {
            running++;
        } else if (c.state == CState::Terminated) {
            stopped++;
            ok += succeeded(c);
        } else if (c.last) {
            stopped++;
            ok += c.last->exit_code == 0;
        } else {
            waiting++;
        }
    }
    if (run.stopping && running == 0) {
        // Killed pods end Succeeded only when every container exited 0 (s02, s05).
        for (const auto &c : run.app)
            if (!succeeded(c)) return "Failed";
        return "Succeeded";
    }
    if (waiting > 0) return "Pending";
    if (running > 0) return "Running";
    if (plan.restart_policy == RestartPolicy::Always) return "Running";
    if (stopped == ok) return "Succeeded";
    if (plan.restart_policy == RestartPolicy::Never) return "Failed";
    return "Running";
}

bool pod_finished(const PodPlan &plan, const PodRun &run) {
    if (run.failed) return true;
    for (const auto &c : run.init)
        if (c.state == CState::Running) return false;
    for (const auto &c : run.app)
        if (c.state == CState::Running) return false;
    std::string phase = pod_phase(plan, run);
    if (phase != "Succeeded" && phase != "Failed") return false;
    if (run.stopping) return true;
    // Not stopping: Failed/Succeeded is final only when nothing will restart
    // (a failed init container under Never leaves the app containers unstarted).
    if (!init_done(plan, run)) return true;
    for (const auto &c : run.app)
        if (c.state == CState::Waiting) return false;
    return true;
}

Json::Value refused_pod_status(const std::string &reason, const std::string &message,
                               int64_t now_ms) {
    Json::Value s(Json::objectValue);
    s["phase"] = "Failed";
    s["reason"] = reason;
    s["message"] = message;
    s["startTime"] = rfc3339(now_ms / 1000);
    return s;
}

Json::Value restarted_pod_status(const Json::Value &status, bool processes_stopped,
                                 int64_t now_ms) {
    std::string msg =
        "the slurm-k8s-shim of this job restarted and could not re-attach to "
        "the pod's processes" +
        std::string(processes_stopped ? "; they were stopped" : "");
    return lost_pod_status(status,
                           PodLoss{"ShimRestarted", msg, "ContainerStatusUnknown",
                                   "The container could not be located when the shim restarted",
                                   rfc3339(now_ms / 1000)});
}

std::string termination_message_from_log(const std::string &tail) {
    std::string s = tail.size() > kMaxTerminationMessageLogBytes
                        ? tail.substr(tail.size() - kMaxTerminationMessageLogBytes)
                        : tail;
    // The last lines: the newline before the last kMaxTerminationMessageLogLines
    // (a final newline belongs to the last line).
    size_t end_at = s.size();
    if (end_at && s[end_at - 1] == '\n') end_at--;
    size_t lines = 0;
    for (size_t i = end_at; i-- > 0;)
        if (s[i] == '\n' && ++lines == kMaxTerminationMessageLogLines) {
            s = s.substr(i + 1);
            break;
        }
    return s;
}

void cap_termination_messages(Json::Value *status) {
    std::vector<Json::Value *> msgs;
    size_t total = 0;
    for (const char *list : {"initContainerStatuses", "containerStatuses"}) {
        if (!status->isMember(list) || !(*status)[list].isArray()) continue;
        for (auto &cs : (*status)[list])
            for (const char *which : {"state", "lastState"}) {
                // Looked up without operator[] on a missing member: that
                // would add a null (a "lastState": null in the patch).
                if (!cs.isObject() || !cs.isMember(which) || !cs[which].isObject() ||
                    !cs[which].isMember("terminated"))
                    continue;
                Json::Value &t = cs[which]["terminated"];
                if (!t.isObject() || !t.isMember("message") || !t["message"].isString()) continue;
                msgs.push_back(&t["message"]);
                total += t["message"].asString().size();
            }
    }
    if (total <= kMaxPodTerminationMessageBytes || msgs.empty()) return;
    // Evenly: each message keeps at most its share, its last bytes (where
    // what went wrong is), cut at the start of a UTF-8 character.
    size_t share = kMaxPodTerminationMessageBytes / msgs.size();
    for (Json::Value *m : msgs) {
        std::string s = m->asString();
        if (s.size() <= share) continue;
        size_t from = s.size() - share;
        while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80)
            from++;
        *m = s.substr(from);
    }
}

Json::Value build_pod_status(const PodPlan &plan, const PodRun &run, const Json::Value &prev,
                             int64_t now_ms) {
    if (run.failed && run.app.empty()) {
        Json::Value s = refused_pod_status(run.reason, run.message, run.start_ms);
        return s;
    }
    Json::Value s(Json::objectValue);
    std::string phase = pod_phase(plan, run);
    s["phase"] = phase;

    std::vector<std::string> incomplete, unready;
    for (size_t i = 0; i < run.init.size(); i++) {
        if (!init_passed(plan.init_containers[i], run.init[i]))
            incomplete.push_back(plan.init_containers[i].name);
        // A sidecar's readiness is the pod's too.
        else if (plan.init_containers[i].sidecar && !run.init[i].ready)
            unready.push_back(plan.init_containers[i].name);
    }
    for (size_t i = 0; i < run.app.size(); i++)
        if (!run.app[i].ready) unready.push_back(plan.containers[i].name);

    Json::Value conds(Json::arrayValue);
    if (phase == "Succeeded") {
        conds.append(condition("Initialized", true, "PodCompleted", "", prev, now_ms));
        conds.append(condition("Ready", false, "PodCompleted", "", prev, now_ms));
        conds.append(condition("ContainersReady", false, "PodCompleted", "", prev, now_ms));
    } else {
        bool initialized = incomplete.empty();
        conds.append(condition(
            "Initialized", initialized, initialized ? "" : "ContainersNotInitialized",
            initialized ? "" : "containers with incomplete status: " + names_list(incomplete), prev,
            now_ms));
        bool ready = unready.empty() && phase != "Failed" && !run.paused;
        std::string reason = phase == "Failed" ? "PodFailed"
                             : run.paused      ? "JobSuspended"
                             : ready           ? ""
                                               : "ContainersNotReady";
        std::string msg = phase == "Failed" || ready ? ""
                          : run.paused               ? run.paused_message
                                       : "containers with unready status: " + names_list(unready);
        if (!ready && !run.paused && phase != "Failed")
            for (size_t i = 0; i < run.app.size(); i++)
                if (!run.app[i].ready && !run.app[i].unready_note.empty())
                    msg += "; " + plan.containers[i].name + ": " + run.app[i].unready_note;
        conds.append(condition("Ready", ready, reason, msg, prev, now_ms));
        conds.append(condition("ContainersReady", ready, reason, msg, prev, now_ms));
    }
    s["conditions"] = conds;
    s["startTime"] = rfc3339(run.start_ms / 1000);
    if (!run.reason.empty()) {
        s["reason"] = run.reason;
        s["message"] = run.message;
    }
    if (!plan.init_containers.empty()) {
        Json::Value a(Json::arrayValue);
        for (size_t i = 0; i < run.init.size(); i++)
            a.append(container_json(plan.init_containers[i], run.init[i], "PodInitializing"));
        s["initContainerStatuses"] = a;
    }
    std::string app_waiting = init_done(plan, run) ? "ContainerCreating" : "PodInitializing";
    Json::Value a(Json::arrayValue);
    for (size_t i = 0; i < run.app.size(); i++)
        a.append(container_json(plan.containers[i], run.app[i], app_waiting));
    s["containerStatuses"] = a;
    cap_termination_messages(&s);
    return s;
}

}  // namespace sk::shim
