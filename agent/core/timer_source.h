// Where the controllers' timers and deferred calls come from, injectable as
// the clock is (agent/core/clock.h): the daemon hands them libuv's
// (agent/uv_timer_source.h); the controller unit tests hand them a source
// that runs on a virtual clock and jumps from one due timer to the next
// (tests/unit/manual_timers.h), so a test of a 20 s lease runs in
// milliseconds and sees exact instants.
//
// Contract of every source (libuv's is the model): a callback never runs
// inside the call that armed it; callbacks due at the same instant run in
// the order they were armed; a timer's callback may re-arm, stop or destroy
// its timer; destroying or stopping a timer drops its pending run at once.
// Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace sk::agent {

class TimerSource {
  public:
    // One timer of the source (what ControllerTimer holds).
    class Slot {
      public:
        virtual ~Slot() = default;
        // (Re)arms: fires after ms, then every repeat_ms when non-zero.
        virtual void start(uint64_t ms, std::function<void()> cb, uint64_t repeat_ms) = 0;
        virtual void stop() = 0;
        virtual bool active() const = 0;
    };

    virtual ~TimerSource() = default;
    virtual std::unique_ptr<Slot> timer() = 0;
    // Runs fn once after delay_ms (0: on the next turn, never inside the
    // caller); the source owns the call until it ran.
    virtual void defer(std::function<void()> fn, uint64_t delay_ms = 0) = 0;
};

// A timer a controller owns (a member, like uv::Timer): default-constructed
// or moved-from it holds nothing and every call is a no-op.
class ControllerTimer {
  public:
    ControllerTimer() = default;
    explicit ControllerTimer(TimerSource &source) : slot_(source.timer()) {}
    ControllerTimer(ControllerTimer &&) noexcept = default;
    ControllerTimer &operator=(ControllerTimer &&) noexcept = default;

    void start(uint64_t ms, std::function<void()> cb, uint64_t repeat_ms = 0) {
        if (slot_) slot_->start(ms, std::move(cb), repeat_ms);
    }
    void stop() {
        if (slot_) slot_->stop();
    }
    bool active() const { return slot_ && slot_->active(); }
    // Drops the timer (and what its callback captured) for good.
    void close() { slot_.reset(); }
    explicit operator bool() const { return slot_ != nullptr; }

  private:
    std::unique_ptr<TimerSource::Slot> slot_;
};

}  // namespace sk::agent
