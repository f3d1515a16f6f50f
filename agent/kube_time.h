// Time as the Kubernetes API writes it, and an injectable clock so that
// builders and controllers can be tested at fixed instants.
#pragma once

#include <cstdint>
#include <string>

namespace sk::agent {

// "2026-11-29T14:59:12Z": metav1.Time, 1 s resolution (conditions, events).
std::string rfc3339(int64_t unix_s);
// "2026-11-29T14:59:42.589439Z": metav1.MicroTime, exactly 6 fractional
// digits (the API server answers 400 for 3 or 9 digits).
std::string micro_time(int64_t unix_us);
// Parses "YYYY-MM-DDTHH:MM:SS[.frac]Z"; -1 when malformed.
int64_t parse_rfc3339(const std::string &s);

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
