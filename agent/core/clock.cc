#include "agent/core/clock.h"

#include "common/clock.h"

namespace sk::agent {

int64_t SystemClock::now_us() const {
    return wall_us();
}

}  // namespace sk::agent
