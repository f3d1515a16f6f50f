// A TimerSource (agent/core/timer_source.h) on a virtual clock, for the
// controller unit tests (tests/unit/controller_env.h): nothing fires until
// the test runs what is due, and time moves only when the test advances it,
// so a test of a 20 s lease takes milliseconds and sees exact instants. It is
// the controllers' Clock too (AgentContext::clock), starting at the real
// time it was made so that the dates the controllers write look real.
//
// The order contract of every source holds: due calls run in (instant,
// arming order), never inside the call that armed them; a timer's callback
// may re-arm, stop or destroy its timer. The source outlives its timers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "agent/core/clock.h"
#include "agent/core/timer_source.h"

namespace sk::agent::test {

class ManualTimers : public TimerSource, public Clock {
  public:
    explicit ManualTimers(int64_t start_us);
    ~ManualTimers() override;

    std::unique_ptr<Slot> timer() override;
    void defer(std::function<void()> fn, uint64_t delay_ms = 0) override;
    int64_t now_us() const override { return start_us_ + int64_t(now_ms_) * 1000; }

    // Virtual milliseconds since the source was made.
    uint64_t now_ms() const { return now_ms_; }
    // Runs every call due at now_ms() (including what those arm for now);
    // how many ran.
    size_t run_due();
    // The instant of the earliest armed timer or deferred call.
    std::optional<uint64_t> next_due() const;
    // Moves the clock forward to ms (never back); runs nothing.
    void advance_to(uint64_t ms);
    // Drops the deferred calls not run yet (teardown); timers stay with their owners.
    void cancel_deferred();

  private:
    class ManualSlot;
    using Key = std::pair<uint64_t, uint64_t>;  // (due ms, arming order)
    struct Entry {
        ManualSlot *slot = nullptr;  // a timer, or
        std::function<void()> fn;    // a deferred call
    };

    Key arm(Entry e, uint64_t delay_ms);
    void disarm(const Key &k) { queue_.erase(k); }

    int64_t start_us_;
    uint64_t now_ms_ = 0, seq_ = 0;
    std::map<Key, Entry> queue_;
};

}  // namespace sk::agent::test
