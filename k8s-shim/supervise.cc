#include "k8s-shim/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "common/daemons/agent_client.h"
#include "common/daemons/protocol.h"
#include "common/procfs.h"
#include "common/strings.h"

namespace sk::shim {

namespace {

void reap(pid_t main_pid, int *main_status, bool *main_reaped) {
    int ws;
    pid_t p;
    while ((p = waitpid(-1, &ws, WNOHANG)) > 0)
        if (p == main_pid) {
            *main_status = ws;
            *main_reaped = true;
        }
}

// Waits up to ms for a SIGCHLD (blocked: it stays pending until taken here).
void wait_child_event(long ms) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    (void)sigtimedwait(&chld, nullptr, &ts);
}

[[noreturn]] void exit_like(int ws) {
    if (WIFEXITED(ws)) _exit(WEXITSTATUS(ws));
    int sig = WIFSIGNALED(ws) ? WTERMSIG(ws) : SIGKILL;
    // The same signal, without a second core dump.
    struct rlimit none = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &none);
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    (void)kill(getpid(), sig);
    (void)sigprocmask(SIG_UNBLOCK, &one, nullptr);
    _exit(128 + sig);  // a signal whose default is not to terminate
}

}  // namespace

std::string encode_supervise_argv(const std::vector<std::string> &argv) {
    std::string out;
    for (const auto &w : argv)
        out += std::to_string(w.size()) + ":" + w;
    return out;
}

std::vector<std::pair<std::string, std::string>> supervise_argv_env(
    const std::vector<std::string> &argv) {
    std::string text = encode_supervise_argv(argv);
    std::vector<std::pair<std::string, std::string>> out;
    for (size_t at = 0, i = 0; at < text.size(); at += kSuperviseArgvPart, i++)
        out.emplace_back(kSuperviseArgvEnv + std::to_string(i),
                         text.substr(at, kSuperviseArgvPart));
    out.emplace_back(kSuperviseArgvPartsEnv, std::to_string(out.size()));
    return out;
}

bool decode_supervise_argv(std::string_view text, std::vector<std::string> *argv) {
    std::vector<std::string> out;
    while (!text.empty()) {
        auto colon = text.find(':');
        if (colon == std::string_view::npos || colon == 0 || colon > 10) return false;
        auto len = parse_uint(text.substr(0, colon), "length", text.size());
        if (!len || *len > text.size() - colon - 1) return false;
        std::string word(text.substr(colon + 1, *len));
        if (word.find('\0') != std::string::npos) return false;
        out.push_back(std::move(word));
        text.remove_prefix(colon + 1 + *len);
    }
    if (out.empty()) return false;
    *argv = std::move(out);
    return true;
}

std::vector<pid_t> live_descendants() {
    std::multimap<int, int> children;  // ppid -> pid
    if (DIR *d = opendir("/proc")) {
        while (struct dirent *e = readdir(d)) {
            char *end = nullptr;
            long pid = strtol(e->d_name, &end, 10);
            if (pid <= 0 || *end != '\0') continue;
            ProcStat st;
            if (!read_proc_stat(static_cast<int>(pid), &st) || st.state == 'Z' || st.state == 'X')
                continue;
            children.emplace(st.ppid, static_cast<int>(pid));
        }
        closedir(d);
    }
    std::vector<pid_t> out;
    std::vector<int> todo{getpid()};
    while (!todo.empty()) {
        int p = todo.back();
        todo.pop_back();
        auto [b, e] = children.equal_range(p);
        for (auto it = b; it != e; ++it) {
            out.push_back(it->second);
            todo.push_back(it->second);
        }
    }
    return out;
}

void sweep_descendants(pid_t main_pid, int *main_status, bool *main_reaped) {
    std::set<pid_t> stopped, refused;
    for (;;) {
        reap(main_pid, main_status, main_reaped);
        std::vector<pid_t> left;
        bool fresh = false;
        for (pid_t p : live_descendants()) {
            if (refused.count(p)) continue;
            if (stopped.insert(p).second) {
                if (kill(p, SIGSTOP) != 0) {
                    stopped.erase(p);
                    if (errno == EPERM) refused.insert(p);
                    continue;  // or gone (ESRCH)
                }
                fresh = true;
            }
            left.push_back(p);
        }
        if (left.empty()) break;
        if (fresh) continue;  // it may have forked before it stopped: scan again
        for (pid_t p : left)
            (void)kill(p, SIGKILL);
        wait_child_event(50);
    }
    reap(main_pid, main_status, main_reaped);
}

namespace {
void report_not_started(int fd) {
    if (fd >= 0) (void)!write(fd, "F", 1);
}
}  // namespace

int supervise_main(char **argv, bool terminal, const int *nice, int started_fd, bool started_pass) {
    if (started_fd >= 0) (void)fcntl(started_fd, F_SETFD, FD_CLOEXEC);
    // Every failure before the command's exec is reported on started_fd.
    struct Report {
        int fd;
        bool armed = true;
        ~Report() {
            if (armed) report_not_started(fd);
        }
    } report{started_fd};
    if (!argv[0]) {
        fprintf(stderr, "slurm-k8s-shim --supervise: no command\n");
        return 128;
    }
    if (terminal && ioctl(STDIN_FILENO, TIOCSCTTY, 0) != 0) {
        fprintf(stderr, "cannot start '%s': no controlling terminal: %s\n", argv[0],
                strerror(errno));
        return 128;
    }
    (void)prctl(PR_SET_NAME, kSupervisorComm);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        fprintf(stderr, "slurm-k8s-shim --supervise: PR_SET_CHILD_SUBREAPER: %s\n",
                strerror(errno));
        return 128;
    }
    // Every signal is taken synchronously (sigwaitinfo), so none can kill or
    // stop the supervisor but SIGKILL and SIGSTOP.
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    (void)sigprocmask(SIG_BLOCK, &all, nullptr);

    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        fprintf(stderr, "cannot start '%s': pipe: %s\n", argv[0], strerror(errno));
        return 128;
    }
    pid_t main_pid = fork();
    if (main_pid < 0) {
        int e = errno;
        // EAGAIN: the pids cgroup (the pod's pod_pids_max, the job's) or
        // RLIMIT_NPROC is full, not the command's fault: say which limit.
        fprintf(stderr, "cannot start '%s': fork: %s%s\n", argv[0], strerror(e),
                e == EAGAIN ? " (the pod's process limit is reached: its cgroup's pids.max, or "
                              "the user's RLIMIT_NPROC)"
                            : "");
        return 128;
    }
    if (main_pid == 0) {
        close(ep[0]);
        // The exec helper reports its own start on the descriptor (it must
        // survive this exec); a plain command closes it by its exec.
        if (started_fd >= 0 && started_pass) (void)fcntl(started_fd, F_SETFD, 0);
        (void)sigprocmask(SIG_SETMASK, &none, nullptr);
        errno = 0;
        int own = getpriority(PRIO_PROCESS, 0);
        if (nice && errno == 0 && *nice > own) (void)setpriority(PRIO_PROCESS, 0, *nice);
        execvp(argv[0], argv);
        int e = errno;
        (void)!write(ep[1], &e, sizeof e);
        _exit(127);
    }
    close(ep[1]);
    int exec_errno = 0;
    ssize_t n;
    do
        n = read(ep[0], &exec_errno, sizeof exec_errno);
    while (n < 0 && errno == EINTR);
    close(ep[0]);
    int ws = 0;
    bool main_reaped = false;
    if (n == static_cast<ssize_t>(sizeof exec_errno)) {
        fprintf(stderr, "cannot start '%s': %s\n", argv[0], strerror(exec_errno));
        (void)waitpid(main_pid, &ws, 0);
        return 128;
    }
    // Exec'd: the command's copy of the report closed with its exec (or the
    // helper's will at its own); this one goes now, so the shim sees the end.
    report.armed = false;
    if (started_fd >= 0) close(started_fd);

    const int kill_sig = supervisor_kill_signal();
    while (!main_reaped) {
        siginfo_t si;
        int sig = sigwaitinfo(&all, &si);
        if (sig == SIGCHLD) reap(main_pid, &ws, &main_reaped);
        if (sig == kill_sig) break;
    }
    sweep_descendants(main_pid, &ws, &main_reaped);
    // A main this process may not signal (setuid): the container lasts as
    // long as it does.
    while (!main_reaped && waitpid(main_pid, &ws, 0) < 0 && errno == EINTR) {
    }
    exit_like(ws);
}

namespace {

// The agent moves this process into its pod's cgroup (kSuperviseCgroupEnv).
Status enter_pod_cgroup(const std::string &request) {
    auto parts = split(request, '\n');
    if (parts.size() != 4) return fail(Error::InvalidArgument, "malformed request");
    proto::CgroupEnter m;
    m.pod_uid = parts[1];
    m.container = parts[3];
    if (!parts[2].empty()) {
        auto gpus = parse_index_list(parts[2], "GPUs");
        if (!gpus) return gpus.failure();
        m.gpus = *gpus;
    }
    // The agent checks this process's name: set before the first request.
    (void)prctl(PR_SET_NAME, kSupervisorComm);
    // An agent that is restarting, or that has as many of this user's
    // connections open as it takes (a burst of container starts), answers
    // Unavailable: asked again, with back-off, within 15 s in all.
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long delay_ms = 20;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left_ms =
            15000 - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        if (left_ms <= 0) return fail(Error::Timeout, "no answer from the agent within 15 s");
        AgentClient agent(parts[0], static_cast<int>(left_ms));
        auto r = agent.call("cgroup_enter", proto::to_json(m));
        if (r) return {};
        if (r.error() != Error::Unavailable || left_ms <= delay_ms) return r.failure();
        struct timespec d = {delay_ms / 1000, (delay_ms % 1000) * 1000000};
        nanosleep(&d, nullptr);
        delay_ms = std::min(delay_ms * 2, 1000L);
    }
}

}  // namespace

int supervise_env_main() {
    std::string text;
    const char *parts_text = getenv(kSuperviseArgvPartsEnv);
    auto parts = parse_uint(parts_text ? parts_text : "", kSuperviseArgvPartsEnv, 1000);
    unsetenv(kSuperviseArgvPartsEnv);
    bool complete = parts.ok();
    for (uint64_t i = 0; complete && i < *parts; i++) {
        std::string name = kSuperviseArgvEnv + std::to_string(i);
        const char *part = getenv(name.c_str());
        complete = part != nullptr;
        if (part) text += part;
        unsetenv(name.c_str());
    }
    std::vector<std::string> words;
    if (!complete || !decode_supervise_argv(text, &words)) {
        fprintf(stderr, "slurm-k8s-shim --supervise: no valid %s0...\n", kSuperviseArgvEnv);
        return 128;
    }
    const char *terminal = getenv(kSuperviseTerminalEnv);
    bool on_terminal = terminal && strcmp(terminal, "1") == 0;
    unsetenv(kSuperviseTerminalEnv);
    const char *nice_text = getenv(kSuperviseNiceEnv);
    int nice = 0;
    bool has_nice = false;
    if (nice_text) {
        auto v = parse_nice(nice_text, kSuperviseNiceEnv);
        if (!v) {
            fprintf(stderr, "slurm-k8s-shim --supervise: %s\n", v.message().c_str());
            return 128;
        }
        nice = *v;
        has_nice = true;
        unsetenv(kSuperviseNiceEnv);
    }
    int started_fd = -1;
    bool started_pass = false;
    if (const char *s = getenv(kSuperviseStartedEnv)) {
        std::string v = s;
        unsetenv(kSuperviseStartedEnv);
        started_pass = v.size() > 5 && v.compare(v.size() - 5, 5, ":pass") == 0;
        if (std::to_string(kSuperviseStartedFd) == v.substr(0, v.find(':')))
            started_fd = kSuperviseStartedFd;
    }
    if (const char *cg = getenv(kSuperviseCgroupEnv)) {
        std::string request = cg;
        unsetenv(kSuperviseCgroupEnv);
        if (auto st = enter_pod_cgroup(request); !st) {
            report_not_started(started_fd);
            fprintf(stderr, "cannot start '%s': not placed in its pod's cgroup: %s\n",
                    words.empty() ? "" : words[0].c_str(), st.message().c_str());
            return 128;
        }
    }
    std::vector<char *> argv;
    argv.reserve(words.size() + 1);
    for (auto &w : words)
        argv.push_back(w.data());
    argv.push_back(nullptr);
    return supervise_main(argv.data(), on_terminal, has_nice ? &nice : nullptr, started_fd,
                          started_pass);
}

}  // namespace sk::shim
