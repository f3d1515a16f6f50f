// The agent's clock, injectable so that builders and controllers can be
// tested at fixed instants. The formats the Kubernetes API writes times in
// are common/rfc3339.h (shared with the shim and the CRI logs); Slurm's are
// agent/core/slurm_time.h.
#pragma once

#include <cstdint>

namespace sk::agent {

class Clock {
  public:
    virtual ~Clock() = default;
    virtual int64_t now_us() const = 0;
    int64_t now_s() const { return now_us() / 1000000; }
};

class SystemClock : public Clock {
  public:
    int64_t now_us() const override;
};

}  // namespace sk::agent
