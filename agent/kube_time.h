// Time as the Kubernetes API writes it (the formats are common/rfc3339.h,
// shared with the shim and the CRI logs), Slurm's end times, and an
// injectable clock so that builders and controllers can be tested at fixed
// instants.
#pragma once

#include <cstdint>
#include <string>

#include "common/rfc3339.h"

namespace sk::agent {

// Slurm's EndTime as `squeue -o %e` prints it: "2026-11-29T14:59:12" in the
// node's local time (mktime), or "N/A" / "Unknown" / "NONE" / "" = no end
// (0). Whitespace around it is ignored. -1 when malformed.
int64_t parse_slurm_time(const std::string &s);

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
