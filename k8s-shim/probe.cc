#include "k8s-shim/probe.h"

#include <algorithm>

namespace sk::shim {

const char *probe_kind_name(ProbeKind k) {
    switch (k) {
        case ProbeKind::Startup:
            return "Startup";
        case ProbeKind::Readiness:
            return "Readiness";
        case ProbeKind::Liveness:
            return "Liveness";
    }
    return "?";
}

void ProbeState::arm(int64_t now_ms) {
    outcome_ = kind_ == ProbeKind::Liveness ? Outcome::Success : Outcome::Unknown;
    successes_ = failures_ = 0;
    due_ = now_ms + int64_t{spec_.initial_delay_s} * 1000;
}

void ProbeState::resume(int64_t now_ms) {
    arm(now_ms);
    if (kind_ == ProbeKind::Readiness)
        due_ = now_ms;
    else
        due_ = now_ms + int64_t{std::max(spec_.period_s, spec_.initial_delay_s)} * 1000;
}

bool ProbeState::record(bool success, int64_t now_ms) {
    due_ = now_ms + int64_t{spec_.period_s} * 1000;
    Outcome before = outcome_;
    if (success) {
        failures_ = 0;
        if (++successes_ >= spec_.success_threshold) outcome_ = Outcome::Success;
    } else {
        successes_ = 0;
        if (++failures_ >= spec_.failure_threshold) outcome_ = Outcome::Failure;
    }
    return outcome_ != before;
}

}  // namespace sk::shim
