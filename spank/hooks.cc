// Option table and per-context dispatch. Which hook runs where, as whom, and
// with which environment is in spank/README.md (hook table, Slurm facts).
#include "spank/hooks.h"

#include <string>

#include "spank/hook_util.h"

namespace sk::spank {
namespace {

RawOptions g_raw;

using Field = std::optional<std::string> RawOptions::*;
// Same order as g_options below.
const Field kFields[] = {&RawOptions::gpus,       &RawOptions::nodes,  &RawOptions::cpus,
                         &RawOptions::mem,        &RawOptions::labels, &RawOptions::taints,
                         &RawOptions::namespaces, &RawOptions::wait};

// Option callbacks only record: Slurm may call them twice (environment, then
// command line) and in several processes; validation is in init_post_opt.
int record(int val, const char *optarg, int) noexcept {
    try {
        if (val < 0 || val >= 8) return -1;
        g_raw.*kFields[val] = optarg ? optarg : "";
        return 0;
    } catch (...) {
        return -1;
    }
}

struct spank_option g_options[] = {
    {const_cast<char *>("k8s-gpus"), const_cast<char *>("N|all"),
     const_cast<char *>("Lend N GPUs per node (or all) of this job to Kubernetes."), 1, 0, record},
    {const_cast<char *>("k8s-nodes"), const_cast<char *>("M"),
     const_cast<char *>("Lend the last M nodes of the allocation whole to Kubernetes."), 1, 1,
     record},
    {const_cast<char *>("k8s-cpus"), const_cast<char *>("N"),
     const_cast<char *>("CPUs per node offered to Kubernetes pods."), 1, 2, record},
    {const_cast<char *>("k8s-mem"), const_cast<char *>("SIZE"),
     const_cast<char *>("Memory per node offered to Kubernetes pods (e.g. 16G)."), 1, 3, record},
    {const_cast<char *>("k8s-labels"), const_cast<char *>("k=v[,k=v]"),
     const_cast<char *>("Extra labels on this job's virtual Kubernetes nodes."), 1, 4, record},
    {const_cast<char *>("k8s-taints"), const_cast<char *>("k=v:Effect[,...]"),
     const_cast<char *>("Extra taints on this job's virtual Kubernetes nodes."), 1, 5, record},
    {const_cast<char *>("k8s-namespace"), const_cast<char *>("ns[,ns]"),
     const_cast<char *>("Kubernetes namespaces whose pods may run on this job's nodes."), 1, 6,
     record},
    {const_cast<char *>("k8s-wait"), const_cast<char *>("SECONDS"),
     const_cast<char *>("Start the batch script only once this node's virtual node is Ready."), 2,
     7, record},
    SPANK_OPTIONS_TABLE_END,
};

bool is_extern(spank_t sp) {
    return item_u32(sp, S_JOB_STEPID, 0) == SLURM_EXTERN_CONT;
}

}  // namespace

RawOptions &recorded_options() {
    return g_raw;
}
struct spank_option *option_table() {
    return g_options;
}

// job_prolog: the callbacks never ran in this process, but
// spank_option_getopt works there (spank/README.md, "Slurm facts").
RawOptions options_from_getopt(spank_t sp) {
    RawOptions raw;
    for (int i = 0; g_options[i].name; i++) {
        char *arg = nullptr;
        if (spank_option_getopt(sp, &g_options[i], &arg) == ESPANK_SUCCESS)
            raw.*kFields[i] = arg ? arg : "";
    }
    return raw;
}

// init: registers the options. Failure mode: returning -1 here aborts sbatch
// ("Failed to initialize plugin stack") and, in slurmstepd, the step, so only
// a failed registration does.
int hook_init(spank_t sp, int, char **) noexcept {
    return guarded("init", 0, [&] {
        init_logging();
        for (struct spank_option *o = g_options; o->name; o++) {
            if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
                slurm_error("spank_k8s: cannot register option --%s", o->name);
                return -1;
            }
        }
        return 0;
    });
}

int hook_init_post_opt(spank_t sp, int ac, char **av) noexcept {
    return guarded("init_post_opt", 0, [&] {
        switch (spank_context()) {
            case S_CTX_ALLOCATOR:
            case S_CTX_LOCAL:
                return allocator_init_post_opt(sp, ac, av);
            case S_CTX_REMOTE:
                return is_extern(sp) ? 0 : step_init_post_opt(sp, ac, av);
            default:
                return 0;
        }
    });
}

int hook_job_prolog(spank_t sp, int ac, char **av) noexcept {
    return guarded("prolog", 0, [&] { return prolog(sp, ac, av); });
}

int hook_user_init(spank_t sp, int ac, char **av) noexcept {
    return guarded("user_init", 0, [&] { return is_extern(sp) ? 0 : step_user_init(sp, ac, av); });
}

int hook_task_init(spank_t sp, int ac, char **av) noexcept {
    return guarded("task_init", 0, [&] { return is_extern(sp) ? 0 : step_task_init(sp, ac, av); });
}

int hook_task_post_fork(spank_t sp, int ac, char **av) noexcept {
    return guarded("task_post_fork", 0,
                   [&] { return is_extern(sp) ? extern_task_post_fork(sp, ac, av) : 0; });
}

int hook_job_epilog(spank_t sp, int ac, char **av) noexcept {
    return guarded("epilog", 0, [&] { return epilog(sp, ac, av); });
}

int hook_exit(spank_t sp, int ac, char **av) noexcept {
    return guarded("exit", 0, [&] {
        if (spank_context() == S_CTX_REMOTE && is_extern(sp)) return extern_exit(sp, ac, av);
        return 0;
    });
}

}  // namespace sk::spank
