// Probe checks on the loop: exec (a process in the container's environment,
// its own process group, killed at timeoutSeconds), tcpSocket (connect) and
// httpGet (HTTP/1.1 GET, 200-399 is success), all with hostNetwork semantics.
#include <arpa/inet.h>
#include <signal.h>
#include <string.h>

#include "common/log.h"
#include "k8s-shim/container.h"
#include "k8s-shim/pod_runner.h"
#include "k8s-shim/spawn.h"

namespace sk::shim {

namespace {

// One check in flight. Freed when all its handles are closed.
struct Check {
    ProbeRunner *probe;
    unsigned generation;
    uv_timer_t timeout;
    uv_process_t proc;
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    std::string request, response;
    int open_handles = 0;
    bool done = false;
    int pgid = 0;

    void finish(bool ok, const std::string &output);
    void close_all();
};

void on_check_closed(uv_handle_t *h) {
    auto *c = static_cast<Check *>(h->data);
    if (--c->open_handles > 0) return;
    c->probe->checks_alive--;
    delete c;
}

void close_handle(uv_handle_t *h) {
    if (!uv_is_closing(h)) uv_close(h, on_check_closed);
}

void Check::close_all() {
    close_handle(reinterpret_cast<uv_handle_t *>(&timeout));
    if (probe->state.spec().action != ProbeAction::Exec)
        close_handle(reinterpret_cast<uv_handle_t *>(&tcp));
}

void Check::finish(bool ok, const std::string &output) {
    if (done) return;
    done = true;
    uv_timer_stop(&timeout);
    if (probe->generation == generation) probe->on_result(ok, output);
    close_all();
}

void timeout_cb(uv_timer_t *t) noexcept {
    auto *c = static_cast<Check *>(t->data);
    if (c->pgid) signal_group(c->pgid, SIGKILL);
    c->finish(false, "timeout: probe did not answer within " +
                         std::to_string(c->probe->state.spec().timeout_s) + "s");
}

void exec_exit_cb(uv_process_t *h, int64_t status, int sig) noexcept {
    auto *c = static_cast<Check *>(h->data);
    signal_group(c->pgid, SIGKILL);
    c->pgid = 0;
    uv_close(reinterpret_cast<uv_handle_t *>(h), on_check_closed);
    c->finish(status == 0 && sig == 0, "exit code " + std::to_string(status));
}

void http_alloc(uv_handle_t *, size_t suggested, uv_buf_t *buf) {
    buf->base = new char[suggested];
    buf->len = suggested;
}

void http_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) noexcept {
    auto *c = static_cast<Check *>(s->data);
    if (n > 0) c->response.append(buf->base, static_cast<size_t>(n));
    delete[] buf->base;
    size_t eol = c->response.find("\r\n");
    if (eol == std::string::npos && n >= 0 && c->response.size() < 8192) return;
    // "HTTP/1.1 200 OK"
    int code = 0;
    if (c->response.compare(0, 5, "HTTP/") == 0) {
        size_t sp = c->response.find(' ');
        if (sp != std::string::npos)
            code = static_cast<int>(strtol(c->response.c_str() + sp + 1, nullptr, 10));
    }
    c->finish(
        code >= 200 && code < 400,
        code ? "HTTP probe failed with statuscode: " + std::to_string(code) : "no HTTP response");
}

void http_write_cb(uv_write_t *w, int status) noexcept {
    auto *c = static_cast<Check *>(w->data);
    if (status < 0) c->finish(false, std::string("write: ") + uv_strerror(status));
}

void connect_cb(uv_connect_t *req, int status) noexcept {
    auto *c = static_cast<Check *>(req->data);
    if (c->done) return;
    if (status < 0) {
        c->finish(false, std::string("dial tcp: ") + uv_strerror(status));
        return;
    }
    if (c->probe->state.spec().action == ProbeAction::TcpSocket) {
        c->finish(true, "");
        return;
    }
    uv_buf_t b = uv_buf_init(c->request.data(), static_cast<unsigned>(c->request.size()));
    c->write.data = c;
    uv_write(&c->write, reinterpret_cast<uv_stream_t *>(&c->tcp), &b, 1, http_write_cb);
    uv_read_start(reinterpret_cast<uv_stream_t *>(&c->tcp), http_alloc, http_read_cb);
}

void probe_timer_cb(uv_timer_t *t) noexcept {
    static_cast<ProbeRunner *>(t->data)->run_check();
}

}  // namespace

ProbeRunner::ProbeRunner(Container *c, ProbeKind kind, const ProbeSpec &spec)
    : container(c), state(kind, spec) {
    uv_timer_init(c->pod->env().clock.loop, &timer);
    timer.data = this;
}

void ProbeRunner::arm() {
    generation++;
    in_flight = false;
    active = true;
    state.arm(container->pod->env().clock.spec_now());
    schedule();
}

void ProbeRunner::stop() {
    generation++;
    active = false;
    in_flight = false;
    uv_timer_stop(&timer);
}

void ProbeRunner::schedule() {
    const Clock &clk = container->pod->env().clock;
    int64_t wait = state.due_ms() - clk.spec_now();
    uv_timer_start(&timer, probe_timer_cb, clk.real_delay(wait), 0);
}

void ProbeRunner::run_check() {
    if (!active || in_flight) return;
    in_flight = true;
    const Clock &clk = container->pod->env().clock;
    const ProbeSpec &spec = state.spec();
    auto *c = new Check();
    checks_alive++;
    c->probe = this;
    c->generation = generation;
    uv_timer_init(clk.loop, &c->timeout);
    c->timeout.data = c;
    c->open_handles = 1;
    uv_timer_start(&c->timeout, timeout_cb, clk.real_delay(int64_t{spec.timeout_s} * 1000), 0);
    if (spec.action == ProbeAction::Exec) {
        SpawnSpec s{spec.exec, container->plan->env,
                    container->plan->working_dir.empty() ? container->pod->env().pod_dir
                                                         : container->plan->working_dir};
        c->proc.data = c;
        int rc = spawn_process(clk.loop, &c->proc, s, exec_exit_cb, nullptr, nullptr);
        c->open_handles++;
        if (rc != 0) {
            uv_close(reinterpret_cast<uv_handle_t *>(&c->proc), on_check_closed);
            c->finish(false, std::string("exec: ") + uv_strerror(rc));
            return;
        }
        c->pgid = c->proc.pid;
        return;
    }
    uv_tcp_init(clk.loop, &c->tcp);
    c->tcp.data = c;
    c->open_handles++;
    std::string host = spec.host == "localhost" ? "127.0.0.1" : spec.host;
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    if (uv_ip4_addr(host.c_str(), spec.port, reinterpret_cast<sockaddr_in *>(&addr)) != 0 &&
        uv_ip6_addr(host.c_str(), spec.port, reinterpret_cast<sockaddr_in6 *>(&addr)) != 0) {
        c->finish(false, "probe host '" + spec.host + "' is not an IP address");
        return;
    }
    if (spec.action == ProbeAction::HttpGet) {
        c->request = "GET " + spec.path + " HTTP/1.1\r\nHost: " + host + ":" +
                     std::to_string(spec.port) +
                     "\r\nUser-Agent: kube-probe/1.28\r\nAccept: */*\r\nConnection: close\r\n";
        for (const auto &[k, v] : spec.headers)
            c->request += k + ": " + v + "\r\n";
        c->request += "\r\n";
    }
    c->connect.data = c;
    int rc = uv_tcp_connect(&c->connect, &c->tcp, reinterpret_cast<sockaddr *>(&addr), connect_cb);
    if (rc != 0) c->finish(false, std::string("dial tcp: ") + uv_strerror(rc));
}

void ProbeRunner::on_result(bool ok, const std::string &output) {
    in_flight = false;
    if (!active) return;
    Container *c = container;
    const Clock &clk = c->pod->env().clock;
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
