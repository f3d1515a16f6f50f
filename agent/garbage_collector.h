// What gone jobs leave behind, collected every gc_interval
// (docs/admin-guide.md): the Nodes of this Slurm node's jobs that are no
// longer registered here (with their pods and Leases, and an Event saying
// how the job ended), with gc_failed_nodes also those of other Slurm nodes
// whose agent stopped renewing their Lease, and the files of jobs the agent
// no longer holds (job records, shim dirs, temporary files of dead writers).
// Slurm decides: only a job it says is Gone loses anything, never one it
// cannot tell about. Of the agent it knows one thing, through a narrow
// interface: whether a job is registered here (then its end cleans up).
// The registered jobs' own checks (a deregister that never came, their pods'
// cgroups) stay the Agent's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "agent/controllers/agent_context.h"
#include "agent/core/agent_config.h"
#include "agent/core/job_store.h"
#include "agent/kube/kube_client.h"
#include "agent/core/slurm_jobs.h"

typedef struct uv_loop_s uv_loop_t;

namespace sk::agent {

class GarbageCollector {
  public:
    // registered(job_key): the job is registered here (agent/agent.h job_key).
    using Registered = std::function<bool(const std::string &job_key)>;

    GarbageCollector(AgentContext &ctx, KubeClient &kube, SlurmJobs &slurm, JobStore &store,
                     uv_loop_t *loop, Registered registered);

    // This Slurm node's Nodes whose job is not registered here and is gone.
    void collect_nodes();
    // Other Slurm nodes' Nodes whose Lease lapsed and whose job is gone.
    void collect_failed_nodes();
    // Records, shim dirs and temporary files of jobs gone.
    void collect_files();

  private:
    void post_job_end_event(const std::string &node_name, uint32_t job_id,
                            const std::string &reason);

    AgentContext &ctx_;
    KubeClient &kube_;
    SlurmJobs &slurm_;
    JobStore &store_;
    uv_loop_t *loop_;
    Registered registered_;
};

// Unmounts a gone job's pods' memory volumes (agent/pod_tmpfs.h), then removes
// its shim state dir and its podman run dir, each as its
// owner (rm -rf, again in a user namespace mapping the owner's subordinate
// ids when rootless podman's files need it); best effort, logged.
void remove_job_dirs(uv_loop_t *loop, const std::string &state_dir, uint32_t job_id,
                     const std::string &slurm_node);

}  // namespace sk::agent
