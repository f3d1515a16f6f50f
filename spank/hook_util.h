// Helpers shared by the hook adapters (the only files that include spank.h):
// logging into Slurm's log, item and environment access.
#pragma once

extern "C" {
#include <slurm/spank.h>
#include <slurm/slurm.h>
}

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "spank/hooks.h"
#include "spank/options.h"
#include "spank/plugstack.h"

namespace sk::spank {

// Routes sk::log lines to slurm_error/slurm_info/slurm_verbose with the
// "spank_k8s: " prefix. Idempotent.
void init_logging() noexcept;

Result<PlugConfig> plugstack(int ac, char **av, const char *hook);
uint32_t item_u32(spank_t sp, spank_item_t item, uint32_t dflt);
std::string env_or(const char *name, const std::string &dflt = {});
// spank_getenv with a fallback on the process environment (slurmstepd's own
// environ holds SLURMD_NODENAME in the batch step before task_init).
std::string step_env(spank_t sp, const char *name);
std::string node_name_here(spank_t sp);

// The hooks per context (each file documents its failure modes).
int allocator_init_post_opt(spank_t sp, int ac, char **av);
int prolog(spank_t sp, int ac, char **av);
int epilog(spank_t sp, int ac, char **av);
int extern_task_post_fork(spank_t sp, int ac, char **av);
int extern_exit(spank_t sp, int ac, char **av);
int step_init_post_opt(spank_t sp, int ac, char **av);
int step_user_init(spank_t sp, int ac, char **av);
int step_task_init(spank_t sp, int ac, char **av);
int step_task_post_fork(spank_t sp, int ac, char **av);

// Slurm's record of the job as slurmctld holds it, through the Slurm API of
// the process the plugin runs in (slurmstepd and slurmd carry libslurmfull;
// slurm_load_job is found with dlsym, so the module still loads where it is
// absent). Unlike squeue's %T, which prints COMPLETING for every job that is
// ending, the raw state keeps the base state (CANCELLED, TIMEOUT, ...) under
// the COMPLETING flag. known = false when it could not be asked (no API,
// slurmctld unreachable: bounded by slurm.conf's MessageTimeout).
struct SlurmJobNow {
    bool known = false;
    uint32_t base = 0;  // enum job_states
    bool completing = false;
    bool requeued = false;  // JOB_REQUEUE (scontrol requeue, --requeue after a failure)
};
SlurmJobNow slurm_job_now(uint32_t job_id);
// What the prolog reads from the job's record (one slurm_load_job with
// SHOW_DETAIL): the Slurm GPU type (gres.conf Type=, e.g. "a100") all `lent`
// GPUs on `node` share ("" when untyped, mixed or none lent), and the job's
// array task / het component ids (0 when it is none), and the CPUs and
// memory it holds on `node` (slurm_job_cpus_allocated_on_node; pn_min_memory,
// per CPU when Slurm says so). All empty when slurmctld could not be asked.
struct SlurmJobFacts {
    std::string gpu_type;
    uint32_t array_job_id = 0, array_task_id = 0;
    uint32_t het_job_id = 0, het_offset = 0;
    NodeShare held;
};
SlurmJobFacts slurm_job_facts(uint32_t job_id, const std::string &node,
                              const std::vector<int> &lent);
// Whether the job still runs: now's answer (slurm_job_now), else squeue's
// (RUNNING) when the API could not tell.
bool slurm_job_running(const SlurmJobNow &now, uint32_t job_id, int squeue_timeout_ms);
// The deregister reason (common/wire.h) for a job that is ending, from its
// state `now`: JobCompleted, JobFailed, JobCancelled, TimeLimit, NodeFail,
// Preempted, Requeued, or JobEnded when Slurm could not be asked or its
// state says nothing more.
const char *job_end_reason(const SlurmJobNow &now);
inline const char *job_end_reason(uint32_t job_id) {
    return job_end_reason(slurm_job_now(job_id));
}

// Logs (Slurm debug level) how long a hook took on the calling process's
// path: the job start overhead of the plugin is the sum of these
// (bench/bench_slurm_start.py reads them from slurmd's log).
void log_hook_time(const char *hook, int64_t start_ns) noexcept;
int64_t monotonic_ns() noexcept;

// Runs fn, turning any exception into a log line and `on_exception`.
template <typename F>
int guarded(const char *hook, int on_exception, F fn) noexcept {
    const int64_t t0 = monotonic_ns();
    try {
        int rc = fn();
        log_hook_time(hook, t0);
        return rc;
    } catch (const std::exception &e) {
        slurm_error("spank_k8s: %s: internal error: %s", hook, e.what());
    } catch (...) {
        slurm_error("spank_k8s: %s: internal error", hook);
    }
    return on_exception;
}

}  // namespace sk::spank
