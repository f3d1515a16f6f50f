// The two clocks, read in one place: the wall clock (what timestamps say:
// API times, log lines, a container's start) and the monotonic clock (what
// deadlines and durations are measured on: it never jumps with the wall
// clock). The agent's injectable clock (agent/core/clock.h) and the shim's spec
// time (k8s-shim/clock.h) are built on these; the plugin uses them as they
// are.
#pragma once

#include <cstdint>

namespace sk {

int64_t wall_us();  // CLOCK_REALTIME, microseconds since the epoch
int64_t wall_ms();
int64_t monotonic_ms();  // CLOCK_MONOTONIC

}  // namespace sk
