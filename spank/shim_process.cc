#include "spank/shim_process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sstream>

#include "common/cgroup/cgroup_files.h"
#include "common/clock.h"
#include "common/fs.h"

namespace sk::spank {
namespace {

void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
}

// Closes every descriptor >= `first` except `keep` (async-signal-safe).
// close_range(2) is one system call; the fallback loops to RLIMIT_NOFILE.
// (A loop to 65536 cost 16-17 ms per job start in slurmstepd:
// bench/bench_slurm_start.py's hook profile.)
void close_fds_from(int first, int keep) {
    const unsigned k = static_cast<unsigned>(keep);
    if (keep < first) {
        if (close_range(static_cast<unsigned>(first), ~0U, 0) == 0) return;
    } else if ((keep == first || close_range(static_cast<unsigned>(first), k - 1, 0) == 0) &&
               close_range(k + 1, ~0U, 0) == 0) {
        return;
    }
    struct rlimit rl {};
    int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                  ? static_cast<int>(rl.rlim_cur)
                  : 65536;
    for (int fd = first; fd < max; fd++)
        if (fd != keep) close(fd);
}

// Child side after fork: async-signal-safe calls only. Writes errno to `pipe_fd`
// on failure and _exit(127)s.
[[noreturn]] void child(const char *path, char *const argv[], char *const envp[], uid_t uid,
                        gid_t gid, const gid_t *groups, int ngroups, const char *home, int log_fd,
                        int pipe_fd, const int *nice) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        sigaction(s, &dfl, nullptr);
    setsid();
    int oom = open("/proc/self/oom_score_adj", O_WRONLY);
    if (oom >= 0) {
        (void)!write(oom, "0", 1);
        close(oom);
    }
    if (nice) (void)setpriority(PRIO_PROCESS, 0, *nice);
    int devnull = open("/dev/null", O_RDONLY);
    int err = 0;
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
        err = errno;
    if (!err) close_fds_from(3, pipe_fd);
    if (!err && setgroups(static_cast<size_t>(ngroups), groups) != 0) err = errno;
    if (!err && setgid(gid) != 0) err = errno;
    if (!err && setuid(uid) != 0) err = errno;
    if (!err && chdir(home) != 0 && chdir("/") != 0) err = errno;
    if (!err) {
        umask(022);
        execve(path, argv, envp);
        err = errno;
    }
    (void)!write(pipe_fd, &err, sizeof err);
    _exit(127);
}

uid_t pid_uid(pid_t pid) {
    struct stat st;
    std::string p = "/proc/" + std::to_string(pid);
    if (stat(p.c_str(), &st) != 0) return static_cast<uid_t>(-1);
    return st.st_uid;
}

void subdirs(const std::string &dir, std::vector<std::string> *out) {
    DIR *d = opendir(dir.c_str());
    if (!d) return;
    while (struct dirent *e = readdir(d)) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
        std::string sub = dir + "/" + e->d_name;
        subdirs(sub, out);
        out->push_back(sub);  // children before their parent
    }
    closedir(d);
}

// Processes of `uid` in the dirs and their subdirs (never slurmstepd: root).
std::vector<pid_t> job_user_pids(const std::vector<std::string> &dirs, uid_t uid) {
    std::vector<pid_t> out;
    for (const auto &d : dirs) {
        std::vector<std::string> all;
        subdirs(d, &all);
        all.push_back(d);
        for (const auto &x : all)
            for (pid_t p : read_cgroup_procs(x))
                if (pid_uid(p) == uid) out.push_back(p);
    }
    return out;
}

bool reap(pid_t pid, bool *reaped) {
    if (*reaped) return true;
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) *reaped = true;
    return *reaped;
}

}  // namespace

std::string slurm_job_state(uint32_t job_id, int timeout_ms) {
    std::string path;
    const char *env_path = getenv("PATH");
    std::string dirs = env_path ? env_path : "";
    dirs += ":/usr/bin:/usr/local/bin";
    std::istringstream in(dirs);
    for (std::string d; std::getline(in, d, ':');)
        if (!d.empty() && d[0] == '/' && access((d + "/squeue").c_str(), X_OK) == 0) {
            path = d + "/squeue";
            break;
        }
    if (path.empty()) return "";
    std::string id = std::to_string(job_id);
    const char *argv[] = {path.c_str(), "-h", "-j", id.c_str(), "-o", "%T", nullptr};
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return "";
    pid_t pid = fork();
    if (pid == 0) {  // slurmstepd has threads: async-signal-safe calls only
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(p[1], 1) < 0 || dup2(devnull, 2) < 0)
            _exit(127);
        close_fds_from(3, -1);
        execv(argv[0], const_cast<char *const *>(argv));
        _exit(127);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return "";
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    std::string out;
    char buf[256];
    int64_t end = monotonic_ms() + timeout_ms;
    while (monotonic_ms() < end) {
        ssize_t n = read(p[0], buf, sizeof buf);
        if (n > 0 && out.size() < 256) out.append(buf, static_cast<size_t>(n));
        if (n == 0) break;
        if (n < 0 && errno != EAGAIN && errno != EINTR) break;
        if (n < 0) sleep_ms(10);
    }
    close(p[0]);
    int st = 0;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && monotonic_ms() < end)
        sleep_ms(10);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return "";
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return "";
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ' || out.back() == '\r'))
        out.pop_back();
    return out;
}

Result<pid_t> spawn_shim(const ShimSpec &spec) {
    std::vector<char *> argv, envp;
    for (const auto &a : spec.argv)
        argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto &e : spec.env)
        envp.push_back(const_cast<char *>(e.c_str()));
    envp.push_back(nullptr);

    std::vector<gid_t> groups(64);
    int ng = static_cast<int>(groups.size());
    struct passwd pw, *pwp = nullptr;
    char pwbuf[4096];
    if (getpwuid_r(spec.uid, &pw, pwbuf, sizeof pwbuf, &pwp) == 0 && pwp) {
        if (getgrouplist(pw.pw_name, spec.gid, groups.data(), &ng) < 0) {
            groups.resize(static_cast<size_t>(ng));
            getgrouplist(pw.pw_name, spec.gid, groups.data(), &ng);
        }
    } else {
        ng = 1;
        groups[0] = spec.gid;
    }

    int log_fd =
        open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (log_fd < 0) return fail(Error::Io, "open " + spec.log_path + ": " + strerror(errno));
    if (fchown(log_fd, 0, spec.gid) != 0) { /* the log stays root's: still usable */
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        close(log_fd);
        return fail(Error::Io, std::string("pipe2: ") + strerror(errno));
    }
    pid_t pid = fork();
    if (pid == 0)
        child(spec.path.c_str(), argv.data(), envp.data(), spec.uid, spec.gid, groups.data(), ng,
              spec.home.c_str(), log_fd, p[1], spec.nice ? &*spec.nice : nullptr);
    int fork_err = errno;
    close(p[1]);
    close(log_fd);
    if (pid < 0) {
        close(p[0]);
        return fail(Error::Io, std::string("fork: ") + strerror(fork_err));
    }
    int child_err = 0;
    ssize_t n;
    do
        n = read(p[0], &child_err, sizeof child_err);
    while (n < 0 && errno == EINTR);
    close(p[0]);
    if (n > 0) {
        waitpid(pid, nullptr, 0);
        return fail(Error::Io, "cannot start " + spec.path + " as uid " + std::to_string(spec.uid) +
                                   ": " + strerror(child_err));
    }
    return pid;
}

int stop_shim(pid_t shim, uid_t uid, const std::vector<std::string> &job_cgroups, int term_ms,
              int kill_ms) {
    bool reaped = false;
    if (shim > 0) {
        kill(-shim, SIGCONT);
        kill(-shim, SIGTERM);
        for (int64_t end = monotonic_ms() + term_ms; monotonic_ms() < end && !reap(shim, &reaped);)
            sleep_ms(20);
    } else {
        reaped = true;
    }
    // A shim's children may have left its process group (container runtimes
    // call setsid): the cgroups list them all.
    int64_t end = monotonic_ms() + kill_ms;
    for (;;) {
        if (shim > 0) kill(-shim, SIGKILL);
        auto left = job_user_pids(job_cgroups, uid);
        for (pid_t p : left)
            kill(p, SIGKILL);
        bool gone = reap(shim, &reaped);
        if ((left.empty() && gone) || monotonic_ms() >= end)
            return static_cast<int>(left.size()) + (gone ? 0 : 1);
        sleep_ms(20);
    }
}

std::vector<std::string> remove_job_cgroups(const std::vector<std::string> &job_cgroups,
                                            const std::string &root, int timeout_ms) {
    const pid_t self = getpid();
    for (const auto &dir : job_cgroups) {
        // "<root>/freezer/slurm_n1/uid_1/job_2" -> "<root>/freezer"
        auto rest = dir.find('/', root.size() + 1);
        if (rest == std::string::npos) continue;
        std::string hierarchy = dir.substr(0, rest);
        for (pid_t p : read_cgroup_procs(dir))
            if (p == self) {
                (void)move_to_cgroup(hierarchy, self);  // else the removal below says what is left
                break;
            }
    }
    std::vector<std::string> left;
    int64_t end = monotonic_ms() + timeout_ms;
    for (const auto &dir : job_cgroups) {
        std::vector<std::string> all;
        subdirs(dir, &all);
        all.push_back(dir);
        for (const auto &d : all) {
            while (rmdir(d.c_str()) != 0 && errno != ENOENT) {
                if (errno != EBUSY || monotonic_ms() >= end) {
                    left.push_back(d + ": " + strerror(errno));
                    break;
                }
                sleep_ms(20);
            }
        }
    }
    return left;
}

}  // namespace sk::spank
