// RFC 3339 timestamps in UTC, as Kubernetes and the CRI log format write
// them. One formatter behind every shape the tree uses: whole seconds
// (metav1.Time), microseconds (metav1.MicroTime), nanoseconds (CRI logs,
// kubectl --timestamps) and milliseconds (log lines).
#pragma once

#include <cstdint>
#include <string>

namespace sk {

// "YYYY-MM-DDTHH:MM:SS[.F]Z" for unix_s seconds plus `nanos` (0..999999999)
// after the Unix epoch, with `digits` (0..9) fraction digits, truncated (not
// rounded); trim_zeros drops trailing zeros of the fraction and the '.' with
// them when nothing is left (Go's RFC3339Nano). The year is always four
// digits: instants outside years 0000..9999 are clamped to that range.
std::string format_rfc3339(int64_t unix_s, int64_t nanos, int digits, bool trim_zeros);

// "2026-11-29T14:59:12Z": metav1.Time, 1 s resolution (conditions, events,
// container states: what the kubelet writes).
std::string rfc3339(int64_t unix_s);
// "2026-11-29T14:59:42.589439Z": metav1.MicroTime, exactly 6 fractional
// digits (the API server answers 400 for 3 or 9 digits).
std::string micro_time(int64_t unix_us);
// "2024-05-01T12:00:00.000000001Z". fixed_width=true writes all 9 fraction
// digits (CRI log lines then sort as text); false trims trailing zeros like
// Go's RFC3339Nano (what kubectl --timestamps shows).
std::string format_rfc3339nano(int64_t unix_ns, bool fixed_width);

// Parses "YYYY-MM-DDTHH:MM:SS[.frac]Z" to whole seconds (the fraction is
// dropped); -1 when malformed. (common/daemons/cri_log.h parse_rfc3339nano reads
// nanoseconds and offsets.)
int64_t parse_rfc3339(const std::string &s);

}  // namespace sk
