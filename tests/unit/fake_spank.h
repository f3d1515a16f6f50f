// A fake spank layer: the spank_* and slurm_* functions that slurmd,
// slurmstepd and sbatch provide to a plugin, implemented over a State that a
// test sets up and inspects. Linked into test programs with -export-dynamic
// so that a dlopen()ed spank_k8s.so binds to them.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fake_spank {

struct State {
    spank_context_t context = S_CTX_ALLOCATOR;
    bool remote = false;
    uint32_t job_id = 0, step_id = 0, nnodes = 1, nodeid = 0;
    uint32_t uid = 0, gid = 0;
    std::map<std::string, std::string> env;          // spank_getenv/setenv (remote)
    std::map<std::string, std::string> job_control;  // spank_job_control_setenv
    std::map<std::string, std::string> getopt;       // option name -> value for spank_option_getopt
    std::vector<struct spank_option> registered;
    std::vector<std::string> log;  // "info: ...", "error: ..."
};

State &state();
void reset();
spank_t handle();  // the spank_t to pass to hooks

}  // namespace fake_spank
