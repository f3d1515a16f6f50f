// One container of a pod on the libuv loop: its supervisor (every process
// of the container descends from it, k8s-shim/supervise.h), log pipes,
// restart timer, probes and termination. Owned by its pod (PodRunner,
// pod_runner.h), which it knows only as a ContainerHost.
// Every handle is an object of uv/handles.h owned here: destroying the
// container closes them, and no callback reaches it afterwards.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/daemons/cri_log.h"
#include "k8s-shim/backoff.h"
#include "k8s-shim/clock.h"
#include "k8s-shim/pod_plan.h"
#include "k8s-shim/pod_status.h"
#include "k8s-shim/probe.h"
#include "k8s-shim/spawn.h"
#include "uv/handles.h"

namespace sk::shim {

struct Container;
struct ProbeCheck;

// What a pod's runner and its containers are given (PodRunner's).
struct RunnerEnv {
    Clock clock;
    size_t log_max_bytes = 10 << 20;
    std::string pod_dir;                // <state_dir>/pods/<uid>
    std::string supervisor;             // slurm-k8s-shim: supervisor (k8s-shim/supervise.h)
                                        // and exec helper (SpawnSpec::helper)
    std::function<void()> on_change;    // status changed (send pod_status)
    std::function<void()> on_finished;  // nothing runs any more and nothing will
    // A preStop hook or an exec probe check started: process_record() has
    // one more process to record.
    std::function<void()> on_processes;
    // The images the job's pods may use, as far as the shim's own pulls and
    // presence checks know (k8s-shim/podman.h KnownImages): an IfNotPresent
    // start of one of them skips the check. Shared by the job's pods; null
    // without the podman runtime.
    KnownImages *images = nullptr;
    // The node's image store's view (AttachReply::image_store), "" = none.
    std::string store_view;
    // Whether a podman command of the shim's own (not a container's) ran in
    // the job's storage: rootless podman's first command starts its pause
    // process, which must not become a container's (its supervisor kills
    // every process it inherits when the container stops). Until then a
    // container's start is preceded by the presence check. Shared; null
    // without the podman runtime.
    bool *podman_warm = nullptr;
    // Pulls a public image into the node's image store (the agent's
    // image_pull; agent/images/image_store.h); done(status) on the loop.
    // Empty when the node has none: pulls go to the job's own storage.
    // Returns what cancels it (done then never runs).
    std::function<std::function<void()>(const std::string &image,
                                        std::function<void(const Status &)> done)>
        store_pull;
};

// What a container (and its probes) asks of its pod, on the loop.
class ContainerHost {
  public:
    virtual const PodPlan &plan() const = 0;
    virtual const RunnerEnv &env() const = 0;
    // The pod's run: whether it is paused or stopping.
    virtual const PodRun &run() const = 0;
    // A kubelet-like event for the pod's next status (docs/protocol.md).
    virtual void add_event(const std::string &type, const std::string &reason,
                           const std::string &message, const std::string &container) = 0;
    // The container's instance started; it exited; its status changed.
    virtual void container_started(Container *c) = 0;
    virtual void container_exited(Container *c) = 0;
    virtual void changed() = 0;

  protected:
    virtual ~ContainerHost() = default;
};

// What an attached session (kubectl attach, k8s-shim/attach_session.h) sees
// of a container instance, on the loop. The container calls a tap from its
// own callbacks; a tap may detach itself (Container::detach) from inside one.
class ContainerTap {
  public:
    virtual ~ContainerTap() = default;
    // Output of the instance, as it is written to the CRI log (after it).
    virtual void tap_output(bool is_stderr, std::string_view bytes) = 0;
    // The instance ended (the output before it was all delivered); the tap
    // is detached already. nullopt: the container object itself went away.
    virtual void tap_exit(std::optional<int> exit_code) = 0;
    // The stdin pipe's queue fell to half of what Container::kMaxStdinQueued
    // allows, or the pipe closed: a paused writer may go on.
    virtual void tap_stdin_drained() = 0;
};

// What a check (probe_runner.cc: exec, tcpSocket, httpGet over HTTP or
// HTTPS, grpc) reports to: a probe, or a lifecycle hook. A check reports
// only if its owner's generation did not change meanwhile; an exec check
// stays in its owner's list until its process exited (so it is reaped).
class CheckOwner {
  public:
    virtual Container *check_container() const = 0;
    virtual const ProbeSpec &check_spec() const = 0;
    virtual unsigned check_generation() const = 0;
    // foreign: the check reached a listener of another user (unready_note).
    virtual void check_done(bool ok, const std::string &output, bool foreign) = 0;
    virtual void release(ProbeCheck *c) = 0;  // the check is over: frees it
    virtual ~CheckOwner() = default;
};
// Starts a check of `owner` (added to `checks`), with its timeout (spec
// time, scaled in tests, unless not `scaled`: a hook's, the user's time).
void start_check(CheckOwner *owner, std::list<std::unique_ptr<ProbeCheck>> *checks,
                 int64_t timeout_ms, bool scaled = true);

// One probe of a container: its state machine plus the timer that runs it.
struct ProbeRunner : CheckOwner {
    ProbeRunner(Container *c, ProbeKind kind, const ProbeSpec &spec);
    ~ProbeRunner() override;
    Container *check_container() const override { return container; }
    const ProbeSpec &check_spec() const override { return state.spec(); }
    unsigned check_generation() const override { return generation; }
    void check_done(bool ok, const std::string &output, bool foreign) override {
        on_result(ok, output, foreign);
    }
    Container *container;
    ProbeState state;
    Timer timer;
    bool active = false;
    bool in_flight = false;
    unsigned generation = 0;
    std::list<std::unique_ptr<ProbeCheck>> checks;

    // (Re)start probing now + initialDelay; resumed: after the job's
    // suspension (ProbeState::resume).
    void arm(bool resumed = false);
    bool active_at_pause = false;  // re-armed at the resume
    // The pids of its exec checks still running (their supervisors).
    void exec_pids(std::vector<int> *out) const;
    void stop();  // no more checks; a check in flight is ignored
    void schedule();
    void run_check();
    // foreign: the check reached a listener of another user (unready_note).
    void on_result(bool ok, const std::string &output, bool foreign = false);
    void release(ProbeCheck *c) override;  // the check is over: frees it
};

// A lifecycle hook of one instance (postStart; preStop by httpGet or
// sleep): its check or its sleep, then done(ok, why) once, on the loop.
// Destroying it (the instance ended, the container stopped) drops an
// answer still to come; an exec check's process is killed with the
// container's processes and reaped by the runner's list until then.
struct HookRunner : CheckOwner {
    HookRunner(Container *c, const ProbeSpec &spec, int64_t timeout_ms,
               std::function<void(bool, const std::string &)> done);
    ~HookRunner() override;
    Container *check_container() const override { return container; }
    const ProbeSpec &check_spec() const override { return spec; }
    unsigned check_generation() const override { return generation; }
    void check_done(bool ok, const std::string &output, bool foreign) override;
    void release(ProbeCheck *c) override;
    void start();
    void exec_pids(std::vector<int> *out) const;

    Container *container;
    ProbeSpec spec;
    int64_t timeout_ms;
    std::function<void(bool, const std::string &)> done;
    Timer sleep;
    unsigned generation = 1;
    bool reported = false;
    std::list<std::unique_ptr<ProbeCheck>> checks;
};

struct Container {
    Container(ContainerHost *pod, ContainerPlan *plan, ContainerRun *run);
    ~Container();

    ContainerHost *pod;
    ContainerPlan *plan;
    ContainerRun *run;

    // How much an instance's stdin pipe holds queued at most before its
    // writers (attached sessions) stop reading their input.
    static constexpr size_t kMaxStdinQueued = size_t{1} << 20;

    // The instance: its supervisor process (closed at the exit; its exit is
    // the main's) and log pipes (closed at their EOF, or kDrainMs after the
    // exit, container.cc); a restart opens fresh ones. With spec.stdin, `in`
    // is the write end of its stdin (closed at the exit, or by stdinOnce).
    Process proc;
    Pipe in, out, err;
    int tty_fd = -1;                 // spec.tty: the terminal's master (out's), -1 otherwise
    bool stdin_ending = false;       // close_stdin() was called for this instance
    std::list<ContainerTap *> taps;  // attached sessions of this instance
    Timer timer;                     // restart back-off
    Timer kill_timer;                // grace period, then the supervisor's kill pass
    uint64_t kill_deadline_ms = 0;   // loop time kill_timer fires at
    Timer drain_timer;               // log pipes after the exit
    Timer started_poll;              // an image container's pid file, after its start
    // A process container's start report (k8s-shim/supervise.h,
    // kSuperviseStartedEnv): EOF without "F" once its command was exec'd.
    Pipe started_report;
    bool start_failed_report = false;
    std::list<Process> hooks;  // preStop processes still running
    // The instance's postStart hook while it runs (the instance is
    // Waiting, ContainerCreating, until it passed), and a preStop hook by
    // httpGet or sleep (SIGTERM when it is done).
    std::unique_ptr<HookRunner> post_start_run, pre_stop_run;
    // Hooks that ended with an exec check still to reap.
    std::list<std::unique_ptr<HookRunner>> ended_hooks;
    bool running = false;
    int pid = 0;  // the supervisor's: the session and process group
    unsigned long long start_ticks = 0;
    bool pending_exit = false;  // supervisor exited, pipes still draining
    int64_t exit_status = 0;
    int term_signal = 0;
    long long oom_before = -1;
    bool killing = false;     // we sent SIGTERM/SIGKILL on purpose
    std::string kill_reason;  // liveness/startup failure: restart per policy
    std::optional<CriLogWriter> log;
    std::string tail;  // last output bytes, for FallbackToLogsOnError
    CrashBackoff backoff;
    std::vector<std::unique_ptr<ProbeRunner>> probes;
    bool sigstopped = false;     // the instance's process group was stopped by pause()
    bool probes_paused = false;  // pause() stopped the probes; the resume re-arms them
    bool start_held = false;     // a start (first, or a restart) came while paused

    // The podman runtime's image step before each start (k8s-shim/podman.h):
    // the presence check (IfNotPresent, Never) or the pull, with `proc` and
    // `err` its process and stderr meanwhile; then start() runs the
    // instance. A failure waits in ErrImagePull/ImagePullBackOff (or
    // ErrImageNeverPull) and tries again after pull_backoff_ms.
    // StorePull: the agent pulls it into the node's image store (public
    // images); Pull: podman pulls it into the job's own storage (with the
    // pod's credentials when it has some, and always without a node store).
    enum class ImageStep { None, Check, StorePull, Pull };
    ImageStep image_step = ImageStep::None;
    bool image_ready = false;  // the step passed: the next start() runs
    bool image_exited = false;
    int64_t image_exit = 0;
    int pull_failures = 0;
    uint64_t pull_started_ms = 0;
    std::string image_output;
    // Lives while the container does: a store pull's answer after it is dropped.
    std::shared_ptr<bool> alive = std::make_shared<bool>(true);
    std::function<void()> cancel_store_pull;  // while a StorePull waits
    bool check_after_pull = false;  // the check that follows a store pull (no second Pulled)
    void begin_image();
    void store_pull_done(const Status &st);
    // A pull succeeded (with `credential`, "" = none): Pulled, then start().
    void image_pulled(const std::string &credential);
    void image_step_start(ImageStep step);
    void image_step_done();
    void image_failed(const std::string &reason, const std::string &message);

    Status start();                                                   // spawn one instance
    int open_stdio(uv_loop_t *loop, SpawnStdio *io, int *tty_slave);  // start()'s stdio
    void mark_running();  // its process runs: postStart, then started
    void mark_started();  // Running, probes armed
    void post_start_done(bool ok, const std::string &why);
    void end_hook(std::unique_ptr<HookRunner> &h);  // dropped; its exec check reaped later
    void stop(int64_t grace_ms);                    // preStop, SIGTERM, grace, SIGKILL
    void arm_kill(int64_t grace_ms, uint64_t now);  // the grace's end, from loop time now
    void kill_for_restart(const std::string &why);  // failed liveness/startup probe
    void kill_all();  // every process now (the supervisor's kill signal), bounded
    void restart_after(int64_t spec_ms);
    void cancel_restart();
    void on_process_exit(int64_t status, int signal);
    void maybe_finish_exit();  // exit seen and pipes at EOF (or drained long enough)
    void on_read(Pipe &p, const char *stream, ssize_t n, const char *data);
    void on_output(const char *stream, const char *data, size_t len);
    void probes_changed();  // recompute ready/started
    // The Slurm job was suspended (true) or resumed (PodRunner::pause).
    void pause(bool paused);
    void continue_stopped();    // SIGCONT of what pause() stopped, before a signal that must land
    void signal_tree(int sig);  // the instance's processes (container.cc says which)

    // Attached sessions (k8s-shim/attach_session.h). attach: only while the
    // instance runs; the tap gets its output from now on, then tap_exit.
    void attach(ContainerTap *t);
    void detach(ContainerTap *t);
    // Queues bytes for the instance's stdin; false when it has none (no
    // spec.stdin, or closed). stdin_queued(): bytes not yet written.
    bool write_stdin(std::string bytes);
    size_t stdin_queued() const;
    void close_stdin();  // the end of input (stdinOnce): EOF once the queue drained
    // spec.tty: the terminal's size (an attached session's resize).
    void resize(uint16_t width, uint16_t height);

    std::string log_path() const;
    std::string id_prefix() const;  // "[pod ns/name] container c:"
};

// Pure: the line that says why a container's command never ran (its whole
// output is one line "cannot start 'PROGRAM': why" and it ended with 128,
// as the supervisor, the exec helper or a failed spawn end it), reported as
// the kubelet's StartError; "" for any other end.
std::string start_failure(int exit_code, const std::string &output);
// Words for a command the kernel refused as too large (E2BIG): about how
// many bytes its words and environment take, and what the node takes.
std::string command_size_note(const SpawnSpec &spec);
// The same for `podman run`: it ended with 125, 126 or 127 and its last line
// is podman's "Error: ..." (no image, no such command in it); "" otherwise.
std::string podman_start_failure(int exit_code, const std::string &output);

}  // namespace sk::shim
