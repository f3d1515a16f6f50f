#include "common/clock.h"

#include <time.h>

namespace sk {

namespace {

int64_t read_us(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace

int64_t wall_us() {
    return read_us(CLOCK_REALTIME);
}

int64_t wall_ms() {
    return read_us(CLOCK_REALTIME) / 1000;
}

int64_t monotonic_ms() {
    return read_us(CLOCK_MONOTONIC) / 1000;
}

}  // namespace sk
