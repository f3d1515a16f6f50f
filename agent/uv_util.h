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

// Runs fn on the next loop iteration (never inside the caller).
void defer(uv_loop_t *loop, std::function<void()> fn);

}  // namespace sk::agent
