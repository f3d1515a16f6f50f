// Process spawning for containers, probes and hooks (libuv edge).
// Every process gets its own session and process group (UV_PROCESS_DETACHED
// = setsid), so a signal to -pid reaches everything the container started.
// stdin is /dev/null; stdout/stderr go to the given pipes, or /dev/null
// (spawn_supervised takes any stdio).
// A spec with a confinement runs as
//   HELPER --exec-confined FLAGS -- ARGV   (k8s-shim/confine.h)
// and a container's under its supervisor, which runs that command line.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "k8s-shim/mount_ns.h"
#include "k8s-shim/pod_plan.h"
#include "uv/handles.h"

namespace sk::shim {

struct SpawnSpec {
    std::vector<std::string> argv;
    std::vector<EnvVar> env;
    std::string cwd;
    Confinement confine;  // applied by `helper` when any()
    std::string helper;   // the shim's binary (RunnerEnv::supervisor), as k8s-shim/confine.h says
    // The container's volumes at their mountPaths (k8s-shim/mount_ns.h), made
    // by `helper` on `scratch`; or join_mounts: the supervisor pid of the
    // container whose mounts a probe, hook or exec session joins. Either
    // runs the helper, which starts in "/" and enters cwd afterwards.
    std::vector<BindMount> binds;
    std::vector<std::string> hidden;  // device nodes left out (ContainerPlan::hidden_devices)
    std::string scratch;
    int join_mounts = 0;
    // The pod's own network and UTS namespaces, joined by `helper` first
    // (k8s-shim/confine.h --netns); "" = the node's.
    std::string net_ns, uts_ns;
    // For the supervisor: kSuperviseCgroupEnv (k8s-shim/supervise.h), "" = none.
    std::string cgroup_request;
};

// A command of a container: its main command (with the container's mounts
// made: `container_pid` 0) or, in a running container whose supervisor is
// `container_pid`, an exec probe's, its preStop hook's or an exec session's
// (which join its mounts, when it has any). The container's environment,
// working directory (the pod directory when it names none) and confinement.
// A container of the podman runtime (plan.image_run) runs `podman run`
// through its wrapper, the others `podman exec` (interactive: with stdin,
// tty: on a terminal), in the pod directory with podman's environment
// (k8s-shim/podman.h).
SpawnSpec container_command(std::vector<std::string> argv, const ContainerPlan &plan,
                            const std::string &pod_dir, const std::string &helper,
                            int container_pid, bool interactive = false, bool tty = false);

// Spawns into proc. Returns 0 or a negative libuv error (uv_strerror; proc
// is closed then). out/err may be null; when given, they are fresh Pipes of
// the same loop. A spec to confine without a helper is not started
// (UV_EPERM): a process never runs less confined than its plan says.
int spawn_process(uv_loop_t *loop, Process &proc, const SpawnSpec &spec, Process::ExitCb on_exit,
                  Pipe *out, Pipe *err);

// Spawns a container's command (or its exec probe's, its preStop hook's)
// under a supervisor (k8s-shim/supervise.h), confined as spawn_process does:
// `supervisor` is the slurm-k8s-shim executable (ShimOptions::supervisor).
// proc's pid is the supervisor's, the leader of the container's
// session and process group.
int spawn_container(uv_loop_t *loop, Process &proc, const std::string &supervisor,
                    const SpawnSpec &spec, Process::ExitCb on_exit, Pipe *out, Pipe *err);

// Where a process's stdio goes (uv/handles.h SpawnOptions): fresh Pipes of
// the loop or null (/dev/null), or, when terminal_fd >= 0, that descriptor
// (a pseudo-terminal's slave end) for all three.
struct SpawnStdio {
    Pipe *in = nullptr;
    Pipe *out = nullptr;
    Pipe *err = nullptr;
    int terminal_fd = -1;
    // The start report (kSuperviseStartedEnv, k8s-shim/supervise.h): "F" when
    // the command did not start, else nothing, then EOF once it was exec'd.
    Pipe *started = nullptr;
};

// spawn_container with any stdio: an exec session's command
// (k8s-shim/exec_session.h). On a terminal the supervisor makes it its
// controlling terminal (kSuperviseTerminalEnv, k8s-shim/supervise.h).
int spawn_supervised(uv_loop_t *loop, Process &proc, const std::string &supervisor,
                     const SpawnSpec &spec, Process::ExitCb on_exit, const SpawnStdio &io);

// The nice value of every supervised command (containers, exec sessions,
// probes, hooks: kSuperviseNiceEnv, k8s-shim/supervise.h): the job's own,
// while the shim and the supervisors run ahead of them (the plugin starts
// the shim at plugstack's shim_nice and passes the step's as
// --workload-nice). Set once by main() before the loop runs; unset, the
// commands keep the shim's.
void set_workload_nice(int nice);
// What set_workload_nice set; none before.
std::optional<int> workload_nice();

// Tells the supervisor `pid` to kill every process it has now
// (supervisor_kill_signal(), k8s-shim/supervise.h), SIGCONT first: a
// supervisor stopped by its container could not act.
void kill_supervised(int pid) noexcept;

// kill(-pgid, sig), ignoring ESRCH (the group is already gone).
void signal_group(int pgid, int sig) noexcept;

// The oom_kill counter of the cgroup a container's processes run in: with
// pod_uid, its own below its pod's in Slurm job job_id (the extern step's
// k8s_pod_<uid>/ctr_<container>, common/cgroup/pod_cgroup.h: v1 memory.oom_control,
// v2 memory.events; 0 while that directory is not made yet), else this
// process's (v2 memory.events); -1 when unknown (no memory controller).
long long cgroup_oom_kills(const std::string &pod_uid = "", uint32_t job_id = 0,
                           const std::string &container = "") noexcept;

}  // namespace sk::shim
