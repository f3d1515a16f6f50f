#include "uv/thread_loop.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include <system_error>

#include "common/log.h"

namespace sk {
inline namespace uv {

ThreadLoop::ThreadLoop(uv_loop_t *main, std::string name, std::optional<int> nice)
    : name_(std::move(name)), nice_(nice) {
    main_wake_ = Async(main, [this] { drain(to_main_); });
    main_wake_.unref();  // the main loop ends as before: the wake-up does not hold it
    init_rc_ = uv_loop_init(&loop_);
    if (init_rc_ == 0) loop_wake_ = Async(&loop_, [this] { drain(to_loop_); });
}

ThreadLoop::~ThreadLoop() {
    // Normally stopped by its owner already; a destructor must not let an
    // exception out (a failed join, say).
    try {
        stop();
    } catch (...) {
        LOG_ERROR("%s: error while stopping its thread", name_.c_str());
    }
}

Status ThreadLoop::start() {
    if (init_rc_ != 0) return fail(Error::Io, name_ + ": its loop: " + uv_strerror(init_rc_));
    if (thread_.joinable() || stopped_) return {};
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error &e) {
        return fail(Error::Io, name_ + ": its thread: " + e.what());
    }
    return {};
}

void ThreadLoop::run() {
    // Named for ps -L, top -H and perf.
    (void)pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
    // The thread's own nice value (on Linux each thread has one): raising
    // it needs no privilege; a value below the creator's cannot be had.
    errno = 0;
    int own = getpriority(PRIO_PROCESS, 0);
    if (nice_ && errno == 0 && *nice_ > own && setpriority(PRIO_PROCESS, 0, *nice_) != 0)
        LOG_WARN("%s: cannot set the nice value %d: %s", name_.c_str(), *nice_, strerror(errno));
    uv_run(&loop_, UV_RUN_DEFAULT);
}

void ThreadLoop::drain(Queue &q) {
    for (;;) {
        std::function<void()> fn;
        {
            std::lock_guard<std::mutex> lock(q.mu);
            if (q.fns.empty()) return;
            fn = std::move(q.fns.front());
            q.fns.pop_front();
        }
        fn();
    }
}

void ThreadLoop::post(std::function<void()> fn) {
    {
        std::lock_guard<std::mutex> lock(to_loop_.mu);
        if (to_loop_.closed || init_rc_ != 0) return;
        to_loop_.fns.push_back(std::move(fn));
    }
    loop_wake_.send();
}

void ThreadLoop::post_main(std::function<void()> fn) {
    {
        std::lock_guard<std::mutex> lock(to_main_.mu);
        if (to_main_.closed) return;
        to_main_.fns.push_back(std::move(fn));
    }
    main_wake_.send();
}

void ThreadLoop::stop(std::function<void()> last) {
    if (stopped_) return;
    stopped_ = true;
    if (init_rc_ == 0) {
        // The last closure: whatever lives on the loop goes, then the
        // wake-up, so that the loop ends once their closes are done.
        auto end = [this, last = std::move(last)] {
            if (last) last();
            {
                std::lock_guard<std::mutex> lock(to_loop_.mu);
                to_loop_.closed = true;
                to_loop_.fns.clear();
            }
            loop_wake_.close();
        };
        if (thread_.joinable()) {
            {
                std::lock_guard<std::mutex> lock(to_loop_.mu);
                to_loop_.fns.clear();
                to_loop_.fns.push_back(std::move(end));
            }
            loop_wake_.send();
            thread_.join();
        } else {  // never started: its loop ends here
            end();
            uv_run(&loop_, UV_RUN_DEFAULT);
        }
        if (int rc = uv_loop_close(&loop_); rc != 0)
            LOG_WARN("%s: its loop still holds handles at the end: %s", name_.c_str(),
                     uv_strerror(rc));
    }
    {
        std::lock_guard<std::mutex> lock(to_main_.mu);
        to_main_.closed = true;
        to_main_.fns.clear();
    }
    main_wake_.close();
}

}  // namespace uv
}  // namespace sk
