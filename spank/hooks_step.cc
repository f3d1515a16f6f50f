// Batch and srun steps (remote context). init_post_opt runs in slurmstepd as
// root: it reads the prolog's run file (root-only) and, for --k8s-wait in the
// batch step, polls the agent's `status` until this node's virtual node is
// Ready (root: the agent accepts `status` only from root/SlurmUser; user_init
// already runs with the user's euid). The batch script starts after this
// hook returns, so the wait holds it back, bounded by the --k8s-wait value.
// user_init publishes what the job got (SLURM_K8S_*); task_post_fork (in
// slurmstepd, as root, before any task of the step execs) denies the step the
// lent GPUs at its devices cgroup (spank/device_cgroup.h); task_init hides
// them from every task's environment.
//
// Failure modes: a non-zero return from these hooks fails the step (the
// user's job), so they always return 0; problems are logged and shown to the
// user through SLURM_K8S_ERROR and the job's stderr.
#include <time.h>
#include <unistd.h>

#include <cstdio>

#include "common/cgroup/cgroup_files.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/plugin_wire.h"
#include "common/procfs.h"
#include "common/strings.h"
#include "spank/device_cgroup.h"
#include "spank/gpu_split.h"
#include "spank/hook_util.h"
#include "spank/runfile.h"

namespace sk::spank {
namespace {

struct StepState {
    bool present = false;
    RunFile rf;
    std::string wait_message;  // set when --k8s-wait timed out or failed
    bool waited_ready = false;
    std::string gpu_device;     // plugstack.conf gpu_device
    bool devices_done = false;  // once per step (this slurmstepd serves one step)
};
StepState g_step;

void wait_ready(const PlugConfig &cfg) {
    const RunFile &rf = g_step.rf;
    const int64_t deadline = monotonic_ms() + static_cast<int64_t>(rf.wait_s) * 1000;
    PluginAgentClient agent(admin_socket_for(cfg, rf.slurm_node),
                            static_cast<int>(cfg.timeout_s * 1000));
    proto::JobKey key{rf.job_id, rf.slurm_node};
    std::string last = "not Ready yet";
    while (monotonic_ms() < deadline) {
        auto r =
            agent.call("status", PluginCodec::to_json(key),
                       static_cast<int>(std::min<int64_t>(
                           cfg.timeout_s * 1000, std::max<int64_t>(deadline - monotonic_ms(), 1))));
        if (r) {
            auto st = PluginCodec::node_state_from_json(*r);
            if (st && st->ready) {
                g_step.waited_ready = true;
                return;
            }
            last = st ? "phase " + st->phase : st.message();
        } else {
            last = r.message();
        }
        usleep(200 * 1000);
    }
    g_step.wait_message = "--k8s-wait=" + std::to_string(rf.wait_s) + ": virtual node " +
                          rf.node_name + " was not Ready in time (" + last +
                          "); the script starts anyway";
    LOG_ERROR("step: job %u: [node %s] %s", rf.job_id, rf.node_name.c_str(),
              g_step.wait_message.c_str());
}

}  // namespace

int step_init_post_opt(spank_t sp, int ac, char **av) {
    auto cfg = plugstack(ac, av, "step");
    if (!cfg) return 0;
    uint32_t job = item_u32(sp, S_JOB_ID, 0);
    auto rf = read_run_file(cfg->rundir, job, node_name_here(sp));
    if (!rf) {
        if (rf.error() != Error::NotFound) LOG_ERROR("step: job %u: %s", job, rf.message().c_str());
        return 0;
    }
    g_step.present = true;
    g_step.rf = *rf;
    g_step.gpu_device = cfg->gpu_device;
    if (rf->registered && rf->wait_s > 0 && item_u32(sp, S_JOB_STEPID, 0) == SLURM_BATCH_SCRIPT)
        wait_ready(*cfg);
    return 0;
}

int step_user_init(spank_t sp, int, char **) {
    if (!g_step.present) return 0;
    const RunFile &rf = g_step.rf;
    auto set = [&](const char *k, const std::string &v) { spank_setenv(sp, k, v.c_str(), 1); };
    if (rf.registered) {
        set("SLURM_K8S_NODE", rf.node_name);
        set("SLURM_K8S_GPUS", format_index_list(rf.gpus));
        set("SLURM_K8S_NAMESPACES", join(rf.namespaces, ","));
    }
    std::string err = rf.error.empty() ? g_step.wait_message : rf.error;
    if (!err.empty()) set("SLURM_K8S_ERROR", err);
    if (rf.wait_s > 0 && rf.registered) set("SLURM_K8S_READY", g_step.waited_ready ? "1" : "0");
    return 0;
}

int step_task_init(spank_t sp, int, char **) {
    if (!g_step.present) return 0;
    const RunFile &rf = g_step.rf;
    std::string err = rf.error.empty() ? g_step.wait_message : rf.error;
    // The batch script's stderr is the job's error file: tell the user once.
    if (!err.empty() && item_u32(sp, S_JOB_STEPID, 0) == SLURM_BATCH_SCRIPT)
        fprintf(stderr, "spank_k8s: %s\n", err.c_str());
    if (!rf.note.empty() && item_u32(sp, S_JOB_STEPID, 0) == SLURM_BATCH_SCRIPT)
        fprintf(stderr, "spank_k8s: note: %s\n", rf.note.c_str());
    if (!rf.registered || rf.gpus.empty()) return 0;
    std::map<std::string, std::string> env;
    for (const char *v : kGpuListVars)
        if (auto val = step_env(sp, v); !val.empty()) env[v] = val;
    for (const char *v : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE"})
        if (auto val = step_env(sp, v); !val.empty()) env[v] = val;
    auto edits = trainer_gpu_env(env, rf.gpus);
    if (!edits) {
        LOG_ERROR("task: job %u: %s", rf.job_id, edits.message().c_str());
        return 0;
    }
    for (const auto &kv : *edits)
        spank_setenv(sp, kv.first.c_str(), kv.second.c_str(), 1);
    return 0;
}

int step_task_post_fork(spank_t sp, int, char **) {
    if (!g_step.present || g_step.devices_done) return 0;
    g_step.devices_done = true;
    const RunFile &rf = g_step.rf;
    if (!rf.registered || rf.gpus.empty()) return 0;
    uint32_t step_id = item_u32(sp, S_JOB_STEPID, 0);
    std::string step = step_component(step_id);
    auto self = read_process_cgroups();
    Status st;
    if (auto job = v2_job_dir(self ? *self : "", rf.job_id, kCgroupRoot);
        job || job.error() != Error::Unavailable) {
        // cgroup v2: the step's program in place of Slurm's, from the GPUs
        // Slurm gave the step (an srun step's own, else the job's).
        std::string given = step_env(sp, "SLURM_STEP_GPUS");
        if (given.empty()) given = step_env(sp, "SLURM_JOB_GPUS");
        auto step_gpus = given.empty() ? Result<std::vector<int>>(std::vector<int>{})
                                       : parse_index_list(given, "SLURM_STEP_GPUS");
        Result<std::vector<CharDevice>> keep =
            !job        ? Result<std::vector<CharDevice>>(job.failure())
            : step_gpus ? gpu_char_devices(g_step.gpu_device, indices_without(*step_gpus, rf.gpus))
                        : Result<std::vector<CharDevice>>(step_gpus.failure());
        auto lent = keep ? gpu_char_devices(g_step.gpu_device, rf.gpus) : keep;
        st = lent ? v2_confine_gpus(*job + "/" + step + "/user", *keep, *lent)
                  : Status(lent.failure());
    } else {
        auto dir = step_devices_dir(self ? *self : "", rf.job_id, step, kCgroupRoot);
        auto devs = dir ? gpu_char_devices(g_step.gpu_device, rf.gpus)
                        : Result<std::vector<CharDevice>>(dir.failure());
        st = devs ? deny_devices(*dir, *devs) : Status(devs.failure());
    }
    if (!st)
        LOG_ERROR("step: job %u: [node %s] %s: the lent GPUs %s are not denied at the device: %s",
                  rf.job_id, rf.node_name.c_str(), step.c_str(), format_index_list(rf.gpus).c_str(),
                  st.message().c_str());
    else
        LOG_INFO("step: job %u: [node %s] %s: lent GPUs %s denied at the device", rf.job_id,
                 rf.node_name.c_str(), step.c_str(), format_index_list(rf.gpus).c_str());
    return 0;
}

}  // namespace sk::spank
