// Probe and hook checks on the loop: exec (a process in the container's
// environment, its own process group, killed at the timeout), tcpSocket
// (connect) and httpGet over HTTP (HTTP/1.1 GET, 200-399 is success), all
// with hostNetwork semantics; httpGet over HTTPS and grpc through libcurl
// in libuv's thread pool (k8s-shim/http_check.h).
#include <arpa/inet.h>
#include <signal.h>
#include <string.h>
#include <uv.h>

#include <unistd.h>

#include "common/daemons/tcp_listeners.h"
#include "common/fs.h"
#include "common/log.h"
#include "k8s-shim/container.h"
#include "k8s-shim/http_check.h"
#include "k8s-shim/spawn.h"

namespace sk::shim {

struct CurlWork;

// One check in flight, owned by its owner's list: its handles close with
// it.
struct ProbeCheck {
    CheckOwner *owner;
    bool foreign = false;  // it reached a listener of another user
    unsigned generation;
    Timer timeout;
    Process proc;  // exec: open until the process exited
    Tcp tcp;       // tcpSocket, httpGet
    std::string request, response;
    bool done = false;
    int pgid = 0;
    CurlWork *work = nullptr;  // HTTPS, grpc: the thread pool's request in flight

    ~ProbeCheck();
    void finish(bool ok, const std::string &output);
    void on_connected(int status);
    void on_http_read(ssize_t n, const char *data);
    void on_curl(const CheckResult &r);
    bool reached_foreign();
};

// An HTTPS or grpc check on a thread of the pool; `check` is cleared when
// the check goes first (its timeout), and the answer then dropped.
struct CurlWork {
    uv_work_t req;
    ProbeSpec spec;
    int64_t timeout_ms = 0;
    CheckResult result;
    ProbeCheck *check = nullptr;
};

ProbeCheck::~ProbeCheck() {
    if (work) work->check = nullptr;
}

// Reports once; the check is freed once it reported and its process (exec)
// was reaped. Nothing may use the check after a call.
void ProbeCheck::finish(bool ok, const std::string &output) {
    if (!done) {
        done = true;
        timeout.close();
        tcp.close();
        if (owner->check_generation() == generation) owner->check_done(ok, output, foreign);
    }
    if (!proc) owner->release(this);
}

void ProbeCheck::on_http_read(ssize_t n, const char *data) {
    if (n > 0) response.append(data, static_cast<size_t>(n));
    size_t eol = response.find("\r\n");
    if (eol == std::string::npos && n >= 0 && response.size() < 8192) return;
    // "HTTP/1.1 200 OK"
    int code = 0;
    if (response.compare(0, 5, "HTTP/") == 0) {
        size_t sp = response.find(' ');
        if (sp != std::string::npos)
            code = static_cast<int>(strtol(response.c_str() + sp + 1, nullptr, 10));
    }
    finish(
        code >= 200 && code < 400,
        code ? "HTTP probe failed with statuscode: " + std::to_string(code) : "no HTTP response");
}

namespace {

constexpr size_t kMaxProcNetTcp = 16 << 20;  // /proc/net/tcp of a host with 100k sockets

// Pods share the node's network: the socket a probe reached may be another
// user's, who took the port first (docs/security.md, "Probes"). The probe
// vouches only for a listener of the job's user (the shim's own uid; with
// images, one of its subordinate uids, which a container's non-root user
// maps to). Why not, in words; nullopt when it is the job's, or when the
// tables do not tell.
std::optional<std::string> foreign_listener(const std::string &host, uint16_t port) {
    auto tcp = read_file("/proc/net/tcp", kMaxProcNetTcp);
    auto tcp6 = read_file("/proc/net/tcp6", kMaxProcNetTcp);
    auto l = accepting_listener(tcp ? *tcp : "", tcp6 ? *tcp6 : "", host, port);
    uid_t me = geteuid();
    if (!l || l->uid == me) return std::nullopt;
    static const std::vector<IdRange> subuids = [] {
        auto text = read_file("/etc/subuid", 1 << 20);
        return text ? subordinate_ids(*text, geteuid()) : std::vector<IdRange>{};
    }();
    for (const auto &r : subuids)
        if (l->uid >= r.first && l->uid - r.first < r.count) return std::nullopt;
    return "the socket listening on " + l->bound + ":" + std::to_string(port) +
           " belongs to another user (uid " + std::to_string(l->uid) + "), not to the pod's (uid " +
           std::to_string(me) + "): another process took the port on the node's network";
}

}  // namespace

void ProbeCheck::on_connected(int status) {
    if (status < 0) {
        finish(false, std::string("dial tcp: ") + uv_strerror(status));
        return;
    }
    if (reached_foreign()) return;
    if (owner->check_spec().action == ProbeAction::TcpSocket) {
        finish(true, "");
        return;
    }
    tcp.write(request, [this](int st) {
        if (st < 0) finish(false, std::string("write: ") + uv_strerror(st));
    });
    tcp.read_start([this](ssize_t n, const char *data) { on_http_read(n, data); });
}

// An answer from the pool: vouched for only if the listener is the job
// user's, as for the checks on the loop.
void ProbeCheck::on_curl(const CheckResult &r) {
    if (!reached_foreign()) finish(r.ok, r.output);
}

// The listener the check reached is another user's: the check fails (and
// is finished) saying so.
bool ProbeCheck::reached_foreign() {
    const ProbeSpec &spec = owner->check_spec();
    std::string host = spec.host == "localhost" ? "127.0.0.1" : spec.host;
    auto why = foreign_listener(host, static_cast<uint16_t>(spec.port));
    if (!why) return false;
    foreign = true;
    finish(false, *why);
    return true;
}

void start_check(CheckOwner *owner, std::list<std::unique_ptr<ProbeCheck>> *checks,
                 int64_t timeout_ms, bool scaled) {
    Container *container = owner->check_container();
    const Clock &clk = container->pod->env().clock;
    const ProbeSpec &spec = owner->check_spec();
    auto *c = checks->emplace_back(std::make_unique<ProbeCheck>()).get();
    c->owner = owner;
    c->generation = owner->check_generation();
    c->timeout = Timer(clk.loop);
    const uint64_t real_ms =
        scaled ? clk.real_delay(timeout_ms) : static_cast<uint64_t>(timeout_ms);
    c->timeout.start(real_ms, [c, timeout_ms] {
        if (c->pgid) kill_supervised(c->pgid);
        c->finish(false, "timeout: probe did not answer within " +
                             std::to_string((timeout_ms + 999) / 1000) + "s");
    });
    if (spec.action == ProbeAction::Exec) {
        SpawnSpec s = container_command(spec.exec, *container->plan, container->pod->env().pod_dir,
                                        container->pod->env().supervisor, container->pid);
        int rc = spawn_container(
            clk.loop, c->proc, container->pod->env().supervisor, s,
            [c](int64_t status, int sig) {
                signal_group(c->pgid, SIGKILL);
                c->pgid = 0;
                c->proc.close();
                c->finish(status == 0 && sig == 0, "exit code " + std::to_string(status));
            },
            nullptr, nullptr);
        if (rc != 0) {
            c->finish(false, std::string("exec: ") + uv_strerror(rc));
            return;
        }
        c->pgid = c->proc.pid();
        // Recorded (state.json), so that a dead shim's check is stopped too.
        if (container->pod->env().on_processes) container->pod->env().on_processes();
        return;
    }
    std::string host = spec.host == "localhost" ? "127.0.0.1" : spec.host;
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    if (uv_ip4_addr(host.c_str(), spec.port, reinterpret_cast<sockaddr_in *>(&addr)) != 0 &&
        uv_ip6_addr(host.c_str(), spec.port, reinterpret_cast<sockaddr_in6 *>(&addr)) != 0) {
        c->finish(false, "probe host '" + spec.host + "' is not an IP address");
        return;
    }
    if (spec.action == ProbeAction::Grpc || (spec.action == ProbeAction::HttpGet && spec.https)) {
        auto *w = new CurlWork;
        w->req.data = w;
        w->spec = spec;
        w->spec.host = host;
        w->timeout_ms = static_cast<int64_t>(real_ms);
        w->check = c;
        c->work = w;
        int rc = uv_queue_work(
            clk.loop, &w->req,
            [](uv_work_t *req) {
                auto *work = static_cast<CurlWork *>(req->data);
                work->result = curl_check(work->spec, work->timeout_ms);
            },
            [](uv_work_t *req, int) {
                auto *work = static_cast<CurlWork *>(req->data);
                ProbeCheck *check = work->check;
                CheckResult r = std::move(work->result);
                delete work;
                if (!check) return;
                check->work = nullptr;
                check->on_curl(r);
            });
        if (rc != 0) {
            c->work = nullptr;
            delete w;
            c->finish(false, std::string("cannot queue the check: ") + uv_strerror(rc));
        }
        return;
    }
    c->tcp = Tcp(clk.loop);
    if (spec.action == ProbeAction::HttpGet) {
        c->request = "GET " + spec.path + " HTTP/1.1\r\nHost: " + host + ":" +
                     std::to_string(spec.port) +
                     "\r\nUser-Agent: kube-probe/1.28\r\nAccept: */*\r\nConnection: close\r\n";
        for (const auto &[k, v] : spec.headers)
            c->request += k + ": " + v + "\r\n";
        c->request += "\r\n";
    }
    int rc = c->tcp.connect(reinterpret_cast<sockaddr *>(&addr),
                            [c](int status) { c->on_connected(status); });
    if (rc != 0) c->finish(false, std::string("dial tcp: ") + uv_strerror(rc));
}

ProbeRunner::ProbeRunner(Container *c, ProbeKind kind, const ProbeSpec &spec)
    : container(c), state(kind, spec), timer(c->pod->env().clock.loop) {}

ProbeRunner::~ProbeRunner() = default;

void ProbeRunner::arm(bool resumed) {
    generation++;
    in_flight = false;
    active = true;
    int64_t now = container->pod->env().clock.spec_now();
    if (resumed)
        state.resume(now);
    else
        state.arm(now);
    schedule();
}

void ProbeRunner::stop() {
    generation++;
    active = false;
    in_flight = false;
    timer.stop();
}

void ProbeRunner::schedule() {
    const Clock &clk = container->pod->env().clock;
    int64_t wait = state.due_ms() - clk.spec_now();
    timer.start(clk.real_delay(wait), [this] { run_check(); });
}

void ProbeRunner::exec_pids(std::vector<int> *out) const {
    for (const auto &c : checks)
        if (c->pgid > 0) out->push_back(c->pgid);
}

void ProbeRunner::release(ProbeCheck *c) {
    checks.remove_if([c](const std::unique_ptr<ProbeCheck> &p) { return p.get() == c; });
}

HookRunner::HookRunner(Container *c, const ProbeSpec &s, int64_t timeout,
                       std::function<void(bool, const std::string &)> cb)
    : container(c),
      spec(s),
      timeout_ms(timeout),
      done(std::move(cb)),
      sleep(c->pod->env().clock.loop) {}

HookRunner::~HookRunner() = default;

void HookRunner::start() {
    if (spec.action == ProbeAction::Sleep) {
        // The user's seconds, as the grace period: not scaled in tests.
        sleep.start(static_cast<uint64_t>(spec.sleep_s) * 1000,
                    [this] { check_done(true, "", false); });
        return;
    }
    start_check(this, &checks, timeout_ms, false);
}

void HookRunner::check_done(bool ok, const std::string &output, bool) {
    if (reported) return;
    reported = true;
    generation++;
    if (done) done(ok, output);  // may destroy this runner: nothing after it
}

void HookRunner::release(ProbeCheck *c) {
    checks.remove_if([c](const std::unique_ptr<ProbeCheck> &p) { return p.get() == c; });
}

void HookRunner::exec_pids(std::vector<int> *out) const {
    for (const auto &c : checks)
        if (c->pgid > 0) out->push_back(c->pgid);
}

void ProbeRunner::run_check() {
    if (!active || in_flight) return;
    in_flight = true;
    start_check(this, &checks, int64_t{state.spec().timeout_s} * 1000);
}

void ProbeRunner::on_result(bool ok, const std::string &output, bool foreign) {
    in_flight = false;
    if (!active) return;
    Container *c = container;
    const Clock &clk = c->pod->env().clock;
    std::string note =
        foreign ? std::string(probe_kind_name(state.kind())) + " probe: " + output : "";
    if (c->run && c->run->unready_note != note) {
        c->run->unready_note = note;
        c->pod->changed();
    }
    if (!ok) {
        LOG_VERBOSE("%s %s probe failed: %s", c->id_prefix().c_str(), probe_kind_name(state.kind()),
                    output.c_str());
        // Every failed check is an event, as the kubelet's prober records it;
        // the agent's correlator turns repeats into a count.
        c->pod->add_event("Warning", "Unhealthy",
                          std::string(probe_kind_name(state.kind())) + " probe failed: " + output,
                          c->plan->name);
    }
    bool flipped = state.record(ok, clk.spec_now());
    Outcome o = state.outcome();
    if (flipped) {
        LOG_INFO("%s %s probe is now %s", c->id_prefix().c_str(), probe_kind_name(state.kind()),
                 o == Outcome::Success ? "passing" : "failing");
    }
    if (state.kind() == ProbeKind::Startup && flipped && o == Outcome::Success) {
        active = false;  // startup probes stop after the first success
        for (auto &p : c->probes)
            if (p.get() != this) p->arm();
    } else if ((state.kind() == ProbeKind::Liveness || state.kind() == ProbeKind::Startup) &&
               o == Outcome::Failure) {
        active = false;
        std::string why =
            state.kind() == ProbeKind::Liveness ? "failed liveness probe" : "failed startup probe";
        if (c->running && !c->killing)
            c->pod->add_event("Normal", "Killing",
                              "Container " + c->plan->name + " " + why + ", will be restarted",
                              c->plan->name);
        c->kill_for_restart(why);
        return;
    } else {
        schedule();
    }
    if (flipped) {
        c->probes_changed();
        c->pod->changed();
    }
}

}  // namespace sk::shim
