// One container of a pod on the libuv loop: its process group, log pipes,
// restart timer, probes and termination. Owned by PodRunner (pod_runner.h).
#pragma once

#include <uv.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cri_log.h"
#include "k8s-shim/backoff.h"
#include "k8s-shim/pod_plan.h"
#include "k8s-shim/pod_status.h"
#include "k8s-shim/probe.h"

namespace sk::shim {

class PodRunner;
struct Container;

// One probe of a container: its state machine plus the timer that runs it.
// A check in flight lives in its own heap object (probe_runner.cc) and
// reports back only if the probe's generation did not change meanwhile.
struct ProbeRunner {
    ProbeRunner(Container *c, ProbeKind kind, const ProbeSpec &spec);
    Container *container;
    ProbeState state;
    uv_timer_t timer;
    bool active = false;
    bool in_flight = false;
    unsigned generation = 0;
    int checks_alive = 0;  // Check objects not yet freed: they point here

    void arm();   // (re)start probing now + initialDelay
    void stop();  // no more checks; a check in flight is ignored
    void schedule();
    void run_check();
    void on_result(bool ok, const std::string &output);
};

struct Container {
    Container(PodRunner *pod, ContainerPlan *plan, ContainerRun *run);
    ~Container();

    PodRunner *pod;
    ContainerPlan *plan;
    ContainerRun *run;

    uv_process_t proc;
    uv_pipe_t out, err;
    uv_timer_t timer;       // restart back-off
    uv_timer_t kill_timer;  // grace period
    uv_process_t hook;      // preStop
    bool running = false;
    int hooks_alive = 0;  // preStop processes not yet closed: they point here
    int open_pipes = 0;
    int pid = 0;
    unsigned long long start_ticks = 0;
    bool pending_exit = false;  // process exited, pipes still draining
    int64_t exit_status = 0;
    int term_signal = 0;
    long long oom_before = -1;
    bool killing = false;     // we sent SIGTERM/SIGKILL on purpose
    std::string kill_reason;  // liveness/startup failure: restart per policy
    std::optional<CriLogWriter> log;
    std::string tail;  // last output bytes, for FallbackToLogsOnError
    CrashBackoff backoff;
    std::vector<std::unique_ptr<ProbeRunner>> probes;

    Status start();                                 // spawn one instance
    void stop(int64_t grace_ms);                    // preStop, SIGTERM, grace, SIGKILL
    void kill_for_restart(const std::string &why);  // failed liveness/startup probe
    void restart_after(int64_t spec_ms);
    void cancel_restart();
    void on_process_exit(int64_t status, int signal);
    void maybe_finish_exit();  // exit seen and pipes at EOF
    void on_output(const char *stream, const char *data, size_t len);
    void probes_changed();  // recompute ready/started
    std::string log_path() const;
    std::string id_prefix() const;  // "[pod ns/name] container c:"
};

}  // namespace sk::shim
