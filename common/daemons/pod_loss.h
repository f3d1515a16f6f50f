// The final status of a pod whose pod runner is gone: the agent writes it
// when a job's shim died (agent/controllers/lost_shim.h), a restarted shim when it finds
// the pods of its predecessor (k8s-shim/shim.h). Both must leave a pod that
// the API server, kubectl and controllers read as failed and not serving.
#pragma once

#include <string>

#include <json/json.h>

namespace sk {

struct PodLoss {
    std::string reason;             // status.reason ("ShimLost", "ShimRestarted")
    std::string message;            // status.message
    std::string container_reason;   // terminated.reason of the containers that were running
    std::string container_message;  // terminated.message of those
    std::string finished_at;        // RFC 3339: terminated.finishedAt of those
};

// `status` (a pod status object; anything else counts as an empty one) made
// final: phase Failed with loss.reason and loss.message; every init and app
// container that was running becomes terminated (exit code 137, the loss's
// container reason and message, its startedAt and containerID kept); no
// container is ready or started any more (a `started` field is set false
// where present); the Ready and ContainersReady conditions become False. A
// list or conditions array that was absent stays absent; containers that had
// finished keep their own result.
Json::Value lost_pod_status(const Json::Value &status, const PodLoss &loss);

}  // namespace sk
