// A second libuv loop on a thread of its own, at a nice value of its own:
// where the users' sessions relay their bytes (the shim's exec sessions,
// k8s-shim/exec_session.h; the agent's exec, attach and port-forward
// sessions, agent/stream_sessions.h), so that what they move, a `kubectl
// cp` of a checkpoint as much as an interactive shell, is scheduled apart
// from, and behind, the loop that starts the pods and reports their status
// (docs/architecture.md, "Priorities").
//
// Contract:
// - Created on the main loop's thread, with its loop ready: the owner may
//   make its handles on loop() before start(), which starts the thread; after
//   that only the thread touches them. Closures posted before start() wait
//   for it.
// - post(fn): fn runs on the thread, in posting order; from any thread.
//   post_main(fn): fn runs on the main loop's thread, in posting order; from
//   any thread. Neither runs fn inside the call.
// - stop(last), main thread, once: runs `last` on the thread (where the
//   owner destroys what lives on loop(); here if the thread never started),
//   then that loop runs until its handles are closed, the thread is joined
//   and the loop closed. Closures posted to either side and not yet run are
//   dropped (so one that names the owner never runs after it). The
//   destructor stops.
#pragma once

#include <uv.h>

#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/result.h"
#include "uv/handles.h"

namespace sk {
inline namespace uv {

class ThreadLoop {
  public:
    // name: the thread's (ps -L, top -H, perf), at most 15 bytes. nice: its
    // nice value (only raised: that needs no privilege); none = the main
    // thread's.
    ThreadLoop(uv_loop_t *main, std::string name, std::optional<int> nice);
    ~ThreadLoop();
    ThreadLoop(const ThreadLoop &) = delete;
    ThreadLoop &operator=(const ThreadLoop &) = delete;

    Status start();
    uv_loop_t *loop() { return &loop_; }
    void post(std::function<void()> fn);
    void post_main(std::function<void()> fn);
    void stop(std::function<void()> last = {});

  private:
    struct Queue {
        std::mutex mu;
        std::deque<std::function<void()>> fns;
        bool closed = false;
    };
    static void drain(Queue &q);
    void run();

    uv_loop_t loop_{};
    int init_rc_ = 0;
    bool stopped_ = false;
    std::string name_;
    std::optional<int> nice_;
    Queue to_loop_, to_main_;
    Async loop_wake_;  // on loop_: runs to_loop_
    Async main_wake_;  // on the main loop: runs to_main_
    std::thread thread_;
};

}  // namespace uv
}  // namespace sk
