// A second libuv loop on a thread of its own, where the shim's exec sessions
// run (k8s-shim/exec_session.h): what they relay, a `kubectl cp` of a
// checkpoint as much as an interactive shell, is then scheduled apart from
// the shim's loop, which starts the pods and reports their status, and at
// the job's own nice value (its commands', --workload-nice) while that loop
// runs at the plugin's shim_nice (docs/architecture.md, "Priorities").
//
// Contract:
// - Created on the main loop's thread; the thread starts with start().
// - post(fn): fn runs on the session loop's thread, in posting order; from
//   any thread. post_main(fn): fn runs on the main loop's thread, in posting
//   order; from any thread. Neither runs fn inside the call.
// - stop(), main thread: runs `last` on the session thread (where the owner
//   destroys what lives there), then that loop runs until its handles are
//   closed, and the thread is joined. Closures posted to either side and not
//   yet run are dropped (so one that names the owner never runs after it).
//   The destructor stops.
#pragma once

#include <uv.h>

#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "common/result.h"
#include "uv/handles.h"

namespace sk::shim {

class SessionLoop {
  public:
    // nice: the session thread's nice value (raised only: no privilege is
    // needed); none = the main thread's.
    SessionLoop(uv_loop_t *main, std::optional<int> nice);
    ~SessionLoop();
    SessionLoop(const SessionLoop &) = delete;
    SessionLoop &operator=(const SessionLoop &) = delete;

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
    bool loop_ready_ = false;
    std::optional<int> nice_;
    Queue to_session_, to_main_;
    Async session_wake_;  // on loop_: runs to_session_
    Async main_wake_;     // on the main loop: runs to_main_
    std::function<void()> last_;
    std::thread thread_;
};

}  // namespace sk::shim
