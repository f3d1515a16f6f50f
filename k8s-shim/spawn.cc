#include "k8s-shim/spawn.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include <fstream>
#include <sstream>

namespace sk::shim {

int spawn_process(uv_loop_t *loop, uv_process_t *proc, const SpawnSpec &spec, uv_exit_cb on_exit,
                  uv_pipe_t *out, uv_pipe_t *err) {
    std::vector<char *> args, env;
    std::vector<std::string> env_strings;
    for (const auto &a : spec.argv)
        args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    env_strings.reserve(spec.env.size());
    for (const auto &e : spec.env)
        env_strings.push_back(e.name + "=" + e.value);
    for (auto &s : env_strings)
        env.push_back(s.data());
    env.push_back(nullptr);

    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_IGNORE;
    stdio[2].flags = UV_IGNORE;
    if (out) {
        stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
        stdio[1].data.stream = reinterpret_cast<uv_stream_t *>(out);
    }
    if (err) {
        stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
        stdio[2].data.stream = reinterpret_cast<uv_stream_t *>(err);
    }
    uv_process_options_t opt;
    memset(&opt, 0, sizeof opt);
    opt.exit_cb = on_exit;
    opt.file = args[0];
    opt.args = args.data();
    opt.env = env.data();
    opt.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
    opt.flags = UV_PROCESS_DETACHED;
    opt.stdio_count = 3;
    opt.stdio = stdio;
    return uv_spawn(loop, proc, &opt);
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
