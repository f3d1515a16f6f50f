#include "k8s-shim/spawn.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include <fstream>
#include <sstream>

#include "k8s-shim/confine.h"

namespace sk::shim {

int spawn_process(uv_loop_t *loop, Process &proc, const SpawnSpec &spec, Process::ExitCb on_exit,
                  Pipe *out, Pipe *err) {
    SpawnOptions o;
    if (spec.confine.any()) {
        if (spec.helper.empty()) return UV_EPERM;
        o.args = {spec.helper, kExecConfined};
        if (spec.confine.no_new_privs) o.args.push_back(kNoNewPrivsFlag);
        if (spec.confine.drop_capabilities) o.args.push_back(kDropCapsFlag);
        if (spec.confine.seccomp_default) o.args.push_back(kSeccompDefaultFlag);
        o.args.push_back("--");
    }
    o.args.insert(o.args.end(), spec.argv.begin(), spec.argv.end());
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

std::string self_executable() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "";
    return std::string(buf, static_cast<size_t>(n));
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
