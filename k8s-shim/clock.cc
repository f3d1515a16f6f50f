#include "k8s-shim/clock.h"

#include <cstdlib>

#include "common/clock.h"

namespace sk::shim {

int64_t Clock::wall_ms() {
    return sk::wall_ms();
}

double Clock::scale_from_env() {
    const char *s = getenv("SLURM_K8S_SHIM_TEST_TIME_SCALE");
    if (!s || !*s) return 1.0;
    char *end = nullptr;
    double v = strtod(s, &end);
    if (!end || *end || v <= 0.0 || v > 1.0) return 1.0;
    return v;
}

}  // namespace sk::shim
