// First cut of the hooks: registers the --k8s-* options so that they show in
// `sbatch --help` and are accepted as #SBATCH lines; later hooks only log.
// The policy, the prolog/epilog registration and the extern-step shim are
// built on this (issue: the SPANK plugin).
#include "spank/hooks.h"

#include <string>

#include "common/log.h"

namespace sk::spank {
namespace {

struct RawOptions {
    std::string gpus, nodes, cpus, mem, labels, taints, namespaces, wait;
};
RawOptions g_raw;

// Option callbacks only record: Slurm may call them twice (environment, then
// command line) and in several processes; validation is in init_post_opt.
int record(std::string *dst, const char *optarg) noexcept {
    try {
        *dst = optarg ? optarg : "";
        return 0;
    } catch (...) {
        return -1;
    }
}

int cb_gpus(int, const char *a, int) { return record(&g_raw.gpus, a); }
int cb_nodes(int, const char *a, int) { return record(&g_raw.nodes, a); }
int cb_cpus(int, const char *a, int) { return record(&g_raw.cpus, a); }
int cb_mem(int, const char *a, int) { return record(&g_raw.mem, a); }
int cb_labels(int, const char *a, int) { return record(&g_raw.labels, a); }
int cb_taints(int, const char *a, int) { return record(&g_raw.taints, a); }
int cb_namespace(int, const char *a, int) { return record(&g_raw.namespaces, a); }
int cb_wait(int, const char *a, int) { return record(&g_raw.wait, a ? a : "default"); }

struct spank_option g_options[] = {
    {const_cast<char *>("k8s-gpus"), const_cast<char *>("N|all"),
     const_cast<char *>("Lend N GPUs per node (or all) of this job to Kubernetes."), 1, 0, cb_gpus},
    {const_cast<char *>("k8s-nodes"), const_cast<char *>("M"),
     const_cast<char *>("Lend the last M nodes of the allocation whole to Kubernetes."), 1, 0, cb_nodes},
    {const_cast<char *>("k8s-cpus"), const_cast<char *>("N"),
     const_cast<char *>("CPUs per node offered to Kubernetes pods."), 1, 0, cb_cpus},
    {const_cast<char *>("k8s-mem"), const_cast<char *>("SIZE"),
     const_cast<char *>("Memory per node offered to Kubernetes pods (e.g. 16G)."), 1, 0, cb_mem},
    {const_cast<char *>("k8s-labels"), const_cast<char *>("k=v[,k=v]"),
     const_cast<char *>("Extra labels on this job's virtual Kubernetes nodes."), 1, 0, cb_labels},
    {const_cast<char *>("k8s-taints"), const_cast<char *>("k=v:Effect[,...]"),
     const_cast<char *>("Extra taints on this job's virtual Kubernetes nodes."), 1, 0, cb_taints},
    {const_cast<char *>("k8s-namespace"), const_cast<char *>("ns[,ns]"),
     const_cast<char *>("Kubernetes namespaces whose pods may run on this job's nodes."), 1, 0,
     cb_namespace},
    {const_cast<char *>("k8s-wait"), const_cast<char *>("SECONDS"),
     const_cast<char *>("Start the batch script only once this node's virtual node is Ready."), 2,
     0, cb_wait},
    SPANK_OPTIONS_TABLE_END,
};

}  // namespace

// init: registers the options. Failure mode: returning -1 here aborts sbatch
// ("Failed to initialize plugin stack"), so only a failed registration does.
int hook_init(spank_t sp, int, char **) noexcept {
    for (struct spank_option *o = g_options; o->name; o++) {
        if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
            slurm_error("spank_k8s: cannot register option --%s", o->name);
            return -1;
        }
    }
    return 0;
}

int hook_init_post_opt(spank_t, int, char **) noexcept { return 0; }
int hook_job_prolog(spank_t, int, char **) noexcept { return 0; }
int hook_user_init(spank_t, int, char **) noexcept { return 0; }
int hook_task_init(spank_t, int, char **) noexcept { return 0; }
int hook_task_post_fork(spank_t, int, char **) noexcept { return 0; }
int hook_job_epilog(spank_t, int, char **) noexcept { return 0; }
int hook_exit(spank_t, int, char **) noexcept { return 0; }

}  // namespace sk::spank
