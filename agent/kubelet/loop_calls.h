// Work handed from another thread (the kubelet endpoint's HTTP threads) to
// the agent's loop, and its answer awaited with a bound: the stats of a
// scrape (agent/stats_provider.h), an API review of a request
// (agent/kubelet/webhook_gate.h). call() queues the work and wakes the loop (a
// uv::Async); on the loop the work runs and calls its `done` once, from then
// or later (an answer from the shim or the API server); the caller gets
// that result, or Unavailable with `timeout_message` after timeout_ms (a
// later done is then dropped). close() fails what waits and stops taking
// work, so nothing holds a server's stop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/result.h"
#include "uv/handles.h"

namespace sk::agent {

template <class T>
class LoopCalls {
  public:
    using Done = std::function<void(Result<T>)>;
    using Work = std::function<void(Done)>;  // runs on the loop

    explicit LoopCalls(uv_loop_t *loop) : loop_(loop) {}
    ~LoopCalls() {
        if (async_) close("stopping");
    }
    LoopCalls(const LoopCalls &) = delete;
    LoopCalls &operator=(const LoopCalls &) = delete;

    // Loop thread.
    Status start() {
        async_ = Async(loop_, [this] { run(); });
        if (!async_) return fail(Error::Io, "uv_async_init failed (out of descriptors?)");
        std::lock_guard<std::mutex> l(mu_);
        open_ = true;
        return {};
    }

    // Loop thread: what waits fails with Unavailable(why); call() refuses
    // from now on; the async handle closes.
    void close(const std::string &why) {
        std::deque<std::shared_ptr<Pending>> left;
        {
            std::lock_guard<std::mutex> l(mu_);
            open_ = false;
            left.swap(queue_);
        }
        for (auto &p : left)
            p->complete(fail(Error::Unavailable, why));
        async_.close();  // no call() sends any more: open_ is false
    }

    // Any thread but the loop's.
    Result<T> call(Work work, int timeout_ms, const std::string &timeout_message,
                   const std::string &closed_message) {
        auto p = std::make_shared<Pending>();
        p->work = std::move(work);
        {
            std::lock_guard<std::mutex> l(mu_);
            if (!open_) return fail(Error::Unavailable, closed_message);
            queue_.push_back(p);
            async_.send();  // under mu_: close() cannot close the handle meanwhile
        }
        std::unique_lock<std::mutex> l(p->mu);
        if (!p->cv.wait_for(l, std::chrono::milliseconds(timeout_ms), [&p] { return p->done; }))
            return fail(Error::Unavailable, timeout_message);
        return p->result;
    }

  private:
    struct Pending {
        Work work;
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
        Result<T> result = fail(Error::Unavailable, "no answer");

        void complete(Result<T> r) {
            std::lock_guard<std::mutex> l(mu);
            if (done) return;
            result = std::move(r);
            done = true;
            cv.notify_all();
        }
    };

    void run() {  // loop thread
        std::deque<std::shared_ptr<Pending>> todo;
        {
            std::lock_guard<std::mutex> l(mu_);
            todo.swap(queue_);
        }
        for (auto &p : todo)
            p->work([p](Result<T> r) { p->complete(std::move(r)); });
    }

    uv_loop_t *loop_;
    Async async_;    // wakes the loop for queue_
    std::mutex mu_;  // guards queue_, open_
    bool open_ = false;
    std::deque<std::shared_ptr<Pending>> queue_;
};

}  // namespace sk::agent
