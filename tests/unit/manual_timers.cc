#include "tests/unit/manual_timers.h"

#include <cstdio>
#include <cstdlib>

namespace sk::agent::test {

class ManualTimers::ManualSlot : public TimerSource::Slot {
  public:
    explicit ManualSlot(ManualTimers &src) : src_(src) {}
    ~ManualSlot() override { disarm(); }

    void start(uint64_t ms, std::function<void()> cb, uint64_t repeat_ms) override {
        disarm();
        cb_ = std::make_shared<std::function<void()>>(std::move(cb));
        repeat_ms_ = repeat_ms;
        key_ = src_.arm(Entry{this, {}}, ms);
    }
    void stop() override { disarm(); }
    bool active() const override { return key_.has_value(); }

    // Its entry was taken off the queue to run now.
    void fire() {
        key_.reset();
        auto cb = cb_;  // alive through the call even when the callback destroys the slot
        if (repeat_ms_) key_ = src_.arm(Entry{this, {}}, repeat_ms_);
        if (cb && *cb) (*cb)();
    }

  private:
    // Not virtual: the destructor calls it.
    void disarm() {
        if (key_) src_.disarm(*key_);
        key_.reset();
    }

    ManualTimers &src_;
    std::shared_ptr<std::function<void()>> cb_;
    uint64_t repeat_ms_ = 0;
    std::optional<Key> key_;
};

ManualTimers::ManualTimers(int64_t start_us) : start_us_(start_us) {}

ManualTimers::~ManualTimers() {
    for (auto &[k, e] : queue_)
        if (e.slot) {
            std::fprintf(stderr, "ManualTimers: destroyed before one of its timers\n");
            std::abort();
        }
}

std::unique_ptr<TimerSource::Slot> ManualTimers::timer() {
    return std::make_unique<ManualSlot>(*this);
}

void ManualTimers::defer(std::function<void()> fn, uint64_t delay_ms) {
    arm(Entry{nullptr, std::move(fn)}, delay_ms);
}

ManualTimers::Key ManualTimers::arm(Entry e, uint64_t delay_ms) {
    Key k{now_ms_ + delay_ms, seq_++};
    queue_.emplace(k, std::move(e));
    return k;
}

size_t ManualTimers::run_due() {
    size_t ran = 0;
    while (!queue_.empty() && queue_.begin()->first.first <= now_ms_) {
        // A loop that re-arms itself for now forever is a bug of the code
        // under test (a busy loop on a real loop too): stop it loudly.
        if (++ran > 1000000) {
            std::fprintf(stderr, "ManualTimers: a million calls at one instant\n");
            std::abort();
        }
        auto node = queue_.extract(queue_.begin());
        Entry &e = node.mapped();
        if (e.slot)
            e.slot->fire();
        else if (e.fn)
            e.fn();
    }
    return ran;
}

std::optional<uint64_t> ManualTimers::next_due() const {
    if (queue_.empty()) return std::nullopt;
    return queue_.begin()->first.first;
}

void ManualTimers::advance_to(uint64_t ms) {
    if (ms > now_ms_) now_ms_ = ms;
}

void ManualTimers::cancel_deferred() {
    for (auto it = queue_.begin(); it != queue_.end();)
        it = it->second.slot ? std::next(it) : queue_.erase(it);
}

}  // namespace sk::agent::test
