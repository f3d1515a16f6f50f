// The one capped exponential back-off: the agent's API retries and watch
// restarts (jittered), the shim's image pull back-off and the plugin's shim
// restarts (exact: no_jitter). Pure: the jitter source is injected so tests
// see exact delays. A container's crash back-off is not this one: it follows
// the kubelet's rules (k8s-shim/backoff.h).
#pragma once

#include <cstdint>
#include <functional>

#include "common/result.h"

namespace sk {

class Backoff {
  public:
    // jitter(d) returns the delay actually used for a nominal delay d; the
    // default adds up to +25% so that many nodes do not retry in lockstep.
    using Jitter = std::function<uint64_t(uint64_t nominal_ms)>;

    Backoff(uint64_t initial_ms, uint64_t max_ms, Jitter jitter = {});
    // A jitter that keeps the nominal delay.
    static uint64_t no_jitter(uint64_t nominal_ms) { return nominal_ms; }
    // The delay before the next attempt; doubles up to max_ms.
    uint64_t next_ms();
    // The nominal delay (before jitter) after `failures` failures (1: the
    // first delay), without touching the attempt count.
    uint64_t nominal_ms(unsigned failures) const;
    // The same after a failure: at least what the server asked for with
    // Retry-After (429, 503), as client-go waits it out, capped at
    // kMaxRetryAfterMs.
    uint64_t next_ms(const Failure &f);
    static constexpr uint64_t kMaxRetryAfterMs = 60000;
    // After a success: the next failure waits initial_ms again.
    void reset() { attempt_ = 0; }
    unsigned attempts() const { return attempt_; }

  private:
    uint64_t initial_, max_;
    unsigned attempt_ = 0;
    Jitter jitter_;
};

}  // namespace sk
