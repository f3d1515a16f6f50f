#include "common/daemons/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include "common/procfs.h"

namespace sk {

namespace {

// Whether the process of a held /proc/<pid>/stat still runs (not a zombie).
// Async-signal-safe. Once the process is reaped, a read of its stat fails
// (ESRCH). The state follows the command name's ')', which ends within
// the first 30 bytes ("<pid> (<15 bytes>) S"); no later field holds a ')'.
bool held_alive(int fd) noexcept {
    if (fd < 0) return false;
    char buf[128];
    ssize_t n;
    do
        n = pread(fd, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    for (ssize_t i = n - 1; i >= 0; --i)
        if (buf[i] == ')') return i + 2 < n && buf[i + 2] != 'Z' && buf[i + 2] != 'X';
    return false;
}

long monotonic_ms() noexcept {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Async-signal-safe.
bool take_credentials(const JobCredentials &c) noexcept {
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setresgid(c.gid, c.gid, c.gid) != 0 ||
                           setresuid(c.uid, c.uid, c.uid) != 0))
        return false;
    return geteuid() == c.uid;
}

// The command name field of a /proc/<pid>/stat text: between the first '('
// and the last ')' (the name may hold either).
std::string_view stat_comm(std::string_view text) {
    auto open = text.find('('), close = text.rfind(')');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open)
        return {};
    return text.substr(open + 1, close - open - 1);
}

}  // namespace

RecordedContainers::~RecordedContainers() {
    for (const auto &h : procs_)
        if (h.stat_fd >= 0) close(h.stat_fd);
}

bool RecordedContainers::add(int pid, uint64_t start_ticks) {
    if (pid <= 1 || start_ticks == 0) return false;
    Held h;
    h.pid = pid;
    int fd = -1;
    if (procs_.size() < kMaxHeld) {
        std::string path = "/proc/" + std::to_string(pid) + "/stat";
        fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {  // not held: verified, and its group signalled by pid
        if (process_gone(pid, start_ticks)) return false;
        procs_.push_back(h);
        return true;
    }
    char buf[4096];  // a stat line is a few hundred bytes
    ssize_t n;
    do
        n = pread(fd, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    ProcStat st;
    std::string_view text(buf, n > 0 ? static_cast<size_t>(n) : 0);
    // Checked on the held file: the pid cannot have been reused since.
    if (!parse_proc_stat(text, &st) || st.state == 'Z' || st.state == 'X' ||
        st.start_ticks != start_ticks) {
        close(fd);
        return false;
    }
    h.stat_fd = fd;  // closed by the destructor
    h.supervisor = stat_comm(text) == kSupervisorComm;
    procs_.push_back(h);
    return true;
}

bool RecordedContainers::stop(const JobCredentials *as, long wait_ms) const {
    if (procs_.empty()) return true;
    pid_t child = fork();
    if (child < 0) return false;
    if (child == 0) {  // async-signal-safe calls only
        if (as && !take_credentials(*as)) _exit(1);
        bool waiting = false;
        for (const auto &h : procs_) {
            if (h.supervisor && held_alive(h.stat_fd)) {
                (void)kill(h.pid, SIGCONT);
                (void)kill(h.pid, supervisor_kill_signal());
                waiting = true;
            } else {
                (void)kill(-h.pid, SIGKILL);
            }
        }
        if (!waiting) _exit(0);
        // The wait is a grandchild's, so the caller's wait ends here; one
        // that cannot fork waits itself (still bounded).
        pid_t waiter = fork();
        if (waiter > 0) _exit(0);
        long deadline = monotonic_ms() + wait_ms;
        for (;;) {
            bool running = false;
            for (const auto &h : procs_)
                running = running || (h.supervisor && held_alive(h.stat_fd));
            if (!running || monotonic_ms() >= deadline) break;
            struct timespec tick = {0, 10 * 1000000L};
            (void)nanosleep(&tick, nullptr);
        }
        for (const auto &h : procs_)
            if (h.supervisor) (void)kill(-h.pid, SIGKILL);
        _exit(0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace sk
