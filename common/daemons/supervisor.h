// A container's supervisor (k8s-shim/supervise.h) as its outside sees it:
// the signal that makes it kill every process of its container, and how the
// containers a dead shim recorded are stopped whole, by the restarted shim
// (k8s-shim/shim.cc) or by the agent (agent/controllers/lost_shim.cc). The recorded
// process group alone is not the container: a daemon (setsid, double fork)
// left it and is only the supervisor's descendant (docs/architecture.md,
// "Containers' processes"). Linked by the shim and the agent alike.
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sk {

// The supervisor's process name (PR_SET_NAME), the command name field of
// its /proc/<pid>/stat.
constexpr const char kSupervisorComm[] = "sk-supervise";

// Sent to a supervisor's pid, it kills every process of the container now,
// the main included, and the supervisor exits. SIGRTMAX - 1: no program has
// a default use for it, glibc reserves only the lowest real-time signals
// (so it is a call, not a constant), and valgrind, which the tests run the
// agent and the shim under (make check-valgrind), reserves SIGRTMAX itself:
// a client's kill() of it fails (EINVAL).
inline int supervisor_kill_signal() noexcept {
    return SIGRTMAX - 1;
}

// How long a supervisor told to kill everything may take (a kill pass
// slowed by a fork bomb) before its process group is killed without it.
constexpr long kSupervisorSweepMs = 10000;

// The job user's credentials, which the agent (root) takes to signal a job's
// processes: the kernel's permission check then bounds what a forged record
// can reach to that user's own processes.
struct JobCredentials {
    uint32_t uid = 0;
    uint32_t gid = 0;
};

// The containers a dead shim recorded: each by its recorded process (the
// supervisor, whose pid is the container's process group), verified by pid
// and start time and then held by an open /proc/<pid>/stat, which names that
// very process for good (a reused pid is another file), so the wait below
// never mistakes another process for it.
class RecordedContainers {
  public:
    // At most this many are held open (a forged record must not exhaust
    // the agent's descriptors); the group of any further one is SIGKILLed
    // without its supervisor's kill pass, as a record of a process that is
    // no supervisor.
    static constexpr size_t kMaxHeld = 256;

    RecordedContainers() = default;
    ~RecordedContainers();
    RecordedContainers(const RecordedContainers &) = delete;
    RecordedContainers &operator=(const RecordedContainers &) = delete;

    // Adds the process `pid` when it is the live one that started at
    // start_ticks; false (nothing added) when it is gone, a zombie, the pid
    // was reused, or pid <= 1. It counts as a supervisor when its name is
    // kSupervisorComm.
    bool add(int pid, uint64_t start_ticks);
    size_t size() const { return procs_.size(); }

    // Stops them all from a child of the caller (taking `as` first when
    // set): every live supervisor gets SIGCONT (one the container stopped
    // could not act) and supervisor_kill_signal(), every other process's
    // group SIGKILL at once. A grandchild then waits up to wait_ms for the
    // supervisors to exit (their kill passes) and SIGKILLs their process
    // groups, as a backstop; nobody waits for it (init or the nearest
    // subreaper reaps it), so the caller waits for the signals only, never
    // for a kill pass. Everything after the fork is async-signal-safe (the
    // agent has threads). True when the child could signal (it forked and
    // took the credentials).
    bool stop(const JobCredentials *as, long wait_ms) const;

  private:
    struct Held {
        int pid = 0;
        int stat_fd = -1;  // -1: over kMaxHeld, or /proc could not be opened
        bool supervisor = false;
    };
    std::vector<Held> procs_;
};

}  // namespace sk
