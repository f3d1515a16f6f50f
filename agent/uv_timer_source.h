// The TimerSource of the daemon (agent/core/timer_source.h): libuv's timers on
// one loop, through libskuv (uv::Timer, uv::defer).
#pragma once

#include "agent/core/timer_source.h"

typedef struct uv_loop_s uv_loop_t;

namespace sk::agent {

class UvTimerSource : public TimerSource {
  public:
    explicit UvTimerSource(uv_loop_t *loop) : loop_(loop) {}
    std::unique_ptr<Slot> timer() override;
    void defer(std::function<void()> fn, uint64_t delay_ms = 0) override;

  private:
    uv_loop_t *loop_;
};

}  // namespace sk::agent
