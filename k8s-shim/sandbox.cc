#include "k8s-shim/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <uv.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/daemons/shim_protocol.h"
#include "common/log.h"

namespace sk::shim {

namespace {

bool write_proc(const char *path, const std::string &text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    int saved = errno;
    close(fd);
    errno = saved;
    return ok;
}

int failed(const char *what) {
    fprintf(stderr, "slurm-k8s-shim %s: %s: %s\n", kPodSandbox, what, strerror(errno));
    return 1;
}

}  // namespace

int pod_sandbox_main(int argc, char **argv) {
    int i = 2;
    if (i + 1 != argc) {
        fprintf(stderr, "usage: slurm-k8s-shim %s HOSTNAME\n", kPodSandbox);
        return 2;
    }
    const char *hostname = argv[i];
    // Gone with the shim: the agent holds the namespaces by then, or the
    // pod is not started.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) return 1;
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWUTS) != 0)
        return failed(
            "a pod's own network needs user namespaces for the job's user (docs/admin-guide.md, "
            "\"User namespaces\"); unshare");
    if (!write_proc("/proc/self/setgroups", "deny\n")) return failed("setgroups");
    if (!write_proc("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n"))
        return failed("uid_map");
    if (!write_proc("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n"))
        return failed("gid_map");
    if (sethostname(hostname, strlen(hostname)) != 0) return failed("sethostname");
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return failed("socket");
    struct ifreq ifr {};
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    bool up = ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    up = up && ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
    int saved = errno;
    close(s);
    errno = saved;
    if (!up) return failed("bringing lo up");
    if (write(STDOUT_FILENO, "ready\n", 6) != 6) return failed("writing ready");
    char c;
    while (read(STDIN_FILENO, &c, 1) > 0 || errno == EINTR) {
        errno = 0;
    }
    return 0;
}

struct Sandboxes::Held {
    Process proc;
    Pipe in, out, err;
    Timer hold;
    std::string said, errors;
    Done done;
    bool exited = false;

    void report(int pid, const std::string &why) {
        if (!done) return;
        auto d = std::move(done);
        done = nullptr;
        d(pid, why);
    }
    void close_all() {
        in.close();
        out.close();
        err.close();
        hold.close();
    }
};

Sandboxes::~Sandboxes() {
    // The shim's end: they die with it (PR_SET_PDEATHSIG) in any case.
    auto stop = [](const std::shared_ptr<Held> &h) {
        h->done = nullptr;
        h->close_all();
        if (!h->exited) h->proc.kill(SIGKILL);
    };
    for (auto &[uid, h] : held_)
        stop(h);
    for (auto &h : going_)
        stop(h);
}

void Sandboxes::make(const std::string &uid, const std::string &hostname, Done done) {
    release(uid);
    auto h = std::make_shared<Held>();
    h->done = std::move(done);
    h->in = Pipe(loop_);
    h->out = Pipe(loop_);
    h->err = Pipe(loop_);
    h->hold = Timer(loop_);
    SpawnOptions o;
    o.args = {helper_, kPodSandbox, hostname};
    o.in = &h->in;
    o.out = &h->out;
    o.err = &h->err;
    std::weak_ptr<Held> weak = h;
    // The exit reaps it and drops it (held or going).
    int rc = h->proc.spawn(loop_, o, [this, uid, weak](int64_t status, int sig) {
        auto held = weak.lock();
        if (!held) return;
        held->exited = true;
        std::string why = held->errors.empty() ? "the sandbox exited with " +
                                                     std::to_string(sig ? 128 + sig : status)
                                               : held->errors;
        while (!why.empty() && why.back() == '\n')
            why.pop_back();
        held->report(0, why);
        held->close_all();
        auto it = held_.find(uid);
        if (it != held_.end() && it->second == held) held_.erase(it);
        going_.erase(std::remove(going_.begin(), going_.end(), held), going_.end());
    });
    if (rc != 0) {
        h->close_all();
        auto d = std::move(h->done);
        d(0, std::string("cannot start the sandbox: ") + uv_strerror(rc));
        return;
    }
    held_[uid] = h;
    h->out.read_start([weak](ssize_t n, const char *data) {
        auto held = weak.lock();
        if (!held || n < 0) return;
        if (held->said.size() < 64) held->said.append(data, static_cast<size_t>(n));
        if (held->said.find("ready\n") != std::string::npos) held->report(held->proc.pid(), "");
    });
    h->err.read_start([weak](ssize_t n, const char *data) {
        auto held = weak.lock();
        if (held && n > 0 && held->errors.size() < 1024)
            held->errors.append(data, static_cast<size_t>(std::min<ssize_t>(n, 1024)));
    });
    h->hold.start(uint64_t{proto::kSandboxHoldSeconds} * 1000, [this, uid] { release(uid); });
}

void Sandboxes::release(const std::string &uid) {
    auto it = held_.find(uid);
    if (it == held_.end()) return;
    auto h = it->second;
    held_.erase(it);
    h->report(0, "the sandbox was let go before it was ready");
    // EOF on its stdin: it exits, and its exit drops it; SIGKILL if it does
    // not within 5 s.
    h->in.close();
    h->hold.start(5000, [raw = h.get()] { raw->proc.kill(SIGKILL); });
    going_.push_back(std::move(h));
}

}  // namespace sk::shim
