// Probe state machine (pure). One per (container, probe kind). The runtime
// asks when the next check is due, runs it (exec, httpGet, tcpSocket) and
// records the result; thresholds decide when the outcome flips, as in the
// kubelet's prober: successThreshold consecutive successes make it Success,
// failureThreshold consecutive failures make it Failure.
//  - startup: Unknown until Success; Failure restarts the container. Readiness
//    and liveness run only after startup succeeded.
//  - readiness: Unknown counts as not ready; drives the container's ready flag.
//  - liveness: starts as Success; Failure restarts the container per policy.
#pragma once

#include <cstdint>

#include "k8s-shim/pod_plan.h"

namespace sk::shim {

enum class ProbeKind { Startup, Readiness, Liveness };
enum class Outcome { Unknown, Success, Failure };

const char *probe_kind_name(ProbeKind k);  // "Startup", "Readiness", "Liveness"

class ProbeState {
  public:
    ProbeState(ProbeKind kind, const ProbeSpec &spec) : kind_(kind), spec_(spec) {}

    // The container (re)started, or the probe became active (after startup):
    // the first check is due initialDelaySeconds later.
    void arm(int64_t now_ms);
    // The job resumed from a suspension (the container had been stopped with
    // its probes): readiness is checked at once, liveness and startup one
    // periodSeconds later (or initialDelaySeconds, if longer), so a process
    // gets that long to catch up on what it missed while stopped (a
    // heartbeat) before a failure restarts it.
    void resume(int64_t now_ms);
    int64_t due_ms() const { return due_; }
    // Records a check that finished at now_ms; schedules the next one.
    // Returns true when the outcome changed.
    bool record(bool success, int64_t now_ms);

    Outcome outcome() const { return outcome_; }
    ProbeKind kind() const { return kind_; }
    const ProbeSpec &spec() const { return spec_; }
    int failures() const { return failures_; }

  private:
    ProbeKind kind_;
    ProbeSpec spec_;
    Outcome outcome_ = Outcome::Unknown;
    int successes_ = 0, failures_ = 0;
    int64_t due_ = 0;
};

}  // namespace sk::shim
