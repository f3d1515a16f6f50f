#include "agent/clock.h"

#include <sys/time.h>

namespace sk::agent {

int64_t SystemClock::now_us() const {
    struct timeval tv;
    gettimeofday(&tv, nullptr);
    return static_cast<int64_t>(tv.tv_sec) * 1000000 + tv.tv_usec;
}

}  // namespace sk::agent
