// sbatch / salloc / srun (allocator and local context, as the submitting
// user): validate the --k8s-* flags before the job is submitted.
//
// Failure mode: a non-zero return from init_post_opt makes sbatch/salloc/srun
// exit non-zero before submission; the message (slurm_error -> the user's
// terminal) names the flag, the value and what is allowed.

#include "common/fs.h"
#include "common/log.h"
#include "spank/hook_util.h"

namespace sk::spank {
namespace {

std::vector<std::string> own_args() {
    // The kernel bounds a command line (ARG_MAX, 2 MiB by default).
    auto cmdline = read_file("/proc/self/cmdline", size_t{16} << 20);
    const std::string all = cmdline ? *cmdline : std::string();
    std::vector<std::string> args;
    std::string cur;
    for (char c : all) {
        if (c == '\0') {
            args.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!args.empty()) args.erase(args.begin());  // argv[0]
    return args;
}

// The batch script: the first non-option argument that is a file starting
// with "#!" (sbatch reads the same file; its #SBATCH lines count).
std::pair<size_t, std::string> find_script(const std::vector<std::string> &args) {
    // A regular file only (a FIFO or a device named on the command line is
    // not read), 64 MiB at most; its first MiB is looked at.
    for (size_t i : script_candidates(args)) {
        auto text = read_file(args[i], size_t{64} << 20, Links::Follow);
        if (!text) continue;
        if (text->rfind("#!", 0) == 0) return {i, text->substr(0, 1 << 20)};
    }
    return {args.size(), {}};
}

}  // namespace

int allocator_init_post_opt(spank_t, int ac, char **av) {
    const RawOptions &raw = recorded_options();
    if (!raw.any()) return 0;
    // srun inside an allocation: the job's options reach it through the
    // environment (SLURM_SPANK__SLURM_SPANK_OPTION_*), but a step lends
    // nothing; the allocation was checked when it was submitted. A flag on
    // srun's own command line would be ignored: refused, naming the flag.
    if (spank_context() == S_CTX_LOCAL && getenv("SLURM_JOB_ID")) {
        auto given =
            flag_given_to_step(raw, [](const std::string &n) { return getenv(n.c_str()); });
        if (!given) return 0;
        slurm_error(
            "%s: --k8s-* flags lend resources of the whole job and belong to sbatch or salloc, "
            "not to a step: this srun runs inside job %s, whose flags were set when it was "
            "submitted. Remove the flag from srun.",
            given->c_str(), getenv("SLURM_JOB_ID"));
        return -1;
    }
    auto cfg = plugstack(ac, av, "options");
    if (!cfg) return -1;
    auto opts = parse_options(raw, *cfg);
    if (!opts) {
        slurm_error("%s", opts.message().c_str());
        return -1;
    }
    auto args = own_args();
    auto script = find_script(args);
    std::map<std::string, std::string> env;
    for (const char *v : {"SBATCH_GRES", "SALLOC_GRES", "SLURM_GRES", "SBATCH_GPUS_PER_NODE",
                          "SALLOC_GPUS_PER_NODE", "SLURM_GPUS_PER_NODE"})
        if (const char *val = getenv(v)) env[v] = val;
    auto req = gpu_request(args, script.first, script.second, env);
    if (auto s = check_against_request(*opts, req, 0); !s) {
        slurm_error("%s", s.message().c_str());
        return -1;
    }
    return 0;
}

}  // namespace sk::spank
