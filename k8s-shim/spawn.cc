#include "k8s-shim/spawn.h"

#include "k8s-shim/supervise.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include <fstream>
#include <sstream>

namespace sk::shim {

namespace {

int spawn(uv_loop_t *loop, Process &proc, const std::string &file, std::vector<std::string> args,
          const SpawnSpec &spec, Process::ExitCb on_exit, Pipe *out, Pipe *err) {
    SpawnOptions o;
    o.args = std::move(args);
    o.file = file;
    o.env.emplace();
    o.env->reserve(spec.env.size());
    for (const auto &e : spec.env)
        o.env->push_back(e.name + "=" + e.value);
    o.cwd = spec.cwd;
    o.detached = true;
    o.out = out;
    o.err = err;
    return proc.spawn(loop, o, std::move(on_exit));
}

}  // namespace

int spawn_process(uv_loop_t *loop, Process &proc, const SpawnSpec &spec, Process::ExitCb on_exit,
                  Pipe *out, Pipe *err) {
    return spawn(loop, proc, "", spec.argv, spec, std::move(on_exit), out, err);
}

int spawn_container(uv_loop_t *loop, Process &proc, const std::string &supervisor,
                    const SpawnSpec &spec, Process::ExitCb on_exit, Pipe *out, Pipe *err) {
    SpawnSpec s = spec;
    // First: getenv() finds it before a variable of the pod's of that name.
    s.env.insert(s.env.begin(), {kSuperviseArgvEnv, encode_supervise_argv(spec.argv)});
    return spawn(loop, proc, supervisor, {"slurm-k8s-supervise", "--supervise"}, s,
                 std::move(on_exit), out, err);
}

void kill_supervised(int pid) noexcept {
    if (pid <= 1) return;
    (void)kill(pid, SIGCONT);
    (void)kill(pid, supervisor_kill_signal());
}

void signal_group(int pgid, int sig) noexcept {
    if (pgid > 1) kill(-pgid, sig);
}

long long cgroup_oom_kills() noexcept {
    try {
        std::ifstream cg("/proc/self/cgroup");
        std::string line, path;
        while (std::getline(cg, line))
            if (line.rfind("0::", 0) == 0) path = line.substr(3);
        if (path.empty()) return -1;
        std::ifstream ev("/sys/fs/cgroup" + path + "/memory.events");
        std::string key;
        long long value;
        while (ev >> key >> value)
            if (key == "oom_kill") return value;
    } catch (...) {
    }
    return -1;
}

}  // namespace sk::shim
