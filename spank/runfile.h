// The per-(job, node) file the prolog leaves for the later steps of the job:
// <rundir>/job_<id>_<node>.json, root-owned, written atomically
// (write_file_atomic, common/fs.h). The extern step sees none of the user's
// options (spank/README.md, "Slurm facts"), so this file is how it learns
// that a shim must start; the batch and srun
// steps read it (as root, in init_post_opt) for the lent GPUs and the virtual
// node's name. Keyed by job *and* node: test hosts run several slurmd on one
// file system. The epilog deletes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace sk::spank {

struct RunFile {
    uint32_t job_id = 0;
    std::string slurm_node;
    uint32_t uid = 0, gid = 0;
    std::string user;
    std::vector<int> gpus;      // lent GPU indices (global, as in SLURM_JOB_GPUS)
    std::vector<int> job_gpus;  // all the job's GPUs on the node (SLURM_JOB_GPUS)
    // Once registered: the namespaces whose pods may run there, as the agent
    // answered (the job's, else the site's; "*" = any; empty = none).
    std::vector<std::string> namespaces;
    std::string note;         // what the user should know although registered (shown once)
    std::string node_name;    // virtual node name from the agent; "" if none
    bool registered = false;  // the agent accepted the register
    std::string error;        // why not registered (shown to the user)
    uint64_t wait_s = 0;      // --k8s-wait
};

std::string run_file_path(const std::string &rundir, uint32_t job_id, const std::string &node);
std::string encode_run_file(const RunFile &r);
Result<RunFile> decode_run_file(const std::string &text);

// I/O: rundir is created 0700 if missing; the file is 0600, replaced
// atomically, read back at most 1 MiB and never through a symlink.
Status write_run_file(const std::string &rundir, const RunFile &r);
Result<RunFile> read_run_file(const std::string &rundir, uint32_t job_id, const std::string &node);
void remove_run_file(const std::string &rundir, uint32_t job_id, const std::string &node);

}  // namespace sk::spank
