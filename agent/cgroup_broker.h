// The pods' cgroups, made by root for a job's shim (which runs as the job's
// user and may not make them): a container's supervisor asks to enter its
// container's cgroup before it starts the container's command (op
// cgroup_enter, k8s-shim/supervise.h; the agent finds the job whose attached
// shim is the asker's parent), the broker checks the pod and its GPUs
// against the job, sets the limits a kubelet would set (pod_cgroup_limits)
// and moves the process; sweep() removes the cgroups of pods that are gone.
// Every path is common/cgroup/'s. Of the agent it knows only the virtual
// node it is handed.
#pragma once

#include <string>
#include <vector>

#include <json/json.h>

#include "agent/controllers/virtual_node.h"
#include "agent/core/agent_config.h"
#include "common/cgroup/pod_cgroup.h"
#include "common/daemons/protocol.h"
#include "common/result.h"

namespace sk::agent {

// Pure: the limits of a pod's cgroup and of its container's, from the pod's
// spec and what the job lends the node, as the kubelet sets them: memory from
// the pod's limits (else the job's lent memory), CPU quota from its limits
// (else the job's lent CPUs: a pod without a limit cannot take the trainer's),
// shares from its requests, pids.max from the agent's pod_pids_max; the
// container's own memory and CPU limits; all pods together held to what the
// job lends. The devices (deny, gpus) are left to the caller. NotFound when
// the spec names no container `container`.
Result<PodCgroupSettings> pod_cgroup_limits(const Json::Value &spec, const std::string &container,
                                            const proto::RegisterRequest &job, uint64_t pids_max);

class CgroupBroker {
  public:
    explicit CgroupBroker(const AgentConfig &cfg) : cfg_(cfg) {}
    // Moves pid (a container supervisor of vn's attached shim, checked by the
    // caller) into the cgroup of its pod's container `m.container`, after
    // checking that the pod runs on vn and that m.gpus are lent there, and
    // sweeping the cgroups of pods gone. The failure says what to refuse.
    Status enter(const VirtualNode &vn, int pid, const proto::CgroupEnter &m);
    // Removes the cgroups of vn's pods that hold no process any more (a pod
    // the shim still runs keeps its directory between its containers' runs).
    void sweep(const VirtualNode &vn);
    // The cgroup parents of the pods of job_id's shim shim_pid (one per
    // hierarchy: Slurm's extern step, and the project's own tree on v1 where
    // Slurm makes no job directory); fails when pods get no cgroup of their
    // own on this node (why, for the log).
    Result<std::vector<PodCgroupParent>> parents(int shim_pid, uint32_t job_id) const;

  private:
    const AgentConfig &cfg_;
};

}  // namespace sk::agent
