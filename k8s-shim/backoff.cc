#include "k8s-shim/backoff.h"

#include <algorithm>

namespace sk::shim {

int64_t CrashBackoff::on_exit(int64_t now_ms) {
    if (!active_ || now_ms - updated_ >= kResetMs) {
        active_ = true;
        cur_ = kInitialMs;
        updated_ = now_ms;
        waited_ = false;
        last_delay_ = 0;
        return 0;
    }
    waited_ = true;
    last_delay_ = cur_;
    return cur_;
}

void CrashBackoff::on_start(int64_t now_ms) {
    if (waited_) cur_ = std::min(cur_ * 2, kMaxMs);
    waited_ = false;
    if (active_) updated_ = now_ms;
}

std::string go_duration(int64_t ms) {
    int64_t s = ms / 1000;
    if (s < 60) return std::to_string(s) + "s";
    int64_t m = s / 60;
    s %= 60;
    if (m < 60) return std::to_string(m) + "m" + std::to_string(s) + "s";
    return std::to_string(m / 60) + "h" + std::to_string(m % 60) + "m" + std::to_string(s) + "s";
}

}  // namespace sk::shim
