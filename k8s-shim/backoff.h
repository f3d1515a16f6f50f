// Crash back-off (pure), as the kubelet does it (flowcontrol.Backoff keyed by
// container): the first crash restarts at once and opens a 10 s window; each
// later crash waits the current window, and the window doubles at every
// restart, capped at 5 min. An entry not touched for 10 min is forgotten, so a
// container that ran for 10 min starts again from a fresh schedule.
// Recorded: restarts after 0, 10 s, 20 s, 40 s, 1m20s (04-crashloop-status).
// Times are "spec" milliseconds; the runtime scales them (tests only).
#pragma once

#include <cstdint>
#include <string>

namespace sk::shim {

class CrashBackoff {
  public:
    static constexpr int64_t kInitialMs = 10'000;
    static constexpr int64_t kMaxMs = 300'000;
    static constexpr int64_t kResetMs = 600'000;

    // The container exited at now_ms and will be restarted: how long to wait.
    int64_t on_exit(int64_t now_ms);
    // The container was (re)started at now_ms.
    void on_start(int64_t now_ms);
    // The window last handed out by on_exit (for "back-off 20s restarting ...").
    int64_t window_ms() const { return last_delay_; }

  private:
    bool active_ = false;
    int64_t cur_ = 0;         // current window
    int64_t updated_ = 0;     // last restart (or entry creation)
    int64_t last_delay_ = 0;  // what on_exit returned last
    bool waited_ = false;     // the pending restart comes after a back-off wait
};

// Go's time.Duration.String() for whole seconds: "10s", "1m20s", "5m0s".
std::string go_duration(int64_t ms);

}  // namespace sk::shim
