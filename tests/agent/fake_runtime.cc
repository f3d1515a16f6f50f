#include "tests/agent/fake_runtime.h"

#include "common/rfc3339.h"

namespace sk::agent {
namespace {

Json::Value cond(const char *type, bool ok, const std::string &reason, const std::string &msg,
                 const std::string &ts) {
    Json::Value c(Json::objectValue);
    c["type"] = type;
    c["status"] = ok ? "True" : "False";
    c["lastProbeTime"] = Json::Value();
    c["lastTransitionTime"] = ts;
    if (!ok && !reason.empty()) {
        c["reason"] = reason;
        c["message"] = msg;
    }
    return c;
}

std::string names(const Json::Value &pod) {
    std::string s;
    for (const auto &c : pod["spec"]["containers"])
        s += (s.empty() ? "" : " ") + c["name"].asString();
    return s;
}

}  // namespace

Json::Value FakeRuntime::running_status(const Json::Value &pod, int64_t now_s) {
    std::string ts = rfc3339(now_s);
    Json::Value s(Json::objectValue);
    s["phase"] = "Running";
    s["startTime"] = ts;
    s["conditions"].append(cond("Initialized", true, "", "", ts));
    s["conditions"].append(cond("Ready", true, "", "", ts));
    s["conditions"].append(cond("ContainersReady", true, "", "", ts));
    std::string uid = pod["metadata"]["uid"].asString();
    for (const auto &c : pod["spec"]["containers"]) {
        Json::Value cs(Json::objectValue);
        cs["name"] = c["name"];
        cs["state"]["running"]["startedAt"] = ts;
        cs["lastState"] = Json::Value(Json::objectValue);
        cs["ready"] = true;
        cs["started"] = true;
        cs["restartCount"] = 0;
        cs["image"] = c["image"];
        cs["imageID"] = "";
        cs["containerID"] = "slurm-k8s://" + uid + "/" + c["name"].asString() + "/0";
        s["containerStatuses"].append(cs);
    }
    return s;
}

Json::Value FakeRuntime::terminated_status(const Json::Value &pod, const Json::Value &prev,
                                           int exit_code, int64_t now_s) {
    std::string ts = rfc3339(now_s);
    Json::Value s = prev.isObject() ? prev : running_status(pod, now_s);
    const char *reason = exit_code == 0 ? "PodCompleted" : "PodFailed";
    s["phase"] = exit_code == 0 ? "Succeeded" : "Failed";
    s["conditions"] = Json::Value(Json::arrayValue);
    Json::Value init = cond("Initialized", true, "", "", ts);
    if (exit_code == 0) init["reason"] = reason;  // the kubelet's Succeeded shape
    s["conditions"].append(init);
    s["conditions"].append(cond("Ready", false, reason, "", ts));
    s["conditions"].append(cond("ContainersReady", false, reason, "", ts));
    for (auto &c : s["conditions"])
        c.removeMember("message");
    (void)names;
    for (auto &cs : s["containerStatuses"]) {
        std::string started = cs["state"]["running"]["startedAt"].asString();
        cs["state"] = Json::Value(Json::objectValue);
        Json::Value &t = cs["state"]["terminated"];
        t["exitCode"] = exit_code;
        t["reason"] = exit_code == 0 ? "Completed" : "Error";
        t["startedAt"] = started.empty() ? ts : started;
        t["finishedAt"] = ts;
        t["containerID"] = cs["containerID"];
        cs["ready"] = false;
        cs["started"] = false;
    }
    return s;
}

void FakeRuntime::emit(const std::string &uid) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    PodSnapshot snap = it->second;
    post_([this, snap] { notify(snap); });
}

void FakeRuntime::run(const proto::PodRun &m, Done done) {
    const Json::Value &pod = m.pod;
    const std::string &uid = m.uid;
    runs_++;
    Status st;
    const Json::Value &ann = pod["metadata"]["annotations"];
    if (uid.empty()) {
        st = fail(Error::Invalid, "pod has no metadata.uid");
    } else if (pods_.count(uid)) {
        // idempotent: nothing to do
    } else if (ann.isMember("slurm-k8s.io/fake-refuse")) {
        st = fail(Error::Refused, ann["slurm-k8s.io/fake-refuse"].asString());
    } else {
        PodSnapshot p;
        p.uid = uid;
        p.ns = pod["metadata"]["namespace"].asString();
        p.name = pod["metadata"]["name"].asString();
        p.status = running_status(pod, now_());
        if (ann.isMember("slurm-k8s.io/fake-exit-code"))
            p.status =
                terminated_status(pod, p.status,
                                  static_cast<int>(std::strtol(
                                      ann["slurm-k8s.io/fake-exit-code"].asCString(), nullptr, 10)),
                                  now_());
        pods_[uid] = p;
        specs_[uid] = pod;
        emit(uid);
    }
    post_([done, st] { done(st); });
}

void FakeRuntime::kill(const std::string &uid, uint32_t grace_s, proto::StopReason why, Done done) {
    std::string reason(proto::to_string(why));
    kills_.push_back({uid, grace_s, reason});
    auto it = pods_.find(uid);
    if (it != pods_.end() && !is_terminal(it->second.status)) {
        it->second.status = terminated_status(specs_[uid], it->second.status, 0, now_());
        emit(uid);
    }
    post_([done] { done(Status()); });
}

void FakeRuntime::snapshot(std::function<void(Result<std::vector<PodSnapshot>>)> done) {
    std::vector<PodSnapshot> out;
    for (const auto &[uid, p] : pods_)
        out.push_back(p);
    post_([done, out] { done(out); });
}

void FakeRuntime::stats(std::function<void(Result<proto::PodStatsReply>)> done) {
    proto::PodStatsReply out;
    int64_t now_ms = now_() * 1000;
    for (const auto &[uid, p] : pods_) {
        if (p.status["phase"].asString() != "Running") continue;
        proto::PodStatsEntry e{uid, p.ns, p.name, now_ms, {}};
        for (const auto &cs : p.status["containerStatuses"])
            if (cs["state"].isMember("running"))
                e.containers.push_back({cs["name"].asString(), now_ms, 0, 0});
        out.pods.push_back(std::move(e));
    }
    post_([done, out] { done(out); });
}

void FakeRuntime::shutdown(uint32_t grace_s, proto::StopReason reason, Done done) {
    shutdowns_.push_back({"", grace_s, std::string(proto::to_string(reason))});
    for (auto &[uid, p] : pods_)
        kill(uid, grace_s, reason, [](const Status &) {});
    post_([done] { done(Status()); });
}

void FakeRuntime::update_files(const proto::PodFilesUpdate &m, Done done) {
    file_updates_.push_back(m);
    done(Status());
}

void FakeRuntime::pause(bool pause, const std::string & /*message*/, Done done) {
    pauses_.push_back(pause);
    post_([done] { done(Status()); });
}

bool FakeRuntime::set_status(const std::string &uid, const Json::Value &status) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return false;
    it->second.status = status;
    emit(uid);
    return true;
}

bool FakeRuntime::is_terminal(const Json::Value &s) {
    std::string p = s["phase"].asString();
    return p == "Succeeded" || p == "Failed";
}

}  // namespace sk::agent
