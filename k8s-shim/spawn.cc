#include "k8s-shim/spawn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <fstream>
#include <sstream>

namespace sk::shim {

int spawn_process(uv_loop_t *loop, Process &proc, const SpawnSpec &spec, Process::ExitCb on_exit,
                  Pipe *out, Pipe *err) {
    SpawnOptions o;
    o.args = spec.argv;
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

void signal_group(int pgid, int sig) noexcept {
    if (pgid > 1) kill(-pgid, sig);
}

unsigned long long proc_start_time(int pid) noexcept {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    // comm may contain spaces and ')': fields resume after the last ')'.
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    p += 2;  // ") " then field 3 (state)
    unsigned long long v = 0;
    for (int field = 3; field <= 22 && *p; field++) {
        char *end = strchr(p, ' ');
        if (field == 22) {
            v = strtoull(p, nullptr, 10);
            break;
        }
        if (!end) return 0;
        p = end + 1;
    }
    return v;
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
