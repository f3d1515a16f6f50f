#include "common/fs.h"
#include "k8s-shim/spawn.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <uv.h>

#include <sstream>

#include "common/cgroup/cgroup_files.h"
#include "k8s-shim/confine.h"
#include "k8s-shim/podman.h"
#include "k8s-shim/supervise.h"

namespace sk::shim {

namespace {

bool g_has_workload_nice = false;
int g_workload_nice = 0;

// The command line that runs spec.argv as confined as spec.confine says;
// false when it asks for confinement and there is no helper.
bool makes_mounts(const SpawnSpec &spec) {
    return !spec.binds.empty() || !spec.hidden.empty();
}
bool uses_mounts(const SpawnSpec &spec) {
    return makes_mounts(spec) || spec.join_mounts > 0;
}

bool confined_argv(const SpawnSpec &spec, std::vector<std::string> *args) {
    args->clear();
    if (spec.confine.any() || uses_mounts(spec) || !spec.net_ns.empty()) {
        if (spec.helper.empty()) return false;
        *args = {spec.helper, kExecConfined};
        if (!spec.net_ns.empty())
            args->insert(args->end(), {kNetnsFlag, spec.net_ns, kUtsnsFlag, spec.uts_ns});
        for (const auto &b : spec.binds)
            args->insert(args->end(),
                         {b.read_only ? kBindReadOnlyFlag : kBindFlag, b.source, b.target});
        for (const auto &h : spec.hidden)
            args->insert(args->end(), {kHideFlag, h});
        if (makes_mounts(spec)) args->insert(args->end(), {kScratchFlag, spec.scratch});
        if (!makes_mounts(spec) && spec.join_mounts > 0)
            args->insert(args->end(), {kJoinMountsFlag, std::to_string(spec.join_mounts)});
        if (uses_mounts(spec)) args->insert(args->end(), {kChdirFlag, spec.cwd});
        if (spec.confine.no_new_privs) args->push_back(kNoNewPrivsFlag);
        if (spec.confine.drop_capabilities) args->push_back(kDropCapsFlag);
        if (spec.confine.seccomp_default) args->push_back(kSeccompDefaultFlag);
        args->push_back("--");
    }
    args->insert(args->end(), spec.argv.begin(), spec.argv.end());
    return true;
}

int spawn(uv_loop_t *loop, Process &proc, const std::string &file, std::vector<std::string> args,
          const SpawnSpec &spec, Process::ExitCb on_exit, const SpawnStdio &io) {
    SpawnOptions o;
    o.args = std::move(args);
    o.file = file;
    o.env.emplace();
    o.env->reserve(spec.env.size() + 1);
    for (const auto &e : spec.env)
        o.env->push_back(e.name + "=" + e.value);
    // The working directory may be a mountPath, there only once the helper
    // made the mounts: the helper enters it (--chdir).
    o.cwd = uses_mounts(spec) ? "/" : spec.cwd;
    o.detached = true;
    o.in = io.in;
    o.out = io.out;
    o.err = io.err;
    o.terminal_fd = io.terminal_fd;
    o.extra = io.started;
    return proc.spawn(loop, o, std::move(on_exit));
}

}  // namespace

SpawnSpec container_command(std::vector<std::string> argv, const ContainerPlan &plan,
                            const std::string &pod_dir, const std::string &helper,
                            int container_pid, bool interactive, bool tty) {
    SpawnSpec s;
    s.cgroup_request = plan.cgroup_request;
    if (plan.image_run) {
        s.argv = container_pid == 0 ? podman_run_argv(plan, helper)
                                    : podman_exec_argv(*plan.image_run, argv, interactive, tty);
        for (auto &[name, value] : podman_process_env(plan))
            s.env.push_back({name, value});
        s.cwd = pod_dir;
        s.helper = helper;
        return s;
    }
    s.argv = std::move(argv);
    s.env = plan.env;
    s.cwd = plan.working_dir.empty() ? pod_dir : plan.working_dir;
    s.confine = plan.confine;
    s.helper = helper;
    s.net_ns = plan.net_ns;
    s.uts_ns = plan.uts_ns;
    if (!plan.own_mounts()) return s;
    if (container_pid == 0) {
        s.binds = plan.binds;
        s.hidden = plan.hidden_devices;
        s.scratch = mount_scratch_dir(pod_dir);
    } else {
        s.join_mounts = container_pid;
    }
    return s;
}

int spawn_process(uv_loop_t *loop, Process &proc, const SpawnSpec &spec, Process::ExitCb on_exit,
                  Pipe *out, Pipe *err) {
    std::vector<std::string> args;
    if (!confined_argv(spec, &args)) return UV_EPERM;
    return spawn(loop, proc, "", std::move(args), spec, std::move(on_exit), {nullptr, out, err});
}

int spawn_container(uv_loop_t *loop, Process &proc, const std::string &supervisor,
                    const SpawnSpec &spec, Process::ExitCb on_exit, Pipe *out, Pipe *err) {
    return spawn_supervised(loop, proc, supervisor, spec, std::move(on_exit), {nullptr, out, err});
}

int spawn_supervised(uv_loop_t *loop, Process &proc, const std::string &supervisor,
                     const SpawnSpec &spec, Process::ExitCb on_exit, const SpawnStdio &io) {
    std::vector<std::string> args;
    if (!confined_argv(spec, &args)) return UV_EPERM;
    SpawnSpec s = spec;
    // The start report: the exec helper, when it runs the command, reports
    // itself (--started-fd) after its mounts and confinement.
    std::string started;
    if (io.started) {
        bool helper = args.size() > 1 && args[1] == kExecConfined;
        std::string fd = std::to_string(kSuperviseStartedFd);
        if (helper) args.insert(args.begin() + 2, {kStartedFdFlag, fd});
        started = helper ? fd + ":pass" : fd;
    }
    // First: getenv() finds them before a variable of the pod's of that name.
    for (auto &[name, value] : supervise_argv_env(args))
        s.env.insert(s.env.begin(), {name, value});
    if (io.terminal_fd >= 0) s.env.insert(s.env.begin(), {kSuperviseTerminalEnv, "1"});
    if (!started.empty()) s.env.insert(s.env.begin(), {kSuperviseStartedEnv, started});
    if (!spec.cgroup_request.empty())
        s.env.insert(s.env.begin(), {kSuperviseCgroupEnv, spec.cgroup_request});
    if (g_has_workload_nice)
        s.env.insert(s.env.begin(), {kSuperviseNiceEnv, std::to_string(g_workload_nice)});
    return spawn(loop, proc, supervisor, {"slurm-k8s-supervise", "--supervise"}, s,
                 std::move(on_exit), io);
}

void set_workload_nice(int nice) {
    g_has_workload_nice = true;
    g_workload_nice = nice;
}

std::optional<int> workload_nice() {
    return g_has_workload_nice ? std::optional<int>(g_workload_nice) : std::nullopt;
}

void kill_supervised(int pid) noexcept {
    if (pid <= 1) return;
    (void)kill(pid, SIGCONT);
    (void)kill(pid, supervisor_kill_signal());
}

void signal_group(int pgid, int sig) noexcept {
    if (pgid > 1) kill(-pgid, sig);
}

long long cgroup_oom_kills(const std::string &pod_uid, uint32_t job_id,
                           const std::string &container) noexcept {
    try {
        auto own = read_process_cgroups();
        return container_oom_kills(own ? *own : std::string(), pod_uid, job_id, container);
    } catch (...) {
    }
    return -1;
}

}  // namespace sk::shim
