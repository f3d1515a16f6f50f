// What the controllers of every virtual node share: the timers, the API
// client, the configuration, the clock, the job store, the host's facts and
// the optional log index, event correlator, metrics and end-time query.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "agent/controllers/event_correlator.h"
#include "agent/controllers/node_builder.h"
#include "agent/core/agent_config.h"
#include "agent/core/clock.h"
#include "agent/core/job_store.h"
#include "agent/core/observer.h"
#include "agent/core/pod_mounts.h"
#include "agent/core/pod_networks.h"
#include "agent/core/slurm_jobs.h"
#include "agent/core/timer_source.h"
#include "agent/kube/kube_client.h"
#include "agent/kubelet/log_index.h"
#include "common/rfc3339.h"

namespace sk::agent {

struct AgentContext {
    // Every timer and deferred call of the controllers (the loop's, or a
    // test's virtual clock: then `clock` is that source's clock too).
    TimerSource *timers = nullptr;
    // The API as this virtual node: its own identity (system:node:<node>,
    // agent/controllers/node_identity.h) or, with node_identity = agent, the agent's.
    KubeClient *kube = nullptr;
    // The agent's own identity, for what a node identity may not do (the
    // Node's taints, deleting the Node, sending the node's CSRs); null = kube.
    KubeClient *agent_kube = nullptr;
    KubeClient &agent_api() const { return agent_kube ? *agent_kube : *kube; }
    const AgentConfig *cfg = nullptr;
    const Clock *clock = nullptr;
    JobStore *store = nullptr;
    NodeSpecInput host;  // host facts; node_name/job filled per node
    // Optional (tests may leave them null/empty):
    LogIndex *logs = nullptr;            // what the kubelet endpoint serves
    EventCorrelator *events = nullptr;   // event de-duplication (count + lastTimestamp)
    const AgentObserver *obs = nullptr;  // metrics
    // What Slurm says of a job: its end time and whether it is suspended
    // (the node-lease controller follows both); null: nothing is asked.
    SlurmJobs *slurm = nullptr;
    // The node mounts of pods' volumes (emptyDir medium Memory); null: such
    // a volume is a directory like any emptyDir.
    PodMounts *mounts = nullptr;
    // Each pod's own network (agent.conf pod_network = cni); null: pods
    // share the node's.
    PodNetworks *networks = nullptr;
};

// The per-job state dir handed to the shim at attach (logs live below it).
std::string shim_state_dir_for(const AgentConfig &cfg, uint32_t job_id,
                               const std::string &slurm_node);
// "job_<id>_<node>": the job's name in what the agent makes for it (its
// shim state dir, its pods' tmpfs sources).
std::string job_tag_for(uint32_t job_id, const std::string &slurm_node);

}  // namespace sk::agent
