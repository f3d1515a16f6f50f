#include "spank/shim_keeper.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "common/backoff.h"
#include "common/clock.h"
#include "common/log.h"

namespace sk::spank {
namespace {

// glibc 2.36's <sys/pidfd.h> declares pidfd_open without C linkage for C++:
// the system call itself (Linux 5.3).
int pidfd_of(pid_t pid) {
    return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

// How the shim ended, when this thread reaped it; slurmstepd's wait for its
// tasks reaps any child of its, so it may have been first.
std::string how_it_ended(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) != pid) return "ended";
    if (WIFSIGNALED(st))
        return "was killed by signal " + std::to_string(WTERMSIG(st)) + " (" +
               strsignal(WTERMSIG(st)) + ")";
    return "exited with status " + std::to_string(WEXITSTATUS(st));
}

}  // namespace

ShimKeeper::ShimKeeper(ShimSpec spec, std::string what, RestartPolicy policy)
    : spec_(std::move(spec)), what_(std::move(what)), policy_(policy) {}

ShimKeeper::~ShimKeeper() {
    stop();
}

pid_t ShimKeeper::pid() const {
    std::lock_guard<std::mutex> l(mu_);
    return pid_;
}

Status ShimKeeper::start(pid_t pid) {
    {
        std::lock_guard<std::mutex> l(mu_);
        pid_ = pid;
    }
    if (thread_.joinable()) return fail(Error::Internal, "the shim keeper runs already");
    stop_fd_ = eventfd(0, EFD_CLOEXEC);
    if (stop_fd_ < 0) return fail(Error::Io, std::string("eventfd: ") + strerror(errno));
    // The thread takes no signal: slurmstepd's handlers run on its own threads.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error &e) {
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        close(stop_fd_);
        stop_fd_ = -1;
        return fail(Error::Io, std::string("starting the shim keeper: ") + e.what());
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return {};
}

pid_t ShimKeeper::stop() {
    if (thread_.joinable()) {
        uint64_t one = 1;
        (void)!write(stop_fd_, &one, sizeof one);
        thread_.join();
    }
    if (stop_fd_ >= 0) close(stop_fd_);
    stop_fd_ = -1;
    return pid();
}

bool ShimKeeper::wait_stop(int ms) const {
    struct pollfd p = {stop_fd_, POLLIN, 0};
    int64_t end = monotonic_ms() + ms;
    for (;;) {
        int left = static_cast<int>(std::max<int64_t>(0, end - monotonic_ms()));
        int r = poll(&p, 1, left);
        if (r > 0) return true;
        if (r == 0 || (r < 0 && errno != EINTR)) return r < 0;
    }
}

void ShimKeeper::run() {
    // Exact delays (no jitter): one shim per job, nothing to spread.
    sk::Backoff restart(static_cast<uint64_t>(policy_.first_ms),
                        static_cast<uint64_t>(policy_.max_ms), sk::Backoff::no_jitter);
    int64_t started = monotonic_ms();
    for (;;) {
        pid_t pid = this->pid();
        int pfd = pidfd_of(pid);
        if (pfd < 0 && errno != ESRCH) {  // ESRCH: gone (and reaped) already
            LOG_ERROR(
                "extern: %s: cannot watch the shim (pid %d): pidfd_open: %s; it is not "
                "restarted if it dies",
                what_.c_str(), pid, strerror(errno));
            return;
        }
        if (pfd >= 0) {
            struct pollfd fds[2] = {{pfd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
            int r;
            do
                r = poll(fds, 2, -1);
            while (r < 0 && errno == EINTR);
            close(pfd);
            if (r < 0) {
                LOG_ERROR("extern: %s: watching the shim failed: poll: %s", what_.c_str(),
                          strerror(errno));
                return;
            }
            if (fds[1].revents) return;  // stop(): the job ends
        }
        int64_t lived = monotonic_ms() - started;
        if (lived >= policy_.stable_ms) restart.reset();
        int delay = static_cast<int>(restart.next_ms());
        LOG_WARN(
            "extern: %s: the shim (pid %d) %s after %lld s while the job runs; a new one "
            "starts in %d ms",
            what_.c_str(), pid, how_it_ended(pid).c_str(), static_cast<long long>(lived / 1000),
            delay);
        for (;;) {
            if (wait_stop(delay)) return;
            auto np = spawn_shim(spec_);
            if (np) {
                {
                    std::lock_guard<std::mutex> l(mu_);
                    pid_ = *np;
                }
                started = monotonic_ms();
                restarts_++;
                LOG_INFO("extern: %s: a new shim started, pid %d (restart %d)", what_.c_str(), *np,
                         restarts_.load());
                break;
            }
            delay = static_cast<int>(restart.next_ms());
            LOG_ERROR("extern: %s: starting a new shim failed: %s; trying again in %d ms",
                      what_.c_str(), np.message().c_str(), delay);
        }
    }
}

}  // namespace sk::spank
