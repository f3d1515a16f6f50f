#include "common/daemons/pod_loss.h"

namespace sk {

Json::Value lost_pod_status(const Json::Value &status, const PodLoss &loss) {
    Json::Value s = status.isObject() ? status : Json::Value(Json::objectValue);
    s["phase"] = "Failed";
    s["reason"] = loss.reason;
    s["message"] = loss.message;
    for (const char *list : {"initContainerStatuses", "containerStatuses"}) {
        if (!s.isMember(list)) continue;
        for (auto &cs : s[list]) {
            if (!cs.isObject()) continue;
            cs["ready"] = false;
            if (cs.isMember("started") && cs["started"].isBool()) cs["started"] = false;
            const Json::Value &state =
                cs.isMember("state") ? cs["state"] : Json::Value::nullSingleton();
            if (!state.isObject() || !state.isMember("running")) continue;
            Json::Value t(Json::objectValue);
            t["exitCode"] = 137;
            t["reason"] = loss.container_reason;
            t["message"] = loss.container_message;
            const Json::Value &running = state["running"];
            t["startedAt"] =
                running.isObject() ? running.get("startedAt", Json::Value()) : Json::Value();
            t["finishedAt"] = loss.finished_at;
            if (cs.isMember("containerID")) t["containerID"] = cs["containerID"];
            cs["state"] = Json::Value(Json::objectValue);
            cs["state"]["terminated"] = t;
        }
    }
    if (s.isMember("conditions")) {
        for (auto &c : s["conditions"]) {
            if (!c.isObject()) continue;
            std::string t = c.get("type", "").asString();
            if (t == "Ready" || t == "ContainersReady") c["status"] = "False";
        }
    }
    return s;
}

}  // namespace sk
