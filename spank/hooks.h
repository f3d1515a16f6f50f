// Per-context hook implementations. Every function is noexcept and returns
// the value Slurm gets (0 or -1); the failure mode of each hook is written
// next to its definition (see spank.8: a non-zero return from job_prolog
// drains the node, from init in the allocator aborts sbatch, ...).
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include "spank/options.h"

namespace sk::spank {

int hook_init(spank_t sp, int ac, char **av) noexcept;
int hook_init_post_opt(spank_t sp, int ac, char **av) noexcept;
int hook_job_prolog(spank_t sp, int ac, char **av) noexcept;
int hook_user_init(spank_t sp, int ac, char **av) noexcept;
int hook_task_init(spank_t sp, int ac, char **av) noexcept;
int hook_task_post_fork(spank_t sp, int ac, char **av) noexcept;
int hook_job_epilog(spank_t sp, int ac, char **av) noexcept;
int hook_exit(spank_t sp, int ac, char **av) noexcept;

// The --k8s-* values as recorded by the option callbacks in this process
// (allocator and remote contexts), and as read with spank_option_getopt
// (job_prolog), both through flag_table() (spank/options.h).
RawOptions &recorded_options();
RawOptions options_from_getopt(spank_t sp);

}  // namespace sk::spank
