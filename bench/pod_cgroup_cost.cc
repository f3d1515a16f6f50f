// bench/pod_cgroup_cost: what a pod's own cgroup costs at its start and end
// (common/cgroup/pod_cgroup.h), on this host's real cgroup hierarchies, as root.
// cgroup v1: a parent like a Slurm job's extern step is made in the devices
// and memory hierarchies (sk_bench_<pid>/job_1/step_extern), the project's
// own tree in cpu, cpuacct and pids. cgroup v2 (a pure unified hierarchy:
// tests/vm/bench-v2.sh runs it in the QEMU guest): sk_bench_<pid>/job_1/
// step_extern laid out as Slurm's cgroup/v2 does (cpu and memory below the
// job), the pod's directory with its limits and its device program. Then N
// times: fork a child that waits, and time
//   start  = enter_pod_cgroup (the pod's and its container's directories, the
//            settings, the move), what
//            the agent does for a container's supervisor on `cgroup_enter`;
//   end    = the child killed and reaped, then remove_pod_cgroup, what the
//            agent's sweep does once the pod is gone;
// next to the same fork/kill/reap without any cgroup (the baseline). Prints
// one JSON object: {"n", "start_us": {p50, p99}, "end_us": {...},
// "baseline_us": {...}, "hierarchies": [...]} ("unified" on v2). Exit 77
// where it cannot run (not root, neither v1 hierarchies nor a pure v2 one).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/cgroup/pod_cgroup.h"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double pct(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    auto i = static_cast<size_t>(std::lround(p / 100.0 * static_cast<double>(v.size() - 1)));
    return v[std::min(i, v.size() - 1)];
}

pid_t waiting_child() {
    pid_t p = fork();
    if (p == 0) {
        pause();
        _exit(0);
    }
    return p;
}

void end_child(pid_t p) {
    kill(p, SIGKILL);
    int st;
    waitpid(p, &st, 0);
}

bool is_dir(const std::string &p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool put(const std::string &path, const std::string &text) {
    std::ofstream f(path);
    f << text << std::flush;
    return f.good();
}

// A pure cgroup v2 host: this process's only line is the unified one.
bool unified_only_host() {
    std::ifstream f("/proc/self/cgroup");
    std::string line, all;
    int lines = 0;
    while (std::getline(f, line)) {
        lines++;
        all = line;
    }
    return lines == 1 && all.rfind("0::", 0) == 0;
}

}  // namespace

int main(int argc, char **argv) {
    long n = argc > 1 ? strtol(argv[1], nullptr, 10) : 200;
    if (n <= 0 || n > 100000) {
        fprintf(stderr, "usage: pod_cgroup_cost [N: 1..100000 pods]\n");
        return 2;
    }
    const std::string root = "/sys/fs/cgroup";
    const bool v2 = unified_only_host();
    if (geteuid() != 0 || (!v2 && (!is_dir(root + "/devices") || !is_dir(root + "/memory")))) {
        fprintf(stderr,
                "pod_cgroup_cost: needs root and the cgroup v1 devices and memory hierarchies, "
                "or a pure cgroup v2 one\n");
        return 77;
    }
    std::string job = "sk_bench_" + std::to_string(getpid());
    std::vector<sk::PodCgroupParent> parents;
    std::vector<std::string> made;
    std::vector<std::string> hierarchies = {"devices", "memory"};
    if (v2) {  // Slurm's layout: cpu and memory below the job, pids above it
        put(root + "/cgroup.subtree_control", "+cpu +memory +pids");
        std::string d = root + "/" + job;
        for (const std::string &x : {d, d + "/job_1", d + "/job_1/step_extern"}) {
            mkdir(x.c_str(), 0755);
            put(x + "/cgroup.subtree_control", x == d ? "+cpu +memory +pids" : "+cpu +memory");
            made.push_back(x);
        }
        parents.push_back({"", d + "/job_1/step_extern", false, true});
        hierarchies = {"unified"};
    }
    for (const char *h : {"devices", "memory"}) {
        if (v2) break;
        std::string d = root + "/" + h + "/" + job;
        for (const std::string &x : {d, d + "/job_1", d + "/job_1/step_extern"}) {
            mkdir(x.c_str(), 0755);
            made.push_back(x);
        }
        parents.push_back({h, d + "/job_1/step_extern"});
    }
    for (const char *h : {"cpu", "cpuacct", "pids"}) {
        if (v2 || !is_dir(root + "/" + h)) continue;
        parents.push_back(
            {h, root + "/" + h + "/" + sk::kOwnCgroupTree + "/job_bench" + std::to_string(getpid()),
             true});
        hierarchies.push_back(h);
    }
    sk::PodCgroupSettings set;
    for (unsigned minor : {0u, 1u, 2u}) {  // three GPUs of another pod
        sk::CharDevice d;
        d.index = static_cast<int>(minor);
        d.major = 195;
        d.minor = minor;
        set.deny.push_back(d);
    }
    set.gpus.push_back({3, "", 195, 3});  // its own (v2: its device program allows it)
    set.container = "main";               // its container's directory below the pod's
    set.container_memory_limit = int64_t{256} << 20;
    set.container_cpu_quota_us = 25000;
    set.memory_limit = int64_t{512} << 20;
    set.cpu_quota_us = 50000;
    set.cpu_shares = 512;
    set.pids_max = 4096;
    std::vector<double> start, end, base;
    int failures = 0;
    for (long i = 0; i < n; i++) {
        std::string uid = "bench-" + std::to_string(i);
        pid_t c = waiting_child();
        auto t0 = Clock::now();
        auto st = sk::enter_pod_cgroup(parents, uid, set, c);
        start.push_back(us_since(t0));
        if (!st) {
            if (failures++ == 0) fprintf(stderr, "pod_cgroup_cost: %s\n", st.message().c_str());
        }
        t0 = Clock::now();
        end_child(c);
        auto left = sk::remove_pod_cgroup(parents, uid);
        // v2 frees an emptied cgroup asynchronously: EBUSY for a moment (the
        // agent's sweep comes again later; here the wait is counted).
        for (int k = 0; !left.empty() && k < 1000; k++) {
            usleep(100);
            left = sk::remove_pod_cgroup(parents, uid);
        }
        end.push_back(us_since(t0));
        if (!left.empty() && failures++ == 0)
            fprintf(stderr, "pod_cgroup_cost: %s\n", left[0].c_str());
        t0 = Clock::now();
        pid_t b = waiting_child();
        end_child(b);
        base.push_back(us_since(t0));
    }
    sk::remove_own_job_cgroups(parents);
    for (auto it = made.rbegin(); it != made.rend(); ++it)
        rmdir(it->c_str());
    for (const auto &h : hierarchies)
        if (h == "cpu" || h == "cpuacct" || h == "pids")
            rmdir((root + "/" + h + "/" + sk::kOwnCgroupTree).c_str());  // only if empty
    printf(
        "{\"n\": %ld, \"failures\": %d, \"start_us\": {\"p50\": %.1f, \"p99\": %.1f}, "
        "\"end_us\": {\"p50\": %.1f, \"p99\": %.1f}, \"baseline_us\": {\"p50\": %.1f, "
        "\"p99\": %.1f}, \"hierarchies\": [",
        n, failures, pct(start, 50), pct(start, 99), pct(end, 50), pct(end, 99), pct(base, 50),
        pct(base, 99));
    for (size_t i = 0; i < hierarchies.size(); i++)
        printf("%s\"%s\"", i ? ", " : "", hierarchies[i].c_str());
    printf("]}\n");
    return failures ? 1 : 0;
}
