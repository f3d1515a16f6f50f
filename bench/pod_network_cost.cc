// bench/pod_network_cost: what a pod's own network costs at its start and
// end (agent/network/pod_network.h, k8s-shim/sandbox.h), as root, with the
// real CNI plugins, in a network and mount namespace of its own (the
// bridge, the veths and the mounts go with it). N times:
//   start = the shim's sandbox (`slurm-k8s-shim --pod-sandbox` as an
//           unprivileged user, up to its "ready") plus the agent's attach
//           (the checks, the namespaces held, the bridge plugin's ADD with
//           host-local), what a pod with its own network waits for before
//           its containers start;
//   end   = the agent's detach (the plugin's DEL, the namespaces let go);
// and the sandbox alone. Then the weight push of a trainer on the host to
// a rollout server: 2 GiB over one TCP connection to a pod's address (its
// veth on the bridge) and to a server on the host's own network
// (loopback), the median of three each. Prints one JSON object: {"n",
// "start_us": {p50, p99}, "end_us": {...}, "sandbox_us": {...},
// "push_mib_s": {"pod", "host"}}. Exit 77 where it cannot run (not root,
// no plugins).
// usage: pod_network_cost SHIM_BINARY CNI_PLUGIN_DIR [N] [UID]
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent/network/pod_network.h"
#include "common/fs.h"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

std::string summary(const std::vector<double> &v) {
    char buf[96];
    snprintf(buf, sizeof buf, "{\"p50\": %.0f, \"p99\": %.0f}", pct(v, 50), pct(v, 99));
    return buf;
}

// The sandbox as the shim starts it: its pid once it wrote "ready", and the
// write end of its stdin (closed: it exits).
struct Sandbox {
    pid_t pid = 0;
    int hold = -1;
};

Sandbox start_sandbox(const std::string &shim, uid_t uid, int i) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 ||
            setresuid(uid, uid, uid) != 0)
            _exit(126);
        std::string host = "pod-" + std::to_string(i);
        execl(shim.c_str(), shim.c_str(), "--pod-sandbox", host.c_str(), (char *)nullptr);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    char buf[16] = {};
    ssize_t n = read(out[0], buf, sizeof buf - 1);
    close(out[0]);
    if (n != 6) {
        fprintf(stderr, "the sandbox did not start (%zd)\n", n);
        exit(1);
    }
    return {pid, in[1]};
}

// Bytes/s of `bytes` sent over one TCP connection to addr:port, where a
// child process (in the network namespace `netns`, "" = this one) reads
// them all: the weight push of a trainer to a rollout server.
double throughput(const std::string &netns, const std::string &addr, uint16_t port, size_t bytes) {
    int ready[2];
    if (pipe(ready) != 0) exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        if (!netns.empty()) {
            int fd = open(netns.c_str(), O_RDONLY);
            if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(1);
        }
        int l = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        if (bind(l, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0 || listen(l, 1) != 0)
            _exit(1);
        (void)!write(ready[1], "r", 1);
        int c = accept(l, nullptr, nullptr);
        std::vector<char> buf(1 << 20);
        while (read(c, buf.data(), buf.size()) > 0) {
        }
        _exit(0);
    }
    char r;
    (void)!read(ready[0], &r, 1);
    close(ready[0]);
    close(ready[1]);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
    if (connect(c, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0) {
        perror("connect");
        exit(1);
    }
    std::vector<char> buf(1 << 20, 'w');
    auto t0 = Clock::now();
    for (size_t sent = 0; sent < bytes;) {
        ssize_t n = write(c, buf.data(), std::min(buf.size(), bytes - sent));
        if (n <= 0) exit(1);
        sent += static_cast<size_t>(n);
    }
    shutdown(c, SHUT_WR);
    int st;
    waitpid(pid, &st, 0);  // the reader has it all
    double s_ = std::chrono::duration<double>(Clock::now() - t0).count();
    close(c);
    return static_cast<double>(bytes) / s_;
}

void stop_sandbox(const Sandbox &s) {
    close(s.hold);
    int st;
    waitpid(s.pid, &st, 0);
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pod_network_cost SHIM CNI_PLUGIN_DIR [N] [UID]\n");
        return 2;
    }
    if (geteuid() != 0) return 77;
    std::string shim = argv[1], plugins = argv[2];
    int n = argc > 3 ? atoi(argv[3]) : 100;
    uid_t uid = argc > 4 ? static_cast<uid_t>(atoi(argv[4])) : 65534;
    if (access((plugins + "/bridge").c_str(), X_OK) != 0) return 77;
    // A network and mount namespace of its own: the bridge and the mounts
    // go with it.
    if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0 ||
        mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        perror("unshare");
        return 77;
    }
    if (system("ip link set lo up") != 0) return 77;
    char tmpl[] = "/tmp/sk-bench-net-XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    std::string dir = tmpl;
    chmod(dir.c_str(), 0755);
    uv_loop_t loop;
    uv_loop_init(&loop);
    sk::agent::PodNetworkSettings s;
    s.cni.plugin_dir = plugins;
    s.cni.bridge = "sk-bench0";
    s.cni.subnet = "10.250.0.0/16";
    s.cni.masquerade = false;
    if (const char *mtu = getenv("BENCH_NET_MTU")) s.cni.mtu = static_cast<unsigned>(atoi(mtu));
    s.cni.ipam_dir = dir + "/ipam";
    s.dir = dir + "/pods";
    std::vector<double> start, end, sandbox;
    char push[160] = "";
    {
        sk::agent::CniPodNetworks nets(&loop, s);
        if (auto st = nets.start(); !st) {
            fprintf(stderr, "%s\n", st.message().c_str());
            return 1;
        }
        for (int i = 0; i < n + 5; i++) {  // 5 warm-up rounds, not counted
            std::string uid_s = "bench-" + std::to_string(i);
            auto t0 = Clock::now();
            Sandbox sb = start_sandbox(shim, uid, i);
            double sb_us = us_since(t0);
            bool ok = false, done = false;
            sk::agent::PodNetworkRequest r;
            r.pod_uid = uid_s;
            r.pod_name = "bench/" + uid_s;
            r.sandbox_pid = sb.pid;
            r.uid = uid;
            nets.attach(r, [&](sk::Result<sk::agent::PodAddress> a) {
                ok = a.ok();
                if (!ok) fprintf(stderr, "attach: %s\n", a.message().c_str());
                done = true;
            });
            while (!done)
                uv_run(&loop, UV_RUN_ONCE);
            double start_us = us_since(t0);
            stop_sandbox(sb);
            if (!ok) return 1;
            auto t1 = Clock::now();
            done = false;
            nets.detach(uid_s, [&] { done = true; });
            while (!done)
                uv_run(&loop, UV_RUN_ONCE);
            if (i >= 5) {
                start.push_back(start_us);
                sandbox.push_back(sb_us);
                end.push_back(us_since(t1));
            }
        }
        // The weight push: 2 GiB to a pod over its veth, and over the
        // host's own network (loopback) beside it, three times each in turn.
        std::vector<double> pod_bps, host_bps;
        Sandbox sb = start_sandbox(shim, uid, 9999);
        bool done = false;
        std::string ip;
        sk::agent::PodNetworkRequest r;
        r.pod_uid = "bench-push";
        r.pod_name = "bench/push";
        r.sandbox_pid = sb.pid;
        r.uid = uid;
        nets.attach(r, [&](sk::Result<sk::agent::PodAddress> a) {
            if (a) ip = a->ip;
            done = true;
        });
        while (!done)
            uv_run(&loop, UV_RUN_ONCE);
        stop_sandbox(sb);
        if (ip.empty()) return 1;
        const size_t bytes = size_t{2} << 30;
        for (int k = 0; k < 3; k++) {
            pod_bps.push_back(throughput(s.dir + "/bench-push/net", ip, 5201, bytes));
            host_bps.push_back(throughput("", "127.0.0.1", 5202, bytes));
        }
        done = false;
        nets.detach("bench-push", [&] { done = true; });
        while (!done)
            uv_run(&loop, UV_RUN_ONCE);
        std::sort(pod_bps.begin(), pod_bps.end());
        std::sort(host_bps.begin(), host_bps.end());
        snprintf(push, sizeof push, "\"push_mib_s\": {\"pod\": %.0f, \"host\": %.0f}",
                 pod_bps[1] / (1 << 20), host_bps[1] / (1 << 20));
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    (void)sk::remove_tree(dir);
    printf("{\"n\": %d, \"start_us\": %s, \"end_us\": %s, \"sandbox_us\": %s, %s}\n", n,
           summary(start).c_str(), summary(end).c_str(), summary(sandbox).c_str(), push);
    return 0;
}
