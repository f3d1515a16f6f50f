#include "k8s-shim/container.h"

#include <signal.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/procfs.h"
#include "k8s-shim/pod_runner.h"
#include "k8s-shim/spawn.h"

namespace sk::shim {

namespace {

constexpr size_t kTailBytes = 4096;  // the kubelet's termination message limit

// Per-instance handles: a restarted container gets fresh ones while the old
// ones are still closing.
struct Pipe {
    uv_pipe_t h;
    Container *c;
    const char *stream;
};
struct Proc {
    uv_process_t h;
    Container *c;
};

void close_free_pipe(uv_handle_t *h) {
    delete static_cast<Pipe *>(h->data);
}
void close_free_proc(uv_handle_t *h) {
    delete static_cast<Proc *>(h->data);
}

void alloc_cb(uv_handle_t *, size_t suggested, uv_buf_t *buf) {
    buf->base = new char[suggested];
    buf->len = suggested;
}

void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) noexcept {
    auto *p = static_cast<Pipe *>(s->data);
    if (n > 0) p->c->on_output(p->stream, buf->base, static_cast<size_t>(n));
    delete[] buf->base;
    if (n < 0) {  // EOF or error: this stream is done
        Container *c = p->c;
        uv_close(reinterpret_cast<uv_handle_t *>(s), close_free_pipe);
        c->open_pipes--;
        c->maybe_finish_exit();
    }
}

void exit_cb(uv_process_t *h, int64_t status, int sig) noexcept {
    auto *p = static_cast<Proc *>(h->data);
    Container *c = p->c;
    uv_close(reinterpret_cast<uv_handle_t *>(h), close_free_proc);
    c->on_process_exit(status, sig);
}

void hook_exit_cb(uv_process_t *h, int64_t, int) noexcept {
    auto *p = static_cast<Proc *>(h->data);
    Container *c = p->c;
    uv_close(reinterpret_cast<uv_handle_t *>(h), close_free_proc);
    c->hooks_alive--;
    if (c->running) signal_group(c->pid, SIGTERM);
}

void restart_timer_cb(uv_timer_t *t) noexcept {
    auto *c = static_cast<Container *>(t->data);
    auto st = c->start();
    if (!st) c->pod->changed();
}

void kill_timer_cb(uv_timer_t *t) noexcept {
    auto *c = static_cast<Container *>(t->data);
    if (c->running) {
        LOG_INFO("%s grace period over, sending SIGKILL to the process group",
                 c->id_prefix().c_str());
        signal_group(c->pid, SIGKILL);
    }
}

}  // namespace

Container::Container(PodRunner *p, ContainerPlan *pl, ContainerRun *r) : pod(p), plan(pl), run(r) {
    uv_loop_t *loop = pod->env().clock.loop;
    uv_timer_init(loop, &timer);
    timer.data = this;
    uv_timer_init(loop, &kill_timer);
    kill_timer.data = this;
    if (plan->startup)
        probes.push_back(std::make_unique<ProbeRunner>(this, ProbeKind::Startup, *plan->startup));
    if (plan->readiness)
        probes.push_back(
            std::make_unique<ProbeRunner>(this, ProbeKind::Readiness, *plan->readiness));
    if (plan->liveness)
        probes.push_back(std::make_unique<ProbeRunner>(this, ProbeKind::Liveness, *plan->liveness));
}

Container::~Container() = default;

std::string Container::id_prefix() const {
    return "[pod " + pod->plan().key() + "] container " + plan->name + ":";
}

std::string Container::log_path() const {
    return pod->env().pod_dir + "/" + plan->name + "/" + std::to_string(run->restart_count) +
           ".log";
}

Status Container::start() {
    const auto &env = pod->env();
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

    auto *po = new Pipe{{}, this, "stdout"};
    auto *pe = new Pipe{{}, this, "stderr"};
    auto *pr = new Proc{{}, this};
    uv_pipe_init(env.clock.loop, &po->h, 0);
    uv_pipe_init(env.clock.loop, &pe->h, 0);
    po->h.data = po;
    pe->h.data = pe;
    pr->h.data = pr;
    SpawnSpec spec{plan->argv, plan->env,
                   plan->working_dir.empty() ? env.pod_dir : plan->working_dir};
    oom_before = cgroup_oom_kills();
    int rc = spawn_process(env.clock.loop, &pr->h, spec, exit_cb, &po->h, &pe->h);
    if (rc != 0) {
        uv_close(reinterpret_cast<uv_handle_t *>(&po->h), close_free_pipe);
        uv_close(reinterpret_cast<uv_handle_t *>(&pe->h), close_free_pipe);
        // A failed uv_spawn leaves the process handle initialised: close it too.
        uv_close(reinterpret_cast<uv_handle_t *>(&pr->h), close_free_proc);
        std::string msg = "cannot start '" + plan->argv[0] + "': " + uv_strerror(rc);
        LOG_WARN("%s %s", id_prefix().c_str(), msg.c_str());
        std::string line = msg + "\n";
        (void)log->write("stderr", line.data(), line.size());
        log.reset();
        // Treated like an exit with 128 (the kubelet reports StartError); the
        // restart policy and back-off apply as to any crash.
        running = true;
        pid = 0;
        run->started_ms = Clock::wall_ms();
        run->ever_started = true;
        backoff.on_start(env.clock.spec_now());
        open_pipes = 0;
        on_process_exit(128, 0);
        return {};
    }
    running = true;
    killing = false;
    kill_reason.clear();
    pending_exit = false;
    pid = pr->h.pid;
    start_ticks = proc_start_ticks(pid);
    open_pipes = 2;
    uv_read_start(reinterpret_cast<uv_stream_t *>(&po->h), alloc_cb, read_cb);
    uv_read_start(reinterpret_cast<uv_stream_t *>(&pe->h), alloc_cb, read_cb);

    run->state = CState::Running;
    run->started_ms = Clock::wall_ms();
    run->container_id = container_id(pod->plan().uid, plan->name, run->restart_count);
    run->terminated.reset();
    run->waiting_reason.clear();
    run->waiting_message.clear();
    run->ever_started = true;
    backoff.on_start(env.clock.spec_now());
    LOG_INFO("%s started pid %d (restart %d)", id_prefix().c_str(), pid, run->restart_count);
    for (auto &p : probes)
        if (p->state.kind() == ProbeKind::Startup || !plan->startup) p->arm();
    probes_changed();
    pod->container_started(this);
    return {};
}

void Container::on_output(const char *stream, const char *data, size_t len) {
    if (log) {
        auto st = log->write(stream, data, len);
        if (!st) LOG_WARN("%s log write failed: %s", id_prefix().c_str(), st.message().c_str());
    }
    tail.append(data, len);
    if (tail.size() > 2 * kTailBytes) tail.erase(0, tail.size() - kTailBytes);
}

void Container::on_process_exit(int64_t status, int sig) {
    exit_status = status;
    term_signal = sig;
    pending_exit = true;
    // The container's other processes die with it, as in a cgroup-based
    // runtime; that also closes the pipes they held.
    signal_group(pid, SIGKILL);
    maybe_finish_exit();
}

void Container::maybe_finish_exit() {
    if (!pending_exit || open_pipes > 0) return;
    pending_exit = false;
    running = false;
    uv_timer_stop(&kill_timer);
    for (auto &p : probes)
        p->stop();
    if (log) {
        (void)log->flush();
        log.reset();
    }
    Termination t;
    t.exit_code = term_signal ? 128 + term_signal : static_cast<int>(exit_status);
    long long oom_after = term_signal == SIGKILL && !killing ? cgroup_oom_kills() : -1;
    if (oom_after > oom_before && oom_before >= 0)
        t.reason = "OOMKilled";
    else
        t.reason = t.exit_code == 0 ? "Completed" : "Error";
    if (t.exit_code != 0 && plan->termination_message_policy == "FallbackToLogsOnError")
        t.message = tail.size() > kTailBytes ? tail.substr(tail.size() - kTailBytes) : tail;
    t.started_ms = run->started_ms;
    t.finished_ms = Clock::wall_ms();
    t.container_id = run->container_id;
    run->terminated = t;
    run->state = CState::Terminated;
    run->ready = false;
    run->started = false;
    LOG_INFO("%s exited with %d (%s)", id_prefix().c_str(), t.exit_code, t.reason.c_str());
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
    uv_timer_start(&timer, restart_timer_cb, pod->env().clock.real_delay(spec_ms), 0);
    pod->add_event("Warning", "BackOff",
                   "Back-off restarting failed container " + plan->name + " in pod " +
                       pod->plan().kubelet_name(),
                   plan->name);
}

void Container::cancel_restart() {
    uv_timer_stop(&timer);
}

void Container::stop(int64_t grace_ms) {
    cancel_restart();
    for (auto &p : probes)
        p->stop();
    if (!running || killing) return;
    killing = true;
    if (pid == 0) return;
    uv_timer_start(&kill_timer, kill_timer_cb,
                   static_cast<uint64_t>(std::max<int64_t>(grace_ms, 0)), 0);
    if (!plan->pre_stop.empty() && grace_ms > 0) {
        auto *pr = new Proc{{}, this};
        pr->h.data = pr;
        SpawnSpec spec{plan->pre_stop, plan->env,
                       plan->working_dir.empty() ? pod->env().pod_dir : plan->working_dir};
        int rc = spawn_process(pod->env().clock.loop, &pr->h, spec, hook_exit_cb, nullptr, nullptr);
        if (rc == 0) {
            hooks_alive++;
            LOG_INFO("%s running preStop hook", id_prefix().c_str());
            return;  // SIGTERM when the hook exits (or SIGKILL at the deadline)
        }
        uv_close(reinterpret_cast<uv_handle_t *>(&pr->h), close_free_proc);
        LOG_WARN("%s preStop hook failed to start: %s", id_prefix().c_str(), uv_strerror(rc));
    }
    signal_group(pid, grace_ms > 0 ? SIGTERM : SIGKILL);
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

}  // namespace sk::shim
