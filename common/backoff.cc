#include "common/backoff.h"

#include <algorithm>
#include <cstdlib>

namespace sk {

static uint64_t default_jitter(uint64_t d) {
    return d + (d / 4 ? static_cast<uint64_t>(random()) % (d / 4 + 1) : 0);
}

Backoff::Backoff(uint64_t initial_ms, uint64_t max_ms, Jitter jitter)
    : initial_(initial_ms ? initial_ms : 1),
      max_(max_ms < initial_ms ? initial_ms : max_ms),
      jitter_(jitter ? std::move(jitter) : Jitter(default_jitter)) {}

uint64_t Backoff::nominal_ms(unsigned failures) const {
    uint64_t d = initial_;
    for (unsigned i = 1; i < failures && d < max_; i++)
        d *= 2;
    return d > max_ ? max_ : d;
}

uint64_t Backoff::next_ms() {
    uint64_t d = nominal_ms(attempt_ + 1);
    if (attempt_ < 64) attempt_++;
    return jitter_(d);
}

uint64_t Backoff::next_ms(const Failure &f) {
    uint64_t d = next_ms();
    uint64_t asked = std::min<uint64_t>(uint64_t{f.retry_after_s} * 1000, kMaxRetryAfterMs);
    return std::max(d, asked);
}

}  // namespace sk
