// The C ABI of spank_k8s.so: plugin identity and the hook table. Each hook is
// a noexcept trampoline into the per-context code (hooks.h); no exception and
// no exit() ever leaves this file, because the caller is sbatch, srun, slurmd
// or slurmstepd.
#include "config.h"

extern "C" {
#include <slurm/spank.h>
}

#include "spank/hooks.h"

// SPANK_PLUGIN() would give these internal linkage in C++ (Slurm then refuses
// the plugin with "Plugin name/type/version symbol missing"), so spell them out.
extern "C" {
extern const char plugin_name[] = "spank_k8s";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
extern const unsigned int spank_plugin_version = 1;

int slurm_spank_init(spank_t sp, int ac, char **av) {
    return sk::spank::hook_init(sp, ac, av);
}
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
    return sk::spank::hook_init_post_opt(sp, ac, av);
}
int slurm_spank_job_prolog(spank_t sp, int ac, char **av) {
    return sk::spank::hook_job_prolog(sp, ac, av);
}
int slurm_spank_user_init(spank_t sp, int ac, char **av) {
    return sk::spank::hook_user_init(sp, ac, av);
}
int slurm_spank_task_init(spank_t sp, int ac, char **av) {
    return sk::spank::hook_task_init(sp, ac, av);
}
int slurm_spank_task_post_fork(spank_t sp, int ac, char **av) {
    return sk::spank::hook_task_post_fork(sp, ac, av);
}
int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
    return sk::spank::hook_job_epilog(sp, ac, av);
}
int slurm_spank_exit(spank_t sp, int ac, char **av) {
    return sk::spank::hook_exit(sp, ac, av);
}
}
