// Which GPUs of a node go to Kubernetes, and what the trainer tasks see.
//
// Slurm numbers a job's GPUs on a node in SLURM_JOB_GPUS / SLURM_STEP_GPUS
// (global indices, in bitmap order). CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL,
// ROCR_VISIBLE_DEVICES and ZE_AFFINITY_MASK list the same GPUs in the same
// order, either with the same global indices or, with ConstrainDevices=yes,
// renumbered 0..n-1. Edits are therefore positional: position i of every
// per-process list is the GPU at position i of the step's global list. That
// holds with and without renumbering.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace sk::spank {

// The lent GPUs: the last `want` of the job's GPUs on this node (all when
// want_all). Fails when the node has fewer GPUs than asked for.
Result<std::vector<int>> choose_lent(const std::vector<int> &job_gpus, bool want_all,
                                     uint32_t want);

// The environment variables Slurm sets for GPUs and that this module edits.
extern const char *const kGpuListVars[4];  // CUDA_VISIBLE_DEVICES, ...

// Edits for a trainer task: var -> new value (a var absent from `env` is not
// set). SLURM_STEP_GPUS / SLURM_JOB_GPUS lose the lent indices,
// SLURM_GPUS_ON_NODE is recounted. Fails (no edits) when the per-process
// lists cannot be matched to the global list (different lengths).
Result<std::map<std::string, std::string>> trainer_gpu_env(
    const std::map<std::string, std::string> &env, const std::vector<int> &lent);

// The GPU type of each index on one node, from Slurm's GRES detail of a job
// on that node (`scontrol -d show job`: "gpu:a100:2(IDX:0-1)",
// "gpu:a100:1(IDX:0),gpu:v100:2(IDX:2-3)", untyped "gpu:4(IDX:0-3)" -> "").
// Entries that are not gpu, or whose index list cannot be read, are skipped.
std::map<int, std::string> gpu_types_from_gres_detail(const std::string &detail);
// The type every lent GPU has ("" when untyped, mixed, unknown or none lent).
std::string lent_gpu_type(const std::map<int, std::string> &types, const std::vector<int> &lent);

}  // namespace sk::spank
