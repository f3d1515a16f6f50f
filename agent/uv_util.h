// Small RAII wrappers over libuv handles: a handle's memory lives until its
// close callback, so the wrapper's destructor hands the handle to uv_close
// and frees it there. Callbacks are std::function, called through noexcept
// trampolines that log instead of letting an exception into libuv.
#pragma once

#include <cstdint>
#include <functional>

typedef struct uv_loop_s uv_loop_t;
typedef struct uv_timer_s uv_timer_t;

namespace sk::agent {

class Timer {
  public:
    explicit Timer(uv_loop_t *loop);
    ~Timer();
    Timer(const Timer &) = delete;
    Timer &operator=(const Timer &) = delete;
    // (Re)arms: fires after ms, then every repeat_ms when non-zero.
    void start(uint64_t ms, std::function<void()> cb, uint64_t repeat_ms = 0);
    void stop();
    bool active() const;

  private:
    struct State;
    State *s_;
};

// Runs fn on the next loop iteration (never inside the caller), or after
// delay_ms. The call owns its handle and frees it once it ran, so a retry
// needs no self-owning Timer (a Timer whose callback holds it never closes).
void defer(uv_loop_t *loop, std::function<void()> fn, uint64_t delay_ms = 0);

// Runs work on libuv's thread pool (it must not touch the loop or anything
// the loop's thread uses); the loop stays alive until it finished.
void run_in_pool(uv_loop_t *loop, std::function<void()> work);

// Drops every call deferred on `loop` that has not run yet, without running
// it, and closes its handle: for teardown, once the objects those calls
// point to are gone. Only the loop's thread may call defer and this.
void cancel_deferred(uv_loop_t *loop);

}  // namespace sk::agent
