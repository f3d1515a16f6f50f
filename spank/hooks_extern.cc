// The extern step (PrologFlags=Alloc,Contain): root slurmstepd on every node
// of the job, alive for the whole job. It sees none of the user's options;
// the prolog's run file says whether this node was lent.
//
// Where the graceful stop is driven from, and why (facts: spank/README.md):
//  - Slurm ends a job on a node in this order: signal and kill all steps
//    (extern included; proctrack SIGKILLs freezer step_extern ~2 ms after
//    SIGTERM), run the extern step's slurm_spank_exit, *then* run the epilog.
//    The epilog is therefore too late to stop pods gracefully unless the shim
//    survived until then, and nothing may survive the job.
//  - So the shim stays in the job-level freezer (a plain fork from
//    task_post_fork; its devices and cpuset are step_extern's, i.e. only the
//    job's GPUs and CPUs), out of reach of Slurm's 2 ms SIGKILL, and
//    slurm_spank_exit here: (1) asks the agent to deregister, which sends
//    `shutdown` to the shim with the grace budget and answers when the pods
//    are stopped; (2) SIGTERM/SIGKILLs whatever is left of the shim's process
//    group and of the job user's processes in the job's cgroups, reaps the
//    shim; (3) moves slurmstepd out of the job freezer and removes the job's
//    cgroup dirs (Slurm's own rmdir failed while the shim lived).
//  - The same path covers normal end, scancel and the time limit. A failed
//    node runs nothing: the agent's garbage collection removes its nodes.
//  - A shim that dies while the job runs is started again from here, in the
//    same cgroups, as the same user (spank/shim_keeper.h); exit stops that
//    first, then stops the shim of the moment.
//  - Bound: grace + timeout for the agent, + 1 s TERM, + 3 s KILL. The
//    admin's grace must stay below slurm.conf's UnkillableStepTimeout.
//  - Signals: Slurm signals every step of a running job (scancel --signal
//    without --batch), the extern step included: proctrack signals freezer
//    step_extern, i.e. the step's own task (Slurm's "sleep 100000000", whose
//    signals Slurm resets to default before exec). That task dying of, say,
//    SIGUSR1 ends the extern step while the job runs on; stopping the pods
//    and killing the job's processes then would kill the job. So exit asks
//    Slurm for the job's state first (slurm_job_running: the Slurm API of
//    slurmstepd, squeue where it is absent) and, while it is RUNNING, waits
//    (a query every 2 s) for the real end before the graceful stop; the
//    deregister then names how the job ended (job_end_reason: completed,
//    failed, cancelled, time limit, preempted), which the pods' final status
//    and the Node's Event show. The shim is in its own session and
//    out of freezer step_extern: no step signal reaches it, nor the pods
//    (docs/user-guide.md, "Signals"); it also survives such signals sent to
//    it directly (k8s-shim/main.cc).
// Failure modes: task_post_fork and exit returning -1 only log in Slurm
// (the job runs on); both return 0 and log their problems themselves.
#include <errno.h>
#include <pwd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <memory>

#include "common/cgroup/cgroup_files.h"
#include "common/plugin_wire.h"
#include "common/log.h"
#include "common/cgroup/pod_cgroup.h"
#include "common/procfs.h"
#include "common/strings.h"
#include "spank/hook_util.h"
#include "spank/runfile.h"
#include "spank/shim_keeper.h"
#include "spank/shim_process.h"
#include "spank/device_cgroup.h"
#include "spank/slurm_facts.h"

namespace sk::spank {
namespace {

// This slurmstepd serves one job on one node for the job's whole life.
struct ExternState {
    pid_t shim = -1;  // the first shim; the keeper's current one after stop()
    uint32_t job_id = 0;
    uid_t uid = 0;
    std::string node, node_name;
    std::vector<std::string> cgroups;  // job dirs, per controller (v2: the job's one)
    // cgroup v2: J/step_extern, where the pods' directories are. Only those
    // are removed at the end: Slurm removes its own after the exit hook
    // (tests/vm/README.md (e)), which the pods' would have kept busy.
    std::string v2_pods_parent;
};
ExternState g_ext;
// Starts a new shim when one dies while the job runs (spank/shim_keeper.h).
std::unique_ptr<ShimKeeper> g_keeper;

ShimSpec shim_spec(const PlugConfig &cfg, const RunFile &rf, bool gpus_confined) {
    ShimSpec s;
    s.path = cfg.shim;
    s.uid = rf.uid;
    s.gid = rf.gid;
    std::string user = rf.user;
    struct passwd pw, *pwp = nullptr;
    char buf[4096];
    if (getpwuid_r(rf.uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp) {
        s.home = pw.pw_dir;
        user = pw.pw_name;
    }
    s.argv = {cfg.shim,          "--job-id", std::to_string(rf.job_id),      "--slurm-node",
              rf.slurm_node,     "--socket", socket_for(cfg, rf.slurm_node), "--log-level",
              cfg.shim_log_level};
    if (!cfg.runtime_config.empty())
        s.argv.insert(s.argv.end(), {"--runtime-config", cfg.runtime_config});
    // The shim ahead of its pods in the CPU scheduler (their load must not
    // queue its work for the pods' status), the pods' and sessions' commands
    // at the step's own nice, as the job's tasks run.
    errno = 0;
    int step_nice = getpriority(PRIO_PROCESS, 0);
    if (errno == 0) {
        s.nice = cfg.shim_nice;
        s.argv.insert(s.argv.end(), {"--workload-nice", std::to_string(step_nice)});
    }
    s.env = {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
             "HOME=" + s.home,
             "USER=" + user,
             "LOGNAME=" + user,
             "SLURM_JOB_ID=" + std::to_string(rf.job_id),
             "SLURMD_NODENAME=" + rf.slurm_node,
             "SLURM_K8S_NODE=" + rf.node_name,
             "SLURM_K8S_GPUS=" + format_index_list(rf.gpus)};
    if (gpus_confined) s.env.push_back(std::string(kGpusConfinedEnv) + "=1");
    // Sanitizer options set for slurmd by the admin (a test build of the
    // shim under ASan/UBSan: where reports go) pass through; nothing else
    // of slurmstepd's environment does.
    for (const char *v : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"})
        if (const char *val = getenv(v)) s.env.push_back(std::string(v) + "=" + val);
    s.log_path = run_file_path(cfg.rundir, rf.job_id, rf.slurm_node) + ".shim.log";
    return s;
}

// Denies the extern step (the shim and its pods) the GPUs the trainer keeps.
// True when the step's devices cgroup now lets it open the lent GPUs only
// (Slurm's ConstrainDevices gave it the job's), which the shim must know to
// number its pods' GPUs as CUDA does (spank/device_cgroup.h).
bool confine_extern_gpus(const PlugConfig &cfg, const RunFile &rf, const std::string &self_cgroup) {
    if (rf.job_gpus.empty()) return false;
    auto kept = indices_without(rf.job_gpus, rf.gpus);
    Status st;
    if (auto job = v2_job_dir(self_cgroup, rf.job_id, kCgroupRoot);
        job || job.error() != Error::Unavailable) {
        // cgroup v2: the lent GPUs only, on the extern step (override: each
        // pod's directory gets its own program below it).
        auto lent = job ? gpu_char_devices(cfg.gpu_device, rf.gpus)
                        : Result<std::vector<CharDevice>>(job.failure());
        auto devs = lent ? gpu_char_devices(cfg.gpu_device, kept) : lent;
        st = devs ? v2_confine_gpus(*job + "/step_extern", *lent, *devs) : Status(devs.failure());
    } else {
        auto dir = step_devices_dir(self_cgroup, rf.job_id, "step_extern", kCgroupRoot);
        auto devs = dir ? gpu_char_devices(cfg.gpu_device, kept)
                        : Result<std::vector<CharDevice>>(dir.failure());
        st = devs ? deny_devices(*dir, *devs) : Status(devs.failure());
    }
    if (!st) {
        LOG_ERROR(
            "extern: job %u: [node %s] the pods are not denied the trainer's GPUs %s at the "
            "device: %s",
            rf.job_id, rf.node_name.c_str(), format_index_list(kept).c_str(), st.message().c_str());
        return false;
    }
    if (!kept.empty())
        LOG_INFO("extern: job %u: [node %s] trainer's GPUs %s denied to the shim and its pods",
                 rf.job_id, rf.node_name.c_str(), format_index_list(kept).c_str());
    return true;
}

}  // namespace

int extern_task_post_fork(spank_t sp, int ac, char **av) {
    if (g_ext.shim > 0) return 0;  // one shim per extern step
    auto cfg = plugstack(ac, av, "extern");
    if (!cfg) return 0;
    uint32_t job = item_u32(sp, S_JOB_ID, 0);
    std::string node = node_name_here(sp);
    auto rf = read_run_file(cfg->rundir, job, node);
    if (!rf) {
        if (rf.error() != Error::NotFound)
            LOG_ERROR("extern: job %u: %s", job, rf.message().c_str());
        return 0;
    }
    if (!rf->registered) return 0;
    auto self_cgroup = read_process_cgroups();
    auto cgroups = job_cgroup_dirs(self_cgroup ? *self_cgroup : "", job, kCgroupRoot);
    std::string v2_pods;
    if (auto j = v2_job_dir(self_cgroup ? *self_cgroup : "", job, kCgroupRoot)) {
        cgroups = {*j};
        v2_pods = *j + "/step_extern";
    }
    // The agent's own tree of the job (pods' cpu and pids cgroups on v1,
    // common/cgroup/pod_cgroup.h): its processes are killed and its directories
    // removed with the job's at the end.
    if (!cgroups.empty())
        for (const auto &d : own_job_cgroup_dirs(self_cgroup ? *self_cgroup : "", job,
                                                 {"cpu", "cpuacct", "pids"}, kCgroupRoot))
            cgroups.push_back(d);
    if (cgroups.empty())
        LOG_ERROR(
            "extern: job %u: [node %s] slurmstepd is in no job cgroup: the shim is not "
            "confined to the job's GPUs (use proctrack/cgroup, task/cgroup, "
            "ConstrainDevices=yes)",
            job, rf->node_name.c_str());
    bool confined = confine_extern_gpus(*cfg, *rf, self_cgroup ? *self_cgroup : "");
    auto pid = spawn_shim(shim_spec(*cfg, *rf, confined));
    if (!pid) {
        LOG_ERROR("extern: job %u: [node %s] %s", job, rf->node_name.c_str(),
                  pid.message().c_str());
        return 0;
    }
    g_ext = ExternState{*pid, job, rf->uid, node, rf->node_name, cgroups, v2_pods};
    LOG_INFO("extern: job %u: [node %s] shim started, pid %d", job, rf->node_name.c_str(), *pid);
    g_keeper = std::make_unique<ShimKeeper>(
        shim_spec(*cfg, *rf, confined),
        "job " + std::to_string(job) + ": [node " + rf->node_name + "]",
        ShimKeeper::RestartPolicy{});
    if (auto st = g_keeper->start(*pid); !st)
        LOG_ERROR("extern: job %u: [node %s] %s: the shim is not restarted if it dies", job,
                  rf->node_name.c_str(), st.message().c_str());
    return 0;
}

int extern_exit(spank_t, int ac, char **av) {
    if (g_ext.shim <= 0) return 0;
    auto cfg = plugstack(ac, av, "extern exit");
    // Ended early by a signal sent to the job's steps: the job, its shim and
    // pods run on; this slurmstepd stays (its step is not complete for
    // Slurm) until the job ends. A failed query counts as the end. The last
    // answer also names how the job ended (one query at a usual job end).
    SlurmJobNow job = slurm_job_now(g_ext.job_id);
    if (slurm_job_running(job, g_ext.job_id, 5000)) {
        LOG_INFO(
            "extern: job %u: [node %s] the extern step's task ended while the job runs (a "
            "signal sent to the job's steps): the pods keep running until the job ends",
            g_ext.job_id, g_ext.node_name.c_str());
        struct timespec two_s = {2, 0};
        do {
            nanosleep(&two_s, nullptr);
            job = slurm_job_now(g_ext.job_id);
        } while (slurm_job_running(job, g_ext.job_id, 5000));
        LOG_INFO("extern: job %u: [node %s] the job ends: stopping the pods", g_ext.job_id,
                 g_ext.node_name.c_str());
    }
    // The job ends: no shim is started any more; the one running now is
    // the one to stop.
    if (g_keeper) {
        pid_t now = g_keeper->stop();
        if (now > 0) g_ext.shim = now;
        g_keeper.reset();
    }
    uint64_t grace = cfg ? cfg->grace_s : 30, timeout = cfg ? cfg->timeout_s : 5;
    bool agent_ok = false;
    if (cfg) {
        proto::DeregisterRequest d;
        d.job_id = g_ext.job_id;
        d.slurm_node = g_ext.node;
        d.grace_s = static_cast<uint32_t>(grace);
        d.reason = job_end_reason(job);
        LOG_INFO("extern: job %u: [node %s] the job ends (%s): stopping the pods", g_ext.job_id,
                 g_ext.node_name.c_str(), d.reason.c_str());
        PluginAgentClient agent(admin_socket_for(*cfg, g_ext.node),
                                static_cast<int>((grace + timeout) * 1000));
        auto r = agent.call("deregister", PluginCodec::to_json(d));
        agent_ok = r.ok() || r.error() == Error::NotFound;
        if (!agent_ok)
            LOG_ERROR(
                "extern: job %u: [node %s] deregister failed: %s; stopping the shim "
                "directly (SIGTERM, %llu s)",
                g_ext.job_id, g_ext.node_name.c_str(), r.message().c_str(),
                static_cast<unsigned long long>(grace));
    }
    // With the agent's shutdown done, the shim is exiting on its own, once
    // it removed the job's podman state (k8s-shim/podman.h: a fraction of a
    // second, at most 20 s); a SIGTERM makes it do the same at once.
    int term_ms = agent_ok ? 25000 : static_cast<int>(grace * 1000);
    int left = stop_shim(g_ext.shim, g_ext.uid, g_ext.cgroups, term_ms, 3000);
    if (left)
        LOG_ERROR("extern: job %u: %d processes of the shim survived SIGKILL", g_ext.job_id, left);
    std::vector<std::string> remove = g_ext.cgroups;
    if (!g_ext.v2_pods_parent.empty()) {
        remove.clear();
        PodCgroupParent parent{"", g_ext.v2_pods_parent, false, true};
        for (const auto &uid : pod_cgroup_uids({parent}))
            if (auto name = pod_cgroup_name(uid))
                remove.push_back(g_ext.v2_pods_parent + "/" + *name);
    }
    for (const auto &d : remove_job_cgroups(remove, kCgroupRoot, 2000))
        LOG_ERROR("extern: job %u: cgroup not removed: %s", g_ext.job_id, d.c_str());
    LOG_INFO("extern: job %u: [node %s] shim stopped", g_ext.job_id, g_ext.node_name.c_str());
    g_ext.shim = -1;
    return 0;
}

}  // namespace sk::spank
