// Keeps the job's shim running for the extern step's life.
//
// A shim that dies (a crash, an OOM kill, kill -9) leaves the job with no pod
// runtime: the agent reports its pods lost and the Node NotReady, but nothing
// else could start a new one in the right place. The extern slurmstepd can:
// it started the first, and a process forked from it lands in the same
// cgroups (the job's freezer, step_extern's devices and cpuset: only the job's
// GPUs and CPUs), as the job's user, with the same arguments.
//
// The keeper watches the shim through a pidfd on a thread of its own (its
// exit is seen even when slurmstepd's own wait for its tasks reaps it) and
// starts a new one from the same spec after a back-off: `first_ms`, doubled
// after each shim that lived less than `stable_ms`, at most `max_ms`; back to
// `first_ms` after one that lived longer. The new shim stops what its
// predecessor left (its state.json) and attaches to the agent, which makes
// the Node Ready again (docs/failure-model.md, "shim killed").
//
// Thread contract: start() and stop() are called from the hook's thread
// (task_post_fork, exit); everything else runs on the keeper's thread, which
// only forks through spawn_shim (async-signal-safe child) and logs.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"
#include "spank/shim_process.h"

namespace sk::spank {

class ShimKeeper {
  public:
    // Restarts wait first_ms, doubled at each death up to max_ms (the
    // common back-off, exact); a shim that ran stable_ms starts over.
    struct RestartPolicy {
        int first_ms = 1000;
        int max_ms = 60000;
        int stable_ms = 60000;
    };
    // what: how the log names the shim ("job 7: [node slurm-n1-7]").
    ShimKeeper(ShimSpec spec, std::string what, RestartPolicy policy);
    ShimKeeper(const ShimKeeper &) = delete;
    ShimKeeper &operator=(const ShimKeeper &) = delete;
    ~ShimKeeper();  // stop()

    // Watches `pid`, a shim just spawned from the spec. An error (no pidfd:
    // a kernel before 5.3) means no restarts; the shim runs on unwatched.
    Status start(pid_t pid);
    // Ends the watch: a restart that is waiting is not made, the thread is
    // joined. Returns the shim now running (or last started; it may have
    // died since), -1 when none could be started. Idempotent.
    pid_t stop();
    pid_t pid() const;
    int restarts() const { return restarts_.load(); }

  private:
    void run();
    // Waits up to ms for stop(); true when stopped.
    bool wait_stop(int ms) const;

    ShimSpec spec_;
    std::string what_;
    RestartPolicy policy_;
    int stop_fd_ = -1;  // eventfd: stop() writes it
    mutable std::mutex mu_;
    pid_t pid_ = -1;
    std::atomic<int> restarts_{0};
    std::thread thread_;
};

}  // namespace sk::spank
