#include "agent/uv_util.h"

#include <uv.h>

#include <exception>

#include "common/log.h"

namespace sk::agent {

struct Timer::State {
    uv_timer_t h;
    std::function<void()> cb;
};

static void run_guarded(const std::function<void()> &fn, const char *what) noexcept {
    try {
        if (fn) fn();
    } catch (const std::exception &e) {
        LOG_ERROR("%s: unexpected exception: %s", what, e.what());
    } catch (...) {
        LOG_ERROR("%s: unexpected exception", what);
    }
}

Timer::Timer(uv_loop_t *loop) : s_(new State) {
    uv_timer_init(loop, &s_->h);
    s_->h.data = s_;
}

Timer::~Timer() {
    uv_timer_stop(&s_->h);
    s_->cb = nullptr;
    uv_close(reinterpret_cast<uv_handle_t *>(&s_->h),
             [](uv_handle_t *h) { delete static_cast<State *>(h->data); });
}

void Timer::start(uint64_t ms, std::function<void()> cb, uint64_t repeat_ms) {
    s_->cb = std::move(cb);
    uv_timer_start(
        &s_->h,
        [](uv_timer_t *h) {
            auto *st = static_cast<State *>(h->data);
            std::function<void()> fn = st->cb;  // the callback may re-arm or destroy the Timer
            run_guarded(fn, "timer");
        },
        ms, repeat_ms);
}

void Timer::stop() {
    uv_timer_stop(&s_->h);
}
bool Timer::active() const {
    return uv_is_active(reinterpret_cast<const uv_handle_t *>(&s_->h));
}

void defer(uv_loop_t *loop, std::function<void()> fn) {
    struct D {
        uv_timer_t h;
        std::function<void()> fn;
    };
    auto *d = new D;
    d->fn = std::move(fn);
    uv_timer_init(loop, &d->h);
    d->h.data = d;
    uv_timer_start(
        &d->h,
        [](uv_timer_t *h) {
            auto *dd = static_cast<D *>(h->data);
            run_guarded(dd->fn, "deferred call");
            uv_close(reinterpret_cast<uv_handle_t *>(h),
                     [](uv_handle_t *hh) { delete static_cast<D *>(hh->data); });
        },
        0, 0);
}

}  // namespace sk::agent
