// Time for the runtime edge. Spec durations (back-off, probe delays/periods/
// timeouts) are in "spec" milliseconds; the loop arms timers for
// spec_ms * scale real milliseconds. The scale is 1 in production; the
// component tests set SLURM_K8S_SHIM_TEST_TIME_SCALE (TEST-ONLY, e.g. 0.05)
// so a 10 s back-off takes 0.5 s. Termination grace periods are NOT scaled:
// they are the user's contract with their process.
#pragma once

#include <uv.h>

#include <cstdint>

namespace sk::shim {

struct Clock {
    uv_loop_t *loop = nullptr;
    double scale = 1.0;
    uint64_t origin = 0;  // uv_now at start

    int64_t spec_now() const {
        return static_cast<int64_t>(static_cast<double>(uv_now(loop) - origin) / scale);
    }
    uint64_t real_delay(int64_t spec_ms) const {
        if (spec_ms <= 0) return 0;
        return static_cast<uint64_t>(static_cast<double>(spec_ms) * scale);
    }
    static int64_t wall_ms();
    // Reads SLURM_K8S_SHIM_TEST_TIME_SCALE; 1.0 when unset or invalid.
    static double scale_from_env();
};

}  // namespace sk::shim
