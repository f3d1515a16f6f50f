// The --k8s-* flags in Slurm's form (registered from flag_table(),
// spank/options.h) and per-context dispatch. Which hook runs where, as whom,
// and with which environment is in spank/README.md (hook table, Slurm facts).
#include "spank/hooks.h"

#include <string>
#include <vector>

#include "spank/hook_util.h"

namespace sk::spank {
namespace {

RawOptions g_raw;

// Option callbacks only record: Slurm may call them twice (environment, then
// command line) and in several processes; validation is in init_post_opt.
// val is the row of flag_table() (slurm_options()).
int record(int val, const char *optarg, int) noexcept {
    try {
        const FlagTable flags = flag_table();
        if (val < 0 || static_cast<size_t>(val) >= flags.size) return -1;
        g_raw.*flags[val].raw = optarg ? optarg : "";
        return 0;
    } catch (...) {
        return -1;
    }
}

// flag_table() in Slurm's form, row i with val i. Built once and never
// changed: Slurm may keep pointers into it.
std::vector<struct spank_option> &slurm_options() {
    static std::vector<struct spank_option> options = [] {
        std::vector<struct spank_option> out;
        const FlagTable flags = flag_table();
        for (size_t i = 0; i < flags.size; i++)
            out.push_back({const_cast<char *>(flags[i].name), const_cast<char *>(flags[i].arginfo),
                           const_cast<char *>(flags[i].usage), flags[i].has_arg,
                           static_cast<int>(i), record});
        return out;
    }();
    return options;
}

bool is_extern(spank_t sp) {
    return item_u32(sp, S_JOB_STEPID, 0) == SLURM_EXTERN_CONT;
}

}  // namespace

RawOptions &recorded_options() {
    return g_raw;
}

// job_prolog: the callbacks never ran in this process, but
// spank_option_getopt works there (spank/README.md, "Slurm facts").
RawOptions options_from_getopt(spank_t sp) {
    RawOptions raw;
    const FlagTable flags = flag_table();
    auto &options = slurm_options();
    for (size_t i = 0; i < flags.size; i++) {
        char *arg = nullptr;
        if (spank_option_getopt(sp, &options[i], &arg) == ESPANK_SUCCESS)
            raw.*flags[i].raw = arg ? arg : "";
    }
    return raw;
}

// init: registers the options. Failure mode: returning -1 here aborts sbatch
// ("Failed to initialize plugin stack") and, in slurmstepd, the step, so only
// a failed registration does.
int hook_init(spank_t sp, int, char **) noexcept {
    return guarded("init", 0, [&] {
        init_logging();
        for (struct spank_option &o : slurm_options()) {
            if (spank_option_register(sp, &o) != ESPANK_SUCCESS) {
                slurm_error("spank_k8s: cannot register option --%s", o.name);
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
    return guarded("task_post_fork", 0, [&] {
        return is_extern(sp) ? extern_task_post_fork(sp, ac, av) : step_task_post_fork(sp, ac, av);
    });
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
