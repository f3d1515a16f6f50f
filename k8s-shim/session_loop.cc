#include "k8s-shim/session_loop.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "common/log.h"

namespace sk::shim {

SessionLoop::SessionLoop(uv_loop_t *main, std::optional<int> nice) : nice_(nice) {
    main_wake_ = Async(main, [this] { drain(to_main_); });
    main_wake_.unref();  // the shim's loop ends as before: the wake-up does not hold it
}

SessionLoop::~SessionLoop() {
    stop();
}

Status SessionLoop::start() {
    if (loop_ready_) return {};
    if (int rc = uv_loop_init(&loop_); rc != 0)
        return fail(Error::Io, std::string("the exec sessions' loop: ") + uv_strerror(rc));
    loop_ready_ = true;
    session_wake_ = Async(&loop_, [this] { drain(to_session_); });
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error &e) {
        session_wake_.close();
        uv_run(&loop_, UV_RUN_NOWAIT);
        (void)uv_loop_close(&loop_);
        loop_ready_ = false;
        return fail(Error::Io, std::string("the exec sessions' thread: ") + e.what());
    }
    return {};
}

void SessionLoop::run() {
    // Named for ps -L, top -H and perf.
    (void)pthread_setname_np(pthread_self(), "sk-sessions");
    // The thread's own nice value (on Linux each thread has one): raising
    // it needs no privilege; a value below the shim's cannot be had.
    errno = 0;
    int own = getpriority(PRIO_PROCESS, 0);
    if (nice_ && errno == 0 && *nice_ > own && setpriority(PRIO_PROCESS, 0, *nice_) != 0)
        LOG_WARN("exec sessions: cannot set the nice value %d: %s", *nice_, strerror(errno));
    uv_run(&loop_, UV_RUN_DEFAULT);
}

void SessionLoop::drain(Queue &q) {
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

void SessionLoop::post(std::function<void()> fn) {
    {
        std::lock_guard<std::mutex> lock(to_session_.mu);
        if (to_session_.closed || !loop_ready_) return;
        to_session_.fns.push_back(std::move(fn));
    }
    session_wake_.send();
}

void SessionLoop::post_main(std::function<void()> fn) {
    {
        std::lock_guard<std::mutex> lock(to_main_.mu);
        if (to_main_.closed) return;
        to_main_.fns.push_back(std::move(fn));
    }
    main_wake_.send();
}

void SessionLoop::stop(std::function<void()> last) {
    if (loop_ready_ && thread_.joinable()) {
        {
            std::lock_guard<std::mutex> lock(to_session_.mu);
            to_session_.fns.clear();
            // The last closure: whatever lives on the session loop goes, then
            // the wake-up, so that the loop ends once their closes are done.
            to_session_.fns.push_back([this, last = std::move(last)] {
                if (last) last();
                std::lock_guard<std::mutex> lock2(to_session_.mu);
                to_session_.closed = true;
                to_session_.fns.clear();
                session_wake_.close();
            });
        }
        session_wake_.send();
        thread_.join();
        if (int rc = uv_loop_close(&loop_); rc != 0)
            LOG_WARN("exec sessions: their loop still holds handles at the end: %s",
                     uv_strerror(rc));
        loop_ready_ = false;
    }
    {
        std::lock_guard<std::mutex> lock(to_main_.mu);
        to_main_.closed = true;
        to_main_.fns.clear();
    }
    main_wake_.close();
}

}  // namespace sk::shim
