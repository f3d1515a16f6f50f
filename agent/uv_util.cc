#include "agent/uv_util.h"

#include <uv.h>

#include <exception>
#include <map>
#include <set>

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

namespace {

struct Deferred {
    uv_timer_t h;
    std::function<void()> fn;
};

// The calls not yet run, per loop (cancel_deferred). Loop thread only.
std::map<uv_loop_t *, std::set<Deferred *>> &pending_deferred() {
    static std::map<uv_loop_t *, std::set<Deferred *>> pending;
    return pending;
}

void close_deferred(Deferred *d) {
    auto &pending = pending_deferred();
    auto it = pending.find(d->h.loop);
    if (it != pending.end()) {
        it->second.erase(d);
        if (it->second.empty()) pending.erase(it);
    }
    uv_close(reinterpret_cast<uv_handle_t *>(&d->h),
             [](uv_handle_t *h) { delete static_cast<Deferred *>(h->data); });
}

}  // namespace

void defer(uv_loop_t *loop, std::function<void()> fn, uint64_t delay_ms) {
    auto *d = new Deferred;
    d->fn = std::move(fn);
    uv_timer_init(loop, &d->h);
    d->h.data = d;
    pending_deferred()[loop].insert(d);
    uv_timer_start(
        &d->h,
        [](uv_timer_t *h) {
            auto *dd = static_cast<Deferred *>(h->data);
            run_guarded(dd->fn, "deferred call");
            dd->fn = nullptr;  // what it captured goes now, not at the close
            close_deferred(dd);
        },
        delay_ms, 0);
}

void cancel_deferred(uv_loop_t *loop) {
    auto &pending = pending_deferred();
    auto it = pending.find(loop);
    if (it == pending.end()) return;
    std::set<Deferred *> calls = std::move(it->second);
    pending.erase(it);
    for (Deferred *d : calls) {
        d->fn = nullptr;
        uv_timer_stop(&d->h);
        uv_close(reinterpret_cast<uv_handle_t *>(&d->h),
                 [](uv_handle_t *h) { delete static_cast<Deferred *>(h->data); });
    }
}

namespace {
struct PoolWork {
    uv_work_t req;
    std::function<void()> work;
};
}  // namespace

void run_in_pool(uv_loop_t *loop, std::function<void()> work) {
    auto *w = new PoolWork{{}, std::move(work)};
    w->req.data = w;
    int rc = uv_queue_work(
        loop, &w->req,
        [](uv_work_t *r) { run_guarded(static_cast<PoolWork *>(r->data)->work, "thread pool"); },
        [](uv_work_t *r, int) { delete static_cast<PoolWork *>(r->data); });
    if (rc != 0) {  // only when the loop is closing: run it here
        run_guarded(w->work, "thread pool");
        delete w;
    }
}

}  // namespace sk::agent
