// Which log files `kubectl logs NS/POD -c C [-p]` reads (common/daemons/log_paths.h): a
// mutex-protected snapshot of the pods the agent runs, written by the loop
// thread from the shim's pod_status notifications and read by the kubelet
// endpoint's HTTP threads through resolve(). Pure apart from the directory
// listing in container_log_files().
#pragma once

#include <map>
#include <mutex>
#include <string>

#include <json/json.h>

#include "agent/kubelet/kubelet_server.h"
#include "common/result.h"

namespace sk::agent {

class LogIndex {
  public:
    struct ContainerLogState {
        int restart_count = 0;
        bool running = false;
        std::string waiting_reason;  // "" unless waiting
    };
    struct PodLogs {
        std::string uid;
        std::string state_dir;  // the job's shim state dir (<state_dir>/pods/<uid>/...)
        std::map<std::string, ContainerLogState> containers;
    };

    // From a PodStatus the runtime reported: restartCount and running per
    // container (init containers included). Replaces what was known.
    void update(const std::string &ns, const std::string &name, const std::string &uid,
                const std::string &state_dir, const Json::Value &pod_status);
    // Forgets the pod when it is still this uid (a newer pod may reuse the name).
    void remove(const std::string &ns, const std::string &name, const std::string &uid);
    size_t size() const;

    // Thread-safe. NotFound for an unknown pod, InvalidArgument for a
    // container the pod does not have or one that has not started yet (the
    // kubelet's 400s), NotFound with kubectl's wording for a missing --previous.
    Result<ContainerLogSource> resolve(const ContainerLogRef &ref) const;

    // Thread-safe: whether a command can run in the container now (the
    // kubelet endpoint's /exec, before its upgrade). NotFound for an unknown
    // pod or container, InvalidArgument for one that is not running.
    // container "" (port-forward): the pod alone. With a state_dir, a pod
    // of another job (another virtual node's endpoint) is NotFound too.
    Status exec_check(const std::string &ns, const std::string &pod, const std::string &container,
                      const std::string &state_dir = "") const;

  private:
    mutable std::mutex mu_;
    std::map<std::string, PodLogs> pods_;  // by "ns/name"
};

}  // namespace sk::agent
