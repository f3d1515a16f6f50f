// The user's --k8s-* flags: raw text as Slurm hands it to the option
// callbacks, and the typed, policy-checked form. The same parse runs in
// sbatch/salloc/srun (fail before submission, with a message that names the
// flag, the value and what is allowed) and again in the prolog, which never
// trusts what the client side did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/k8s_names.h"
#include "common/result.h"
#include "spank/plugstack.h"

namespace sk::spank {

struct RawOptions {
    std::optional<std::string> gpus, nodes, cpus, mem, labels, taints, namespaces, wait,
        drain_before;
    bool any() const;  // some flag of flag_table() was given
};

struct JobOptions {
    bool gpus_all = false;  // --k8s-gpus=all
    uint32_t gpus = 0;      // --k8s-gpus=N per node (0 when all or absent)
    uint32_t nodes = 0;     // --k8s-nodes=M: the last M nodes lent whole
    uint32_t cpus = 0;
    uint64_t mem_mib = 0;
    std::map<std::string, std::string> labels;
    std::vector<k8s::Taint> taints;  // the user's; the default taint is added at register
    std::vector<std::string> namespaces;
    uint64_t wait_s = 0;  // 0 = no --k8s-wait
    // --k8s-drain-before: stop the pods this long before the job's end time
    // (0: not ahead of the end); -1 = the agent's default (drain_before_end).
    int64_t drain_before_s = -1;
    bool lends_anything() const {
        return gpus_all || gpus > 0 || nodes > 0 || cpus > 0 || mem_mib > 0;
    }
};

// One --k8s-* flag. The table of them is the only list of flags: Slurm's
// registration (spank/hooks.cc: row i is registered with spank_option.val i,
// so the callback finds its row), the callbacks and the prolog's
// spank_option_getopt (which record into `raw`), RawOptions::any() and
// parse_options (which calls `parse` on each given flag, in table order; the
// first failure is reported) all walk it. Adding a flag: a row, its RawOptions
// and JobOptions fields, its parse function (spank/README.md, "The flags").
struct Flag {
    // spank_option's fields. name: without "--"; Slurm's environment form of
    // the flag is derived from it (SLURM_SPANK__SLURM_SPANK_OPTION_spank_k8s_
    // followed by the name with '-' as '_'). has_arg: 1 a value is required,
    // 2 optional (the callback then gets no value; recorded as "").
    const char *name;
    const char *arginfo;
    const char *usage;
    int has_arg;
    std::optional<std::string> RawOptions::*raw;  // where the value is recorded
    // Syntax and site policy of the value; sets the flag's JobOptions fields.
    // Every message starts with "--<name>=<value>: ".
    Status (*parse)(const std::string &value, const PlugConfig &cfg, JobOptions *o);
};
struct FlagTable {
    const Flag *rows;
    size_t size;
    const Flag *begin() const { return rows; }
    const Flag *end() const { return rows + size; }
    const Flag &operator[](size_t i) const { return rows[i]; }
};
FlagTable flag_table();

// Slurm's environment form of a flag: SLURM_SPANK__SLURM_SPANK_OPTION_spank_k8s_<name, - as _>.
std::string flag_env_name(const Flag &f);
// srun inside an allocation sees the job's flags through their environment
// form (exported at submission); a recorded value that is not the
// environment's came from srun's own command line. Returns "--name=value" of
// the first such flag, nullopt when there is none. env_of: getenv.
std::optional<std::string> flag_given_to_step(
    const RawOptions &raw, const std::function<const char *(const std::string &)> &env_of);

// Syntax and site policy. Every message starts with the flag and the value.
Result<JobOptions> parse_options(const RawOptions &raw, const PlugConfig &cfg);

// What the job asked Slurm for, per node, as far as the client can tell.
struct GpuRequest {
    bool known = false;     // false: no --gres/--gpus-per-node seen, or a form we cannot count
    bool any = false;       // some GPU option was given
    uint32_t per_node = 0;  // when known
};
// From sbatch/salloc/srun's argv (after argv[0]) up to the script (index
// script_at, args.size() when none), the batch script's #SBATCH lines (may be
// empty) and SBATCH_GRES/SLURM_GRES/SBATCH_GPUS_PER_NODE values. Later
// sources win as in Slurm: script < environment < command line.
GpuRequest gpu_request(const std::vector<std::string> &args, size_t script_at,
                       const std::string &script, const std::map<std::string, std::string> &env);
// "--k8s-gpus=6 but the job requests 4 GPUs per node (--gres=gpu:4)".
Status check_against_request(const JobOptions &o, const GpuRequest &r, uint32_t nnodes);

// Indices of the arguments that do not start with '-': the batch script is the
// first of them that is a file starting with "#!" (an option's separate
// value, as in "-N 3", is also listed; the caller checks the file).
std::vector<size_t> script_candidates(const std::vector<std::string> &args);

// Site limit on the whole job: lent GPUs per node x nodes lending GPUs.
// gpus_on_node is the job's GPU count per node (for "all" and --k8s-nodes).
Status check_job_total(const JobOptions &o, uint32_t nnodes, uint32_t gpus_on_node,
                       const PlugConfig &cfg);

// What the job holds on one node, as its record in slurmctld says: CPUs
// there (0: unknown) and memory in MiB (0: Slurm names none, i.e. the
// node's whole memory, or unknown).
struct NodeShare {
    uint32_t cpus = 0;
    uint64_t memory_mib = 0;
};
// The part the virtual node offers: --k8s-cpus/--k8s-mem where given (never
// more than the job holds there, when that is known), else all the job
// holds there. "--k8s-cpus=8 is more than the 4 CPUs job 12 holds on n1; ..."
Result<NodeShare> lent_share(const JobOptions &o, const NodeShare &held, uint32_t job_id,
                             const std::string &node);

}  // namespace sk::spank
