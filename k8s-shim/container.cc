#include "k8s-shim/container.h"

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/procfs.h"
#include "common/strings.h"
#include "k8s-shim/pod_stats.h"
#include "k8s-shim/podman.h"
#include "k8s-shim/spawn.h"
#include "k8s-shim/supervise.h"

namespace sk::shim {

namespace {

constexpr size_t kTailBytes = 4096;  // the kubelet's termination message limit
// After the supervisor exited, its log pipes are read this long at most: the
// processes it killed close them at once, one it could not signal (setuid)
// must not keep the container from ending.
constexpr uint64_t kDrainMs = 2000;
// After a supervisor was told to kill everything, how long it may take
// before the shim kills its process group itself (the supervisor stopped by
// a SIGSTOP of the container's own, or a kill pass slowed by a fork bomb).
constexpr uint64_t kSweepMs = kSupervisorSweepMs;
// How often an image container's pid file is looked for after its start.
constexpr uint64_t kStartedPollMs = 10;

}  // namespace

Container::Container(ContainerHost *p, ContainerPlan *pl, ContainerRun *r)
    : pod(p),
      plan(pl),
      run(r),
      timer(p->env().clock.loop),
      kill_timer(p->env().clock.loop),
      drain_timer(p->env().clock.loop),
      started_poll(p->env().clock.loop) {
    if (plan->startup)
        probes.push_back(std::make_unique<ProbeRunner>(this, ProbeKind::Startup, *plan->startup));
    if (plan->readiness)
        probes.push_back(
            std::make_unique<ProbeRunner>(this, ProbeKind::Readiness, *plan->readiness));
    if (plan->liveness)
        probes.push_back(std::make_unique<ProbeRunner>(this, ProbeKind::Liveness, *plan->liveness));
}

Container::~Container() {
    std::list<ContainerTap *> gone;
    gone.swap(taps);
    for (auto *t : gone)
        t->tap_exit(std::nullopt);
}

std::string Container::id_prefix() const {
    return "[pod " + pod->plan().key() + "] container " + plan->name + ":";
}

std::string Container::log_path() const {
    return pod->env().pod_dir + "/" + plan->name + "/" + std::to_string(run->restart_count) +
           ".log";
}

// The instance's stdin, stdout and stderr: pipes, or with spec.tty one
// terminal (its master read as the output, written through a second
// descriptor as the input; *tty_slave the container's end). An errno when
// the terminal cannot be had: the start then fails as a spawn that failed.
int Container::open_stdio(uv_loop_t *loop, SpawnStdio *io, int *tty_slave) {
    tty_fd = -1;
    if (!plan->tty) {
        in = plan->stdin_open ? Pipe(loop) : Pipe();
        out = Pipe(loop);
        err = Pipe(loop);
        io->in = in ? &in : nullptr;
        io->out = &out;
        io->err = &err;
        return 0;
    }
    int master = -1;
    in = Pipe();
    out = Pipe(loop);
    err = Pipe();
    if (openpty(&master, tty_slave, nullptr, nullptr, nullptr) != 0) return errno;
    (void)fcntl(master, F_SETFD, FD_CLOEXEC);
    (void)fcntl(*tty_slave, F_SETFD, FD_CLOEXEC);
    int writer = plan->stdin_open ? fcntl(master, F_DUPFD_CLOEXEC, 0) : -1;
    if (out.open(master) != 0) {
        close(master);
        if (writer >= 0) close(writer);
        io->terminal_fd = *tty_slave;
        return EIO;
    }
    if (writer >= 0) {
        in = Pipe(loop);
        if (in.open(writer) != 0) {
            close(writer);
            in = Pipe();
        }
    }
    tty_fd = master;
    io->terminal_fd = *tty_slave;
    return 0;
}

Status Container::start() {
    const auto &env = pod->env();
    if (pod->run().paused) {  // started at the resume
        start_held = true;
        return {};
    }
    start_held = false;
    if (plan->image_run) {
        if (image_step != ImageStep::None) return {};  // it starts the instance
        if (!image_ready) {
            begin_image();
            return {};
        }
        image_ready = false;  // the next start looks at the image again
    }
    if (run->ever_started) {
        run->restart_count++;
        run->last = run->terminated;
    }
    std::string dir = env.pod_dir + "/" + plan->name;
    mkdir(dir.c_str(), 0750);
    auto w = CriLogWriter::open(log_path(), env.log_max_bytes);
    if (!w) {
        LOG_ERROR("%s cannot open its log: %s", id_prefix().c_str(), w.message().c_str());
        run->state = CState::Waiting;
        run->waiting_reason = "CreateContainerError";
        run->waiting_message = w.message();
        return w.failure();
    }
    log.emplace(std::move(*w));
    tail.clear();

    if (plan->image_run) (void)unlink(plan->image_run->pidfile.c_str());
    if (plan->image_run && !plan->image_run->termination_log.empty()) {
        // Empty at each start: the message is this instance's.
        if (auto st =
                write_file_atomic(plan->image_run->termination_log, "", 0600, Durability::Cached);
            !st)
            LOG_WARN("%s %s", id_prefix().c_str(), st.message().c_str());
    }
    uv_loop_t *loop = env.clock.loop;
    stdin_ending = false;
    SpawnStdio io;
    int tty_slave = -1;
    const int tty_error = open_stdio(loop, &io, &tty_slave);
    SpawnSpec spec = container_command(plan->argv, *plan, env.pod_dir, env.supervisor, 0);
    oom_before = cgroup_oom_kills(plan->cgroup_pod_uid, plan->cgroup_job_id, plan->name);
    start_failed_report = false;
    if (!plan->image_run) {
        started_report = Pipe(loop);
        io.started = &started_report;
    }
    int rc = tty_error ? uv_translate_sys_error(tty_error)
                       : spawn_supervised(
                             loop, proc, env.supervisor, spec,
                             [this](int64_t status, int sig) {
                                 proc.close();
                                 on_process_exit(status, sig);
                             },
                             io);
    if (tty_slave >= 0) close(tty_slave);  // the container's now
    if (rc != 0) {
        in.close();
        out.close();
        err.close();
        started_report.close();
        std::string msg = "cannot start '" + plan->argv[0] + "': " + uv_strerror(rc);
        if (rc == UV_E2BIG) msg += command_size_note(spec);
        if (rc == UV_EAGAIN)
            msg +=
                " (the job's process limit is reached: its cgroup's pids.max, or the "
                "user's RLIMIT_NPROC)";
        LOG_WARN("%s %s", id_prefix().c_str(), msg.c_str());
        std::string line = msg + "\n";
        (void)log->write("stderr", line.data(), line.size());
        log.reset();
        // The start's failure is what its status says (StartError, message).
        tail = line;
        // Treated like an exit with 128 (the kubelet reports StartError); the
        // restart policy and back-off apply as to any crash.
        running = true;
        pid = 0;
        run->started_ms = Clock::wall_ms();
        run->ever_started = true;
        backoff.on_start(env.clock.spec_now());
        on_process_exit(128, 0);
        return {};
    }
    running = true;
    killing = false;
    kill_reason.clear();
    pending_exit = false;
    pid = proc.pid();
    start_ticks = proc_start_ticks(pid);
    out.read_start([this](ssize_t n, const char *data) { on_read(out, "stdout", n, data); });
    if (err)
        err.read_start([this](ssize_t n, const char *data) { on_read(err, "stderr", n, data); });

    run->started_ms = Clock::wall_ms();
    run->container_id = container_id(pod->plan().uid, plan->name, run->restart_count);
    run->terminated.reset();
    run->ever_started = true;
    backoff.on_start(env.clock.spec_now());
    LOG_INFO("%s started pid %d (restart %d)", id_prefix().c_str(), pid, run->restart_count);
    if (!plan->image_run) {
        // Running once its command was exec'd (the start report's end with
        // no "F"), not at the supervisor's spawn: a command that never runs
        // (its cgroup full, no such program) never shows Running or Started.
        run->state = CState::Waiting;
        run->waiting_reason = "ContainerCreating";
        run->waiting_message.clear();
        started_report.read_start([this](ssize_t n, const char *data) {
            if (n > 0 && memchr(data, 'F', static_cast<size_t>(n))) start_failed_report = true;
            if (n >= 0) return;
            started_report.close();
            if (!start_failed_report && running && !pending_exit && run->state != CState::Running)
                mark_running();
        });
        return {};
    }
    // An image container runs once podman made its process (its pid file):
    // until then it is Waiting, ContainerCreating, as on a kubelet.
    run->state = CState::Waiting;
    run->waiting_reason = "ContainerCreating";
    run->waiting_message.clear();
    pod->changed();
    started_poll.start(
        kStartedPollMs,
        [this] {
            struct stat st;
            if (!running || pending_exit || stat(plan->image_run->pidfile.c_str(), &st) != 0)
                return;
            started_poll.stop();
            run->started_ms = Clock::wall_ms();
            mark_running();
        },
        kStartedPollMs);
    return {};
}

namespace {
// A lifecycle hook's bound: the pod's grace period (at least a second), as
// a kubelet bounds preStop; the user's time, not scaled in tests.
int64_t hook_timeout_ms(const ContainerHost *pod) {
    return std::max<int64_t>(1, pod->plan().grace_s) * 1000;
}

std::string hook_words(const ProbeSpec &h) {
    switch (h.action) {
        case ProbeAction::Exec: {
            std::string cmd;
            for (const auto &w : h.exec)
                cmd += (cmd.empty() ? "" : " ") + w;
            return "Exec lifecycle hook ([" + cmd + "])";
        }
        case ProbeAction::HttpGet:
            return "HTTP lifecycle hook (" + h.path + ")";
        default:
            return "Sleep lifecycle hook (" + std::to_string(h.sleep_s) + "s)";
    }
}
}  // namespace

void Container::end_hook(std::unique_ptr<HookRunner> &h) {
    if (!h) return;
    h->generation++;  // an answer still to come is dropped
    h->reported = true;
    h->sleep.stop();
    // Those whose checks are over go now; this one after its check is
    // released (it may be reporting right now).
    ended_hooks.remove_if([](const std::unique_ptr<HookRunner> &e) { return e->checks.empty(); });
    ended_hooks.push_back(std::move(h));
}

// As a kubelet: a container with a postStart hook is not Running, and its
// probes do not run, until the hook passed; a hook that fails kills the
// container (FailedPostStartHook), which then restarts per its policy.
void Container::mark_running() {
    if (plan->post_start && !post_start_run) {
        post_start_run = std::make_unique<HookRunner>(
            this, *plan->post_start, hook_timeout_ms(pod),
            [this](bool ok, const std::string &why) { post_start_done(ok, why); });
        LOG_VERBOSE("%s running postStart hook", id_prefix().c_str());
        post_start_run->start();
        return;
    }
    mark_started();
}

void Container::post_start_done(bool ok, const std::string &why) {
    end_hook(post_start_run);
    if (!running || killing || pending_exit) return;
    if (ok) {
        mark_started();
        return;
    }
    std::string msg = hook_words(*plan->post_start) + " for Container \"" + plan->name +
                      "\" in Pod \"" + pod->plan().kubelet_name() + "\" failed - error: " + why;
    LOG_WARN("%s %s", id_prefix().c_str(), msg.c_str());
    pod->add_event("Warning", "FailedPostStartHook", msg, plan->name);
    kill_for_restart("FailedPostStartHook");
}

void Container::mark_started() {
    run->state = CState::Running;
    run->waiting_reason.clear();
    run->waiting_message.clear();
    for (auto &p : probes)
        if (p->state.kind() == ProbeKind::Startup || !plan->startup) p->arm();
    probes_changed();
    pod->container_started(this);
}

void Container::begin_image() {
    const ImageRun &r = *plan->image_run;
    KnownImages *known = pod->env().images;
    const bool warm = pod->env().podman_warm && *pod->env().podman_warm;
    // In the node's store and not pulled by a pod of this job: public.
    if (r.pull_policy != "Always" && known && warm && !known->known(r.image) &&
        store_lists(pod->env().store_view, r.image))
        known->add(r.image, "");
    if (r.pull_policy != "Always" && known && warm && known->usable(r.image, r.credential)) {
        pod->add_event("Normal", "Pulled",
                       "Container image \"" + plan->image + "\" already present on machine",
                       plan->name);
        image_ready = true;
        auto st = start();
        if (!st) pod->changed();
        return;
    }
    image_step_start(r.pull_policy == "Always" ? ImageStep::Pull : ImageStep::Check);
}

void Container::image_step_start(ImageStep step) {
    const auto &env = pod->env();
    const ImageRun &r = *plan->image_run;
    if (run->state != CState::Waiting || run->waiting_reason.empty() ||
        run->waiting_reason == "CrashLoopBackOff") {
        run->state = CState::Waiting;
        run->waiting_reason = "ContainerCreating";
        run->waiting_message.clear();
    }
    // A pull goes to the node's image store first (public images); one that
    // fails there goes to the job's own storage when the pod has credentials.
    if (step == ImageStep::Pull && env.store_pull && image_step != ImageStep::StorePull)
        step = ImageStep::StorePull;
    if (step != ImageStep::Check && image_step != ImageStep::StorePull) {
        pod->add_event("Normal", "Pulling", "Pulling image \"" + plan->image + "\"", plan->name);
        pull_started_ms = Clock::wall_ms();
    }
    image_output.clear();
    image_exited = false;
    if (step == ImageStep::StorePull) {
        image_step = step;
        cancel_store_pull =
            env.store_pull(r.image, [this, alive = std::weak_ptr<bool>(alive)](const Status &st) {
                if (alive.expired()) return;
                cancel_store_pull = nullptr;
                store_pull_done(st);
            });
        pod->changed();
        return;
    }
    SpawnSpec spec;
    spec.argv = step == ImageStep::Pull ? podman_pull_argv(r) : podman_exists_argv(r);
    for (const auto &[name, value] : r.tool_env)
        spec.env.push_back({name, value});
    spec.cwd = env.pod_dir;
    err = Pipe(env.clock.loop);
    int rc = spawn_process(
        env.clock.loop, proc, spec,
        [this](int64_t status, int sig) {
            proc.close();
            image_exited = true;
            image_exit = sig ? 128 + sig : status;
            image_step_done();
        },
        nullptr, &err);
    if (rc != 0) {
        err.close();
        image_step = ImageStep::None;
        image_failed("ErrImagePull",
                     "cannot start '" + r.podman[0] + "': " + std::string(uv_strerror(rc)));
        return;
    }
    image_step = step;
    err.read_start([this](ssize_t n, const char *data) {
        if (n > 0 && image_output.size() < 16384) image_output.append(data, static_cast<size_t>(n));
        if (n < 0) {
            err.close();
            image_step_done();
        }
    });
    pod->changed();
}

void Container::store_pull_done(const Status &st) {
    if (image_step != ImageStep::StorePull || killing || pod->run().stopping) return;  // cancelled
    const ImageRun &r = *plan->image_run;
    if (!st && !r.credential.empty()) {
        // Not public (or the store could not reach it): the pod's own
        // credentials pull it into the job's storage, for pods with them.
        LOG_INFO(
            "%s the node's image store did not pull %s (%s): pulling it with the pod's "
            "credentials into the job's storage",
            id_prefix().c_str(), r.image.c_str(), st.message().c_str());
        image_step_start(ImageStep::Pull);
        return;
    }
    image_step = ImageStep::None;
    if (!st) {
        image_failed("ErrImagePull", st.message());
        return;
    }
    image_pulled("");
}

void Container::image_pulled(const std::string &credential) {
    pod->add_event("Normal", "Pulled",
                   "Successfully pulled image \"" + plan->image + "\" in " +
                       go_duration(static_cast<int64_t>(Clock::wall_ms() - pull_started_ms)),
                   plan->name);
    pull_failures = 0;
    if (auto *known = pod->env().images) known->add(plan->image_run->image, credential);
    if (pod->env().podman_warm && !*pod->env().podman_warm) {
        // The node's store pulled it: no podman command of the shim's ran
        // yet in this job; one does now (RunnerEnv::podman_warm).
        check_after_pull = true;
        image_step_start(ImageStep::Check);
        return;
    }
    image_ready = true;
    auto st = start();
    if (!st) pod->changed();
}

void Container::image_step_done() {
    if (!image_exited || err) return;
    ImageStep step = image_step;
    image_step = ImageStep::None;
    if (step == ImageStep::None || killing || pod->run().stopping) return;  // cancelled
    const ImageRun &r = *plan->image_run;
    const std::string quoted = "\"" + plan->image + "\"";
    const bool never = r.pull_policy == "Never";
    KnownImages *known = pod->env().images;
    // Present, but pulled by another pod with other credentials: this pod
    // pulls it with its own (or fails, as it could not pull it).
    const bool others = step == ImageStep::Check && image_exit == 0 && known &&
                        known->known(r.image) && !known->usable(r.image, r.credential);
    if (step == ImageStep::Check && image_exit == 1 && pod->env().podman_warm)
        *pod->env().podman_warm = true;  // it ran: the pause process is the shim's
    if (step == ImageStep::Check && (image_exit == 1 || others)) {
        if (never)
            image_failed("ErrImageNeverPull",
                         "Container image " + quoted + " is not present with pull policy of Never");
        else
            image_step_start(ImageStep::Pull);
        return;
    }
    if (image_exit != 0) {
        image_failed("ErrImagePull", pull_error(image_output));
        return;
    }
    if (pod->env().podman_warm) *pod->env().podman_warm = true;
    if (step == ImageStep::Check) {
        // Present and not pulled by another pod of the job: the node's store.
        if (!std::exchange(check_after_pull, false))
            pod->add_event("Normal", "Pulled",
                           "Container image " + quoted + " already present on machine", plan->name);
        if (known && !known->known(r.image)) known->add(r.image, "");
        image_ready = true;
        auto st = start();
        if (!st) pod->changed();
        return;
    }
    image_pulled(r.credential);
}

void Container::image_failed(const std::string &reason, const std::string &message) {
    check_after_pull = false;
    const std::string quoted = "\"" + plan->image + "\"";
    pull_failures++;
    if (reason == "ErrImagePull") {
        pod->add_event("Warning", "Failed", "Failed to pull image " + quoted + ": " + message,
                       plan->name);
        pod->add_event("Warning", "Failed", "Error: ErrImagePull", plan->name);
    } else {
        pod->add_event("Warning", reason, message, plan->name);
    }
    LOG_WARN("%s %s: %s", id_prefix().c_str(), reason.c_str(), message.c_str());
    run->state = CState::Waiting;
    run->waiting_reason = reason;
    run->waiting_message = message;
    pod->changed();
    const int64_t delay = pull_backoff_ms(pull_failures);
    const Clock &clock = pod->env().clock;
    if (reason != "ErrImagePull") {
        timer.start(clock.real_delay(delay), [this] { begin_image(); });
        return;
    }
    // As the kubelet: ErrImagePull, then ImagePullBackOff until the next try.
    timer.start(clock.real_delay(1000), [this, delay, quoted] {
        run->waiting_reason = "ImagePullBackOff";
        run->waiting_message = "Back-off pulling image " + quoted;
        pod->add_event("Normal", "BackOff", "Back-off pulling image " + quoted, plan->name);
        pod->add_event("Warning", "Failed", "Error: ImagePullBackOff", plan->name);
        pod->changed();
        timer.start(pod->env().clock.real_delay(std::max<int64_t>(delay - 1000, 0)),
                    [this] { begin_image(); });
    });
}

void Container::on_read(Pipe &p, const char *stream, ssize_t n, const char *data) {
    if (n > 0) on_output(stream, data, static_cast<size_t>(n));
    if (n < 0) {  // EOF or error (a terminal whose last holder closed it: EIO): done
        if (&p == &out) tty_fd = -1;
        p.close();
        maybe_finish_exit();
    }
}

void Container::resize(uint16_t width, uint16_t height) {
    if (tty_fd < 0) return;
    struct winsize ws {};
    ws.ws_col = width;
    ws.ws_row = height;
    (void)ioctl(tty_fd, TIOCSWINSZ, &ws);
}

void Container::on_output(const char *stream, const char *data, size_t len) {
    if (log) {
        auto st = log->write(stream, data, len);
        if (!st) LOG_WARN("%s log write failed: %s", id_prefix().c_str(), st.message().c_str());
    }
    tail.append(data, len);
    if (tail.size() > 2 * kTailBytes) tail.erase(0, tail.size() - kTailBytes);
    const bool is_stderr = std::string_view(stream) == "stderr";
    for (auto it = taps.begin(); it != taps.end();) {
        ContainerTap *t = *it++;  // first: t may detach itself
        t->tap_output(is_stderr, std::string_view(data, len));
    }
}

void Container::attach(ContainerTap *t) {
    taps.push_back(t);
}

void Container::detach(ContainerTap *t) {
    taps.remove(t);
}

bool Container::write_stdin(std::string bytes) {
    if (!in || stdin_ending) return false;
    in.write(std::move(bytes), [this](int) {
        if (in && in.write_queue_size() > kMaxStdinQueued / 2) return;
        for (auto it = taps.begin(); it != taps.end();) {
            ContainerTap *t = *it++;
            t->tap_stdin_drained();
        }
    });
    return true;
}

size_t Container::stdin_queued() const {
    return in ? in.write_queue_size() : 0;
}

void Container::close_stdin() {
    if (!in || stdin_ending) return;
    stdin_ending = true;
    LOG_INFO("%s stdin closed (stdinOnce)", id_prefix().c_str());
    in.shutdown([this](int) {
        in.close();
        for (auto it = taps.begin(); it != taps.end();) {
            ContainerTap *t = *it++;
            t->tap_stdin_drained();
        }
    });
}

void Container::on_process_exit(int64_t status, int sig) {
    exit_status = status;
    term_signal = sig;
    pending_exit = true;
    end_hook(post_start_run);  // the instance it ran for is gone
    end_hook(pre_stop_run);
    kill_timer.stop();
    in.close();
    // The supervisor killed the container's other processes before it
    // exited (k8s-shim/supervise.h). Its group too, in case the supervisor
    // itself was killed; what is left cannot hold the container open
    // longer than kDrainMs.
    signal_group(pid, SIGKILL);
    if (out || err)
        drain_timer.start(kDrainMs, [this] {
            LOG_INFO("%s log pipes still open %llu ms after the exit, closing them",
                     id_prefix().c_str(), static_cast<unsigned long long>(kDrainMs));
            out.close();
            err.close();
            maybe_finish_exit();
        });
    maybe_finish_exit();
}

std::string command_size_note(const SpawnSpec &spec) {
    size_t bytes = 0;
    for (const auto &w : spec.argv)
        bytes += w.size() + 1 + sizeof(char *);
    for (const auto &e : spec.env)
        bytes += e.name.size() + e.value.size() + 2 + sizeof(char *);
    long max = sysconf(_SC_ARG_MAX);
    return " (its command, arguments and environment take about " + std::to_string(bytes) +
           " bytes; this node's kernel takes at most " + std::to_string(max) +
           " (ARG_MAX, a quarter of the stack size limit) in all, and 131072 for any one "
           "argument or variable: pass large data in a file, a ConfigMap or Secret volume)";
}

std::string start_failure(int exit_code, const std::string &output) {
    std::string line(trim(output));
    if (exit_code != 128 || line.rfind("cannot start '", 0) != 0 ||
        line.find('\n') != std::string::npos)
        return "";
    return line;
}

std::string podman_start_failure(int exit_code, const std::string &output) {
    if (exit_code < 125 || exit_code > 127) return "";
    std::string last;
    for (const auto &line : split(output, '\n'))
        if (!trim(line).empty()) last = std::string(trim(line));
    if (last.rfind("Error: ", 0) != 0) return "";
    return last.substr(7);
}

void Container::maybe_finish_exit() {
    if (!pending_exit || out || err) return;
    pending_exit = false;
    running = false;
    started_poll.stop();
    started_report.close();
    kill_timer.stop();
    drain_timer.stop();
    for (auto &p : probes)
        p->stop();
    if (log) {
        (void)log->flush();
        log.reset();
    }
    Termination t;
    t.exit_code = term_signal ? 128 + term_signal : static_cast<int>(exit_status);
    long long oom_after =
        term_signal == SIGKILL && !killing
            ? cgroup_oom_kills(plan->cgroup_pod_uid, plan->cgroup_job_id, plan->name)
            : -1;
    std::string start_error = start_failure(t.exit_code, tail);
    if (start_error.empty() && plan->image_run)
        start_error = podman_start_failure(t.exit_code, tail);
    // The image went from the job's storage meanwhile: the next start checks.
    if (!start_error.empty() && plan->image_run && pod->env().images)
        pod->env().images->forget(plan->image_run->image);
    if (oom_after > oom_before && oom_before >= 0)
        t.reason = "OOMKilled";
    else if (!start_error.empty())
        t.reason = "StartError";
    else
        t.reason = t.exit_code == 0 ? "Completed" : "Error";
    // A start that failed says why (kubectl describe), as the kubelet's
    // StartError does, whatever terminationMessagePolicy says; otherwise
    // what an image container wrote to its terminationMessagePath, else
    // with FallbackToLogsOnError the log's tail after a failure.
    if (!start_error.empty())
        t.message = start_error;
    else if (plan->image_run && !plan->image_run->termination_log.empty())
        t.message = read_termination_message(plan->image_run->termination_log);
    if (t.message.empty() && start_error.empty() && t.exit_code != 0 &&
        plan->termination_message_policy == "FallbackToLogsOnError")
        t.message = termination_message_from_log(tail);
    t.started_ms = run->started_ms;
    t.finished_ms = Clock::wall_ms();
    t.container_id = run->container_id;
    run->terminated = t;
    run->state = CState::Terminated;
    run->ready = false;
    run->started = false;
    LOG_INFO("%s exited with %d (%s)", id_prefix().c_str(), t.exit_code, t.reason.c_str());
    // Attached sessions get the exit before a restart can start the next instance.
    std::list<ContainerTap *> attached;
    attached.swap(taps);
    for (auto *tap : attached)
        tap->tap_exit(t.exit_code);
    pod->container_exited(this);
}

void Container::restart_after(int64_t spec_ms) {
    if (spec_ms <= 0) {
        auto st = start();
        if (!st) pod->changed();
        return;
    }
    run->state = CState::Waiting;
    run->waiting_reason = "CrashLoopBackOff";
    run->waiting_message = "back-off " + go_duration(spec_ms) +
                           " restarting failed container=" + plan->name +
                           " pod=" + pod->plan().kubelet_name();
    timer.start(pod->env().clock.real_delay(spec_ms), [this] {
        auto st = start();
        if (!st) pod->changed();
    });
    pod->add_event("Warning", "BackOff",
                   "Back-off restarting failed container " + plan->name + " in pod " +
                       pod->plan().kubelet_name(),
                   plan->name);
}

void Container::cancel_restart() {
    timer.stop();
}

void Container::stop(int64_t grace_ms) {
    cancel_restart();
    if (image_step != ImageStep::None) {  // a pull outliving its pod: cancelled
        LOG_INFO("%s image step cancelled", id_prefix().c_str());
        const bool spawned = image_step != ImageStep::StorePull;
        image_step = ImageStep::None;
        if (spawned && proc) signal_group(proc.pid(), SIGKILL);
        if (!spawned && cancel_store_pull) std::exchange(cancel_store_pull, nullptr)();
    }
    start_held = false;
    for (auto &p : probes)
        p->stop();
    if (!running) return;
    continue_stopped();  // a stopped process sees SIGTERM only once continued
    grace_ms = std::max<int64_t>(grace_ms, 0);
    const uint64_t now = uv_now(pod->env().clock.loop);
    if (killing) {
        // A shorter grace shortens a stop in progress, as the kubelet's grace
        // override does (a second DELETE with a smaller grace period, the
        // job's end while a pod drains): the kill comes at the earlier deadline.
        if (pid != 0 && now + static_cast<uint64_t>(grace_ms) < kill_deadline_ms) {
            LOG_INFO("%s grace shortened to %llds", id_prefix().c_str(),
                     static_cast<long long>(grace_ms / 1000));
            arm_kill(grace_ms, now);
        }
        return;
    }
    killing = true;
    if (pid == 0) return;
    arm_kill(grace_ms, now);
    end_hook(post_start_run);  // stopped before it started: its postStart ends
    if (plan->pre_stop && plan->pre_stop->action != ProbeAction::Exec && grace_ms > 0) {
        // httpGet or sleep, bounded by the grace period (the kill timer).
        pre_stop_run = std::make_unique<HookRunner>(
            this, *plan->pre_stop, grace_ms, [this](bool ok, const std::string &why) {
                if (!ok) {
                    std::string msg = hook_words(*plan->pre_stop) + " for Container \"" +
                                      plan->name + "\" in Pod \"" + pod->plan().kubelet_name() +
                                      "\" failed - error: " + why;
                    LOG_WARN("%s %s", id_prefix().c_str(), msg.c_str());
                    pod->add_event("Warning", "FailedPreStopHook", msg, plan->name);
                }
                end_hook(pre_stop_run);
                if (running) signal_group(pid, SIGTERM);
            });
        LOG_INFO("%s running preStop hook", id_prefix().c_str());
        pre_stop_run->start();
        return;  // SIGTERM when it is done (or SIGKILL at the deadline)
    }
    if (plan->pre_stop && grace_ms > 0) {
        SpawnSpec spec = container_command(plan->pre_stop->exec, *plan, pod->env().pod_dir,
                                           pod->env().supervisor, pid);
        auto hook = hooks.emplace(hooks.end());
        int rc = spawn_container(
            pod->env().clock.loop, *hook, pod->env().supervisor, spec,
            [this, hook](int64_t status, int sig) {
                hooks.erase(hook);
                if (status != 0 || sig != 0) {
                    std::string msg =
                        hook_words(*plan->pre_stop) + " for Container \"" + plan->name +
                        "\" in Pod \"" + pod->plan().kubelet_name() +
                        "\" failed - error: command exited with " +
                        (sig ? "signal " + std::to_string(sig) : "code " + std::to_string(status));
                    pod->add_event("Warning", "FailedPreStopHook", msg, plan->name);
                }
                if (running) signal_group(pid, SIGTERM);
            },
            nullptr, nullptr);
        if (rc == 0) {
            LOG_INFO("%s running preStop hook", id_prefix().c_str());
            if (pod->env().on_processes) pod->env().on_processes();  // recorded (state.json)
            return;  // SIGTERM when the hook exits (or SIGKILL at the deadline)
        }
        hooks.erase(hook);
        LOG_WARN("%s preStop hook failed to start: %s", id_prefix().c_str(), uv_strerror(rc));
    }
    if (grace_ms > 0)
        signal_group(pid, SIGTERM);
    else
        kill_all();
}

void Container::arm_kill(int64_t grace_ms, uint64_t now) {
    kill_deadline_ms = now + static_cast<uint64_t>(grace_ms);
    kill_timer.start(static_cast<uint64_t>(grace_ms), [this] {
        if (running && !pending_exit) {
            LOG_INFO("%s grace period over, killing every process of the container",
                     id_prefix().c_str());
            kill_all();
        }
    });
}

void Container::kill_all() {
    continue_stopped();
    kill_supervised(pid);
    for (auto &h : hooks)  // a preStop hook still running ends with the grace
        kill_supervised(h.pid());
    for (auto *h : {post_start_run.get(), pre_stop_run.get()}) {
        std::vector<int> pids;
        if (h) h->exec_pids(&pids);
        for (int p : pids)
            kill_supervised(p);
    }
    kill_timer.start(kSweepMs, [this] {
        if (!running || pending_exit) return;
        LOG_WARN("%s its supervisor did not end within %llu ms, killing its process group",
                 id_prefix().c_str(), static_cast<unsigned long long>(kSweepMs));
        signal_group(pid, SIGKILL);
    });
}

void Container::kill_for_restart(const std::string &why) {
    if (!running || killing) return;
    kill_reason = why;
    LOG_INFO("%s %s, will be restarted", id_prefix().c_str(), why.c_str());
    stop(pod->plan().grace_s * 1000);  // the exit then follows the restart policy
}

void Container::probes_changed() {
    if (!running) {
        run->started = run->ready = false;
        return;
    }
    bool started = true, ready = true;
    for (auto &p : probes) {
        Outcome o = p->state.outcome();
        if (p->state.kind() == ProbeKind::Startup) started = o == Outcome::Success;
        if (p->state.kind() == ProbeKind::Readiness) ready = o == Outcome::Success && p->active;
    }
    run->started = started;
    run->ready = started && ready;
}

// The shim runs unprivileged inside the job, so it cannot use the freezer
// of a cgroup it does not own (podman pause's way): SIGSTOP of the
// instance's process group, the set SIGTERM reaches. Probes stop (a
// stopped container would fail them, and liveness would restart it); a
// start due meanwhile is held by start(). The resume continues the group,
// arms the probes as at the instance's start (a readiness probe must pass
// again) and runs a held start.
void Container::pause(bool paused) {
    if (paused) {
        // The probes that run now run again at the resume (not a startup
        // probe that already passed, nor those it has not started yet).
        if (!probes_paused) {
            for (auto &p : probes) {
                p->active_at_pause = p->active;
                p->stop();
            }
            probes_paused = true;
        }
        run->ready = false;
        if (running && pid != 0 && !killing && !sigstopped) {
            signal_tree(SIGSTOP);
            sigstopped = true;
            LOG_INFO("%s stopped: the Slurm job is suspended", id_prefix().c_str());
        }
        return;
    }
    if (sigstopped) LOG_INFO("%s continued: the Slurm job resumed", id_prefix().c_str());
    continue_stopped();
    if (probes_paused && running && !killing) {
        for (auto &p : probes)
            if (p->active_at_pause) p->arm(true);
        probes_changed();
    }
    probes_paused = false;
    if (start_held && !killing) {
        auto st = start();
        if (!st) pod->changed();
    }
}

void Container::continue_stopped() {
    if (!sigstopped) return;
    sigstopped = false;
    if (running && pid != 0) signal_tree(SIGCONT);
}

// The process group holds every process of a process container (its
// processes that left it are stopped by the supervisor's sweep at the end
// anyway). An image container's processes are in sessions of conmon's and
// the runtime's, below the supervisor (a subreaper): they are found in the
// process tree.
void Container::signal_tree(int sig) {
    signal_group(pid, sig);
    if (!plan->image_run) return;
    for (int p : tree_pids(read_process_table(), pid))
        (void)kill(p, sig);
}

}  // namespace sk::shim
