#include "agent/uv_timer_source.h"

#include <utility>

#include "uv/handles.h"

namespace sk::agent {

namespace {

class UvSlot : public TimerSource::Slot {
  public:
    explicit UvSlot(uv_loop_t *loop) : t_(loop) {}
    void start(uint64_t ms, std::function<void()> cb, uint64_t repeat_ms) override {
        t_.start(ms, std::move(cb), repeat_ms);
    }
    void stop() override { t_.stop(); }
    bool active() const override { return t_.active(); }

  private:
    Timer t_;  // closes (dropping the callback) with the slot
};

}  // namespace

std::unique_ptr<TimerSource::Slot> UvTimerSource::timer() {
    return std::make_unique<UvSlot>(loop_);
}

void UvTimerSource::defer(std::function<void()> fn, uint64_t delay_ms) {
    sk::uv::defer(loop_, std::move(fn), delay_ms);
}

}  // namespace sk::agent
