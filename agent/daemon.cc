// slurm-k8s-agent's main(), as a library function (agent/daemon.h). Reads
// like a table of contents: configuration, credentials, host facts, HTTP,
// the agent, the loop; teardown in reverse.
#include <config.h>  // PACKAGE_VERSION (agent/core/agent_config.h is the agent's own)

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <sstream>
#include <string>

#include "agent/daemon.h"

#include "agent/agent.h"
#include "agent/controllers/csr_certificate.h"
#include "agent/core/agent_config.h"
#include "agent/core/node_address.h"
#include "agent/images/store_publish.h"
#include "agent/kube/api_auth.h"
#include "agent/kube/http_client.h"
#include "agent/kube/kube_client.h"
#include "agent/kubelet/kubelet_server.h"
#include "agent/kubelet/log_index.h"
#include "agent/kubelet/metrics.h"
#include "agent/kubelet/tls_front.h"
#include "agent/kubelet/webhook_gate.h"
#include "agent/node_endpoints.h"
#include "agent/stats_provider.h"
#include "agent/stream_sessions.h"
#include "agent/uv_timer_source.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/strings.h"
#include "uv/handles.h"

namespace sk::agent {
namespace {

std::string read_first_line(const std::string &path) {
    auto text = read_file(path, 4096);
    if (!text) return "";
    return std::string(trim(text->substr(0, text->find('\n'))));
}

std::string os_image() {
    // A symlink into /usr/lib on most distributions.
    auto text = read_file("/etc/os-release", size_t{64} << 10, Links::Follow);
    std::istringstream f(text ? *text : std::string());
    std::string line;
    while (std::getline(f, line))
        if (starts_with(line, "PRETTY_NAME=")) {
            std::string v = line.substr(12);
            if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
            return v;
        }
    return "linux";
}

// kubeconfig tls-server-name: the URL names the certificate's name (what
// libcurl checks) and CURLOPT_CONNECT_TO dials the server's real host.
std::string with_tls_server_name(const std::string &server, const std::string &name,
                                 std::string *connect_to) {
    size_t scheme = server.find("://");
    size_t start = scheme == std::string::npos ? 0 : scheme + 3;
    size_t end = server.find('/', start);
    std::string hostport = server.substr(start, end == std::string::npos ? end : end - start);
    std::string host = hostport, port = starts_with(server, "http://") ? "80" : "443";
    size_t colon = hostport.rfind(':');
    if (colon != std::string::npos && hostport.find(']', colon) == std::string::npos) {
        host = hostport.substr(0, colon);
        port = hostport.substr(colon + 1);
    }
    *connect_to = name + ":" + port + ":" + host + ":" + port;
    return server.substr(0, start) + name + ":" + port +
           (end == std::string::npos ? "" : server.substr(end));
}

// The Hostname address only where the API server can use it (agent/
// node_address.h): a configured name that cannot is a warning, this host's
// own name that cannot is left out quietly (the InternalIP serves).
void settle_node_hostname(AgentConfig &cfg) {
    if (cfg.node_hostname == "-") {
        cfg.node_hostname.clear();
        return;
    }
    bool configured = !cfg.node_hostname.empty();
    std::string name = configured ? cfg.node_hostname : host_name();
    // With kubelet_serving = csr the name goes into the CSRs' names.
    auto st = hostname_usable(
        name, cfg.node_address,
        cfg.kubelet_insecure || cfg.kubelet_serving == "csr" ? "" : cfg.kubelet_cert);
    if (st) {
        cfg.node_hostname = name;
        return;
    }
    cfg.node_hostname.clear();
    if (configured)
        LOG_WARN("node_hostname: not advertised: %s (the API server would dial it first)",
                 st.message().c_str());
    else
        LOG_INFO("no Hostname address on the virtual nodes: %s; the API server dials node_address",
                 st.message().c_str());
}

NodeSpecInput host_facts(const AgentConfig &cfg) {
    NodeSpecInput h;
    struct utsname u;
    uname(&u);
    h.kernel_version = u.release;
    h.architecture = strcmp(u.machine, "aarch64") == 0 ? "arm64" : "amd64";
    h.os_image = os_image();
    h.machine_id = read_first_line("/etc/machine-id");
    h.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    h.host_cpus = cpus > 0 ? static_cast<uint32_t>(cpus) : 1;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    h.host_memory_mib = pages > 0 ? static_cast<uint64_t>(pages) * psize / (1 << 20) : 1024;
    // The pods' directories and logs live under shim_state_dir (made here if
    // it is not yet: the agent makes it at the first job anyway).
    mkdir(cfg.shim_state_dir.c_str(), 0755);
    if (auto fs = measure_fs(cfg.shim_state_dir))
        h.ephemeral_storage_bytes = fs->capacity_bytes;
    else
        LOG_WARN("no ephemeral-storage on the virtual nodes: %s", fs.message().c_str());
    h.cluster = cfg.cluster_name;
    h.node_address = cfg.node_address;
    h.node_hostname = cfg.node_hostname;
    if (cfg.pod_network == "cni") h.pod_cidr = cfg.pod_cidr;
    h.kubelet_port = static_cast<uint32_t>(cfg.kubelet_port);
    h.site_labels = cfg.labels;
    h.site_taints = cfg.taints;
    h.site_namespaces = cfg.allowed_namespaces;
    h.max_pods = static_cast<uint32_t>(cfg.max_pods);
    h.agent_version = PACKAGE_VERSION;
    h.job.slurm_node = cfg.slurm_node;
    return h;
}

AgentObserver observe_into(AgentMetrics &m) {
    AgentObserver o;
    o.watch_restart = [&m](const std::string &res) { m.watch_restart(res); };
    o.node_registered = [&m](double s) { m.node_registered(s); };
    o.pod_started = [&m](double s) { m.pod_started(s); };
    o.pod_running = [&m](double s) { m.pod_running(s); };
    o.pods = [&m](const std::map<std::string, int64_t> &by_phase) { m.set_pods(by_phase); };
    return o;
}

// TLS with client-certificate auth (the API server's kubelet-client cert),
// or plain HTTP when the admin said kubelet_insecure; nothing (null) when
// neither is configured: `kubectl logs` then cannot reach this node.
bool kubelet_endpoint_on(const AgentConfig &cfg) {
    return !cfg.kubelet_cert.empty() || cfg.kubelet_insecure || cfg.kubelet_serving == "csr";
}

// kubelet_serving = csr: the endpoint's certificate from kubernetes.io/
// kubelet-serving CSRs sent under the agent's own identity, for
// system:node:<slurm_node> and the names the API server dials (the Nodes'
// InternalIP and Hostname addresses). Nobody approves those automatically
// (kube-controller-manager only signs them): until an admin did, the
// endpoint closes its connections and says which CSR waits
// (docs/admin-guide.md, "The kubelet endpoint's certificate").
CsrProfile serving_profile(const AgentConfig &cfg) {
    CsrProfile p;
    p.prefix = "[kubelet endpoint]";
    p.node = cfg.slurm_node;
    p.sans.ips.push_back(cfg.node_address);
    if (!cfg.node_hostname.empty()) p.sans.dns.push_back(cfg.node_hostname);
    p.what = "serving certificate for " + cfg.node_address +
             (cfg.node_hostname.empty() ? "" : " and " + cfg.node_hostname);
    p.who = p.what;
    p.generate_name = "slurm-k8s-serving-" + cfg.slurm_node + "-";
    p.file = cfg.state_dir + "/pki/kubelet-serving.pem";
    p.signer = kKubeletServingSigner;
    p.usages = {"digital signature", "server auth"};  // an ECDSA key's, as the kubelet's
    p.refused_hint =
        "(the agent's identity needs the ClusterRole system:node-bootstrapper: etc/rbac.yaml "
        "and etc/rbac-node-identity.yaml bind it)";
    p.retry_max_ms =
        uint64_t{5} * 60 * 1000;  // a denial is an admin's answer: not asked again at once
    return p;
}

// relay_nice: the nice value of the endpoint's threads (HttpServerConfig::
// thread_nice): the one the agent started with, below its loop's.
KubeletServerConfig kubelet_config(const AgentConfig &cfg, std::shared_ptr<RequestGate> gate,
                                   std::optional<int> relay_nice,
                                   std::shared_ptr<ServingCredentials> serving) {
    KubeletServerConfig c;
    c.gate = std::move(gate);
    c.http.thread_nice = relay_nice;
    c.http.port = static_cast<uint16_t>(cfg.kubelet_port);
    c.http.bind_address = cfg.kubelet_address == "*"    ? ""
                          : cfg.kubelet_address.empty() ? cfg.node_address
                                                        : cfg.kubelet_address;
    c.http.max_connections = static_cast<unsigned>(cfg.kubelet_max_connections);
    c.http.max_connections_per_address =
        static_cast<unsigned>(cfg.kubelet_max_connections_per_address);
    c.http.handshake_timeout_s = static_cast<unsigned>(cfg.kubelet_handshake_timeout_s);
    if (!cfg.kubelet_insecure) {
        c.http.tls = true;
        c.http.cert_file = cfg.kubelet_cert;
        c.http.key_file = cfg.kubelet_key;
        c.http.serving = std::move(serving);
        c.http.client_ca_file = cfg.kubelet_client_ca;
    }
    return c;
}

Result<std::unique_ptr<KubeletServer>> start_kubelet_endpoint(
    const AgentConfig &cfg, LogIndex &logs, std::shared_ptr<StatsProvider> stats,
    std::shared_ptr<StreamSessions> streams, std::shared_ptr<RequestGate> gate,
    std::optional<int> relay_nice, std::shared_ptr<ServingCredentials> serving) {
    if (!kubelet_endpoint_on(cfg)) {
        LOG_WARN(
            "kubelet endpoint off (set kubelet_cert, kubelet_key and kubelet_client_ca): "
            "kubectl logs will not work on the virtual nodes");
        return std::unique_ptr<KubeletServer>();
    }
    if (cfg.kubelet_insecure)
        LOG_WARN(
            "kubelet_insecure = true: the kubelet endpoint serves container logs over plain "
            "HTTP to anyone who can reach port %llu (tests only)",
            static_cast<unsigned long long>(cfg.kubelet_port));
    KubeletServerConfig c = kubelet_config(cfg, std::move(gate), relay_nice, std::move(serving));
    auto srv = std::make_unique<KubeletServer>(
        c, [&logs](const ContainerLogRef &ref) { return logs.resolve(ref); }, std::move(streams));
    srv->set_stats_provider(std::move(stats));
    if (auto st = srv->start(); !st)
        return fail(st.error(), "kubelet endpoint on port " + std::to_string(cfg.kubelet_port) +
                                    ": " + st.message() +
                                    " (kubelet_port, kubelet_cert, kubelet_key, kubelet_serving)");
    LOG_INFO("kubelet endpoint on %s://%s:%u", cfg.kubelet_insecure ? "http" : "https",
             c.http.bind_address.empty() ? "*" : c.http.bind_address.c_str(), srv->port());
    return Result<std::unique_ptr<KubeletServer>>(std::move(srv));
}

void usage(const std::vector<std::string> &extra_runtimes) {
    fprintf(stderr,
            "usage: slurm-k8s-agent [--config FILE] [--log-level LEVEL] [--help]\n"
            "  default config: /etc/slurm-k8s/agent.conf\n\nconfiguration keys:\n%s",
            describe_agent_config(extra_runtimes).c_str());
}

// The daemon's parts, members in the order they start: the destructors stop
// them in reverse, and stop() first ends what other threads or the loop still
// hold in that order too (docs/architecture.md, "The agent").
class Daemon {
  public:
    Daemon(AgentConfig &cfg, const RuntimeFactories &extra, std::optional<int> relay_nice)
        : cfg_(cfg), extra_(extra), relay_nice_(relay_nice) {
        uv_loop_init(&loop_);
    }
    Daemon(const Daemon &) = delete;
    Daemon &operator=(const Daemon &) = delete;

    Status start_api();
    Status start_metrics();
    Status start_endpoints();
    void start_serving_certificate();
    Status start_agent();
    void run_until_signal();
    void stop();

  private:
    AgentConfig &cfg_;
    const RuntimeFactories &extra_;
    std::optional<int> relay_nice_;
    uv_loop_t loop_;
    // the API
    std::unique_ptr<ApiAuth> auth_;
    std::unique_ptr<CurlTransport> http_;
    std::unique_ptr<KubeClient> kube_;
    SystemClock clock_;
    std::unique_ptr<CommandSlurmJobs> slurm_;
    // metrics (updated on the loop, rendered from an HTTP thread)
    AgentMetrics metrics_;
    AgentObserver obs_;
    std::unique_ptr<MetricsEndpoint> metrics_ep_;
    // the kubelet endpoint
    std::shared_ptr<WebhookGate> gate_;
    LogIndex logs_;
    std::shared_ptr<StreamSessions> streams_;
    std::unique_ptr<Agent> agent_;  // here: the stats' node list asks it
    std::shared_ptr<AgentStatsProvider> stats_;
    std::shared_ptr<ServingCredentials> serving_;
    std::unique_ptr<NodeEndpoints> node_endpoints_;
    std::unique_ptr<KubeletServer> kubelet_;  // null: the endpoint is off
    std::unique_ptr<UvTimerSource> serving_timers_;
    AgentContext serving_ctx_;
    std::unique_ptr<CsrCertificate> serving_cert_;
    std::shared_ptr<int> serving_owner_ = std::make_shared<int>(0);  // guards its callbacks
    Signal sigs_[2];
};

// The API server's address and trust (the credential is ApiAuth's), the
// loop's HTTP client, and the credential before the first request (an exec
// plugin answers on the loop).
Status Daemon::start_api() {
    TlsConfig tls;
    tls.ca_file = cfg_.api.ca_file;
    tls.ca_data = cfg_.api.ca_data;
    tls.proxy_url = cfg_.api.proxy_url;
    std::string server = cfg_.api.server;
    if (!cfg_.api.tls_server_name.empty())
        server = with_tls_server_name(server, cfg_.api.tls_server_name, &tls.connect_to);
    signal(SIGPIPE, SIG_IGN);  // a shim that went away must not kill the agent
    auth_ = std::make_unique<ApiAuth>(&loop_, cfg_.api, cfg_.api.server);
    http_ = std::make_unique<CurlTransport>(&loop_, tls);
    http_->set_auth(auth_.get());
    // Every virtual node's requests under the agent's credential share the
    // HTTP/2 connections. A node holds one long watch, so max_jobs watches
    // and a burst's short requests fit in max_jobs / 50 + 2 connections even
    // where the server allows half of kube-apiserver's 100 streams. With node
    // identities each node's certificate needs a connection of its own, as a
    // kubelet has: no cap. Impersonated node identities share the agent's.
    if (cfg_.node_identity != "bootstrap")
        http_->set_http2_connection_cap(static_cast<long>(cfg_.max_jobs / 50 + 2));
    if (auto st = http_->start(); !st) return fail(st.error(), "HTTP client: " + st.message());
    kube_ = std::make_unique<KubeClient>(*http_, server, cfg_.api_timeout_s * 1000);
    slurm_ =
        std::make_unique<CommandSlurmJobs>(&loop_, cfg_.job_alive_command, cfg_.job_end_command);
    auth_->set_observer({[this] { metrics_.api_credential_reloaded(); },
                         [this](bool ok) { metrics_.api_credential(ok); },
                         [this](int64_t s) { metrics_.api_credential_expiry(s); }});
    if (auto st = auth_->start(); !st) return st;
    while (!auth_->ready() && auth_->start_error().empty())
        uv_run(&loop_, UV_RUN_ONCE);
    if (!auth_->ready()) return fail(Error::Unavailable, auth_->start_error());
    return {};
}

Status Daemon::start_metrics() {
    obs_ = observe_into(metrics_);
    kube_->set_observer([this](const char *verb, int code) { metrics_.api_request(verb, code); });
    if (!cfg_.metrics_port) return {};
    metrics_ep_ = std::make_unique<MetricsEndpoint>([this] { return metrics_.render(); },
                                                    cfg_.metrics_address,
                                                    static_cast<uint16_t>(cfg_.metrics_port));
    if (auto st = metrics_ep_->start(); !st)
        return fail(st.error(), "metrics endpoint on " + cfg_.metrics_address + ":" +
                                    std::to_string(cfg_.metrics_port) + ": " + st.message() +
                                    " (metrics_address, metrics_port)");
    bool v6 = cfg_.metrics_address.find(':') != std::string::npos;
    LOG_INFO("metrics on http://%s%s%s:%u/metrics", v6 ? "[" : "", cfg_.metrics_address.c_str(),
             v6 ? "]" : "", metrics_ep_->port());
    return {};
}

// The kubelet endpoint (kubectl logs through the API server); its port goes
// into every Node's daemonEndpoints, so it starts before the agent. Its stats
// come from the agent's loop (agent/stats_provider.h). With kubelet_node_ports
// each node gets an endpoint of its own (agent/node_endpoints.h) and the
// shared one serves no stats. Who may use it: a kubelet's Webhook
// authentication and authorization, asked of the API server on the loop
// (agent/kubelet/webhook_gate.h); off in kubelet_insecure mode.
Status Daemon::start_endpoints() {
    bool webhook =
        cfg_.kubelet_authorization_mode == "Webhook" || cfg_.kubelet_authentication_webhook;
    if (kubelet_endpoint_on(cfg_) && !cfg_.kubelet_insecure && webhook) {
        WebhookGateOptions o;
        o.token_webhook = cfg_.kubelet_authentication_webhook;
        o.authorize_webhook = cfg_.kubelet_authorization_mode == "Webhook";
        o.timeout_ms = static_cast<int>(cfg_.api_timeout_s * 1000);
        gate_ = std::make_shared<WebhookGate>(
            &loop_,
            [this](const std::string &path, const Json::Value &body, WebhookGate::Done done) {
                kube_->post(path, body, std::move(done));
            },
            o);
        if (auto st = gate_->start(); !st)
            return fail(st.error(), "kubelet endpoint authorization: " + st.message());
    }
    StreamLimits stream_limits;
    stream_limits.max_sessions = static_cast<size_t>(cfg_.kubelet_max_stream_sessions);
    stream_limits.idle_timeout_ms = cfg_.kubelet_stream_idle_timeout_s * 1000;
    stream_limits.forward_any_port = cfg_.kubelet_port_forward_any_port;
    stream_limits.creation_timeout_ms = cfg_.kubelet_stream_creation_timeout_s * 1000;
    streams_ = std::make_shared<StreamSessions>(
        &loop_, stream_limits,
        [this](const StreamRequest &r) { return logs_.exec_check(r.ns, r.pod, r.container); },
        relay_nice_);
    if (auto st = streams_->start(); !st)
        return fail(st.error(), "streaming sessions: " + st.message());
    AgentStatsProvider::Nodes nodes = [this] {
        return agent_ ? agent_->node_runtimes() : std::vector<NodeRuntimeRef>{};
    };
    stats_ = std::make_shared<AgentStatsProvider>(&loop_, nodes);
    if (auto st = stats_->start(); !st) return fail(st.error(), "stats: " + st.message());
    // kubelet_serving = csr: one certificate for every endpoint of the host,
    // obtained on the loop once the endpoints listen (they close their
    // connections until then).
    if (cfg_.kubelet_serving == "csr") {
        serving_ = std::make_shared<ServingCredentials>();
        serving_->set_waiting("its certificate signing request is not sent yet");
    }
    std::shared_ptr<StatsProvider> shared_stats = stats_;
    if (cfg_.kubelet_node_port_low && kubelet_endpoint_on(cfg_)) {
        node_endpoints_ = std::make_unique<NodeEndpoints>(
            &loop_, kubelet_config(cfg_, gate_, relay_nice_, serving_),
            static_cast<uint16_t>(cfg_.kubelet_node_port_low),
            static_cast<uint16_t>(cfg_.kubelet_node_port_high), &logs_, nodes);
        shared_stats = std::make_shared<RefusedStats>(
            "this port is shared by the host's virtual nodes: each serves its stats on its own "
            "port (kubelet_node_ports), the one its Node's kubeletEndpoint names");
        node_endpoints_->set_streams(streams_);
    }
    auto kubelet =
        start_kubelet_endpoint(cfg_, logs_, shared_stats, streams_, gate_, relay_nice_, serving_);
    if (!kubelet) return kubelet.failure();
    kubelet_ = std::move(*kubelet);
    return {};
}

// kubelet_serving = csr: the endpoint's certificate, asked for on the loop.
void Daemon::start_serving_certificate() {
    serving_timers_ = std::make_unique<UvTimerSource>(&loop_);
    serving_ctx_.timers = serving_timers_.get();
    serving_ctx_.kube = kube_.get();
    serving_ctx_.cfg = &cfg_;
    serving_ctx_.clock = &clock_;
    if (!serving_) return;
    auto serving = serving_;
    serving_cert_ = std::make_unique<CsrCertificate>(
        serving_ctx_, serving_profile(cfg_), [serving](const std::shared_ptr<const Credential> &c) {
            serving->set(c->cert_pem, c->key_pem);
        });
    serving_cert_->bind(serving_owner_);
    serving_cert_->set_on_pending([serving](const std::string &csr) {
        bool renewal = serving->generation() != 0;
        LOG_WARN(
            "[kubelet endpoint] certificate signing request %s waits for an admin's approval "
            "(kubectl certificate approve %s); %s",
            csr.c_str(), csr.c_str(),
            renewal ? "the current certificate serves meanwhile"
                    : "until then kubectl logs, exec and top fail on this host's virtual nodes");
        if (!renewal)
            serving->set_waiting("certificate signing request " + csr +
                                 " awaits approval: kubectl certificate approve " + csr);
    });
    serving_cert_->start([](const Status &) {});
}

// The agent: its state, its sockets, the controllers of the jobs it keeps.
Status Daemon::start_agent() {
    NodeSpecInput host = host_facts(cfg_);
    if (kubelet_) host.kubelet_port = kubelet_->port();
    agent_ = std::make_unique<Agent>(&loop_, cfg_, *kube_, clock_, *slurm_, host);
    agent_->set_observer(&obs_);
    agent_->set_api_status([this] {
        Json::Value v = auth_->status();
        if (serving_cert_) v["kubelet_serving"] = serving_cert_->describe(clock_.now_s());
        return v;
    });
    agent_->set_log_index(&logs_);
    agent_->set_stream_sessions(streams_.get());
    agent_->set_node_endpoints(node_endpoints_.get());
    if (auto it = extra_.find(cfg_.runtime); it != extra_.end())
        agent_->set_runtime_factory(it->second);
    if (auto st = agent_->start(); !st) return st;
    LOG_INFO("listening on %s; API server %s; slurm node %s, node address %s",
             cfg_.socket_path.c_str(), cfg_.api.server.c_str(), cfg_.slurm_node.c_str(),
             cfg_.node_address.c_str());
    return {};
}

// Until SIGTERM/SIGINT: virtual nodes stay (jobs outlive an agent restart).
void Daemon::run_until_signal() {
    int signums[2] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        sigs_[i] = Signal(&loop_);
        sigs_[i].start(signums[i], [this](int signum) {
            LOG_INFO("signal %d: stopping (virtual nodes are kept)", signum);
            if (agent_) agent_->stop();
            uv_stop(&loop_);
        });
    }
    uv_run(&loop_, UV_RUN_DEFAULT);
}

// Teardown in reverse; what other threads wait on is answered first.
void Daemon::stop() {
    if (serving_cert_)
        serving_cert_->stop();  // its timers and watch, before the client and the loop go
    serving_cert_.reset();
    stats_->close();  // scrapes waiting for the loop are answered: nothing holds the stops
    if (gate_) gate_->close();  // so are requests waiting for their review
    if (kubelet_) kubelet_->stop();
    streams_->stop();         // no start() can come now from the shared endpoint's threads
    agent_.reset();           // each node's own endpoint closes with it
    cancel_deferred(&loop_);  // calls into the agent that is gone
    if (metrics_ep_) metrics_ep_->stop();
    http_->stop();
    for (auto &s : sigs_)
        s.close();
    // Close callbacks free the handles; thread-pool work (state-file fsyncs)
    // must finish before the loop closes. Bounded: a handle left active by
    // a bug must not turn SIGTERM into a hang.
    for (int i = 0; i < 200 && uv_run(&loop_, UV_RUN_NOWAIT) != 0; i++)
        usleep(10 * 1000);
    // Not 0: a bug, memory and descriptors leak (make check-valgrind).
    if (uv_loop_close(&loop_) != 0) log_open_handles(&loop_, "teardown");
    LOG_INFO("stopped");
}

// The configuration: any error names the key and stops the start. Fills in
// what the host says (its name, its address) where the file says nothing.
Result<AgentConfig> configure(const std::string &config_path, const std::string &level_override,
                              const std::vector<std::string> &extra_runtimes) {
    auto cfg = load_agent_config(config_path, extra_runtimes);
    if (!cfg) return cfg;
    log::Level lvl;
    if (log::level_from_string(level_override.empty() ? cfg->log_level : level_override, &lvl))
        log::set_level(lvl);
    LOG_INFO("slurm-k8s-agent %s starting (config %s, runtime %s)", PACKAGE_VERSION,
             config_path.c_str(), cfg->runtime.c_str());
    if (cfg->slurm_node.empty()) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        cfg->slurm_node = std::string(host).substr(0, std::string(host).find('.'));
    }
    if (cfg->node_address.empty()) cfg->node_address = primary_ipv4();
    settle_node_hostname(*cfg);
    return cfg;
}

// Before any thread starts: a thread inherits its creator's nice value (on
// Linux it is each thread's own). The loop and the API client run at `nice`;
// the kubelet endpoint's threads, which carry what its clients move, at the
// one the agent started with, returned here (docs/architecture.md,
// "Priorities"). Not fatal: the agent works at any priority, its pods'
// status only waits longer behind their load.
std::optional<int> lower_priority(int nice) {
    std::optional<int> relay_nice;
    errno = 0;
    if (int started = getpriority(PRIO_PROCESS, 0); errno == 0 && started > nice)
        relay_nice = started;
    if (setpriority(PRIO_PROCESS, 0, nice) != 0) {
        LOG_WARN("cannot set the agent's nice value to %d (nice): %s", nice, strerror(errno));
        relay_nice.reset();
    }
    return relay_nice;
}

int run(int argc, char **argv, const RuntimeFactories &extra) {
    std::vector<std::string> extra_runtimes;
    for (const auto &[name, factory] : extra)
        extra_runtimes.push_back(name);
    log::set_component("slurm-k8s-agent");
    std::string config_path = "/etc/slurm-k8s/agent.conf", level_override;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if ((a == "--config" || a == "-c") && i + 1 < argc)
            config_path = argv[++i];
        else if (a == "--log-level" && i + 1 < argc)
            level_override = argv[++i];
        else if (a == "--help" || a == "-h")
            return usage(extra_runtimes), 0;
        else if (a == "--version")
            return printf("slurm-k8s-agent %s\n", PACKAGE_VERSION), 0;
        else
            return usage(extra_runtimes), 2;
    }
    auto cfg = configure(config_path, level_override, extra_runtimes);
    if (!cfg) {
        LOG_ERROR("%s", cfg.message().c_str());
        return 1;
    }
    Daemon d(*cfg, extra, lower_priority(cfg->nice));
    for (auto step : {&Daemon::start_api, &Daemon::start_metrics, &Daemon::start_endpoints})
        if (auto st = (d.*step)(); !st) {
            LOG_ERROR("%s", st.message().c_str());
            return 1;
        }
    d.start_serving_certificate();
    if (auto st = d.start_agent(); !st) {
        LOG_ERROR("%s", st.message().c_str());
        return 1;
    }
    d.run_until_signal();
    d.stop();
    return 0;
}

}  // namespace

// An exception escaping run() (std::bad_alloc, a jsoncpp LogicError) would
// abort with no word on stderr: name it and exit 1 instead.
int agent_daemon_main(int argc, char **argv, const RuntimeFactories &extra_runtimes) {
    // The image store's own user publishes its view (agent/images/store_publish.h).
    if (argc >= 2 && strcmp(argv[1], kImageStorePublish) == 0)
        return image_store_publish_main(argc, argv);
    try {
        return run(argc, argv, extra_runtimes);
    } catch (const std::exception &e) {
        fprintf(stderr, "slurm-k8s-agent: fatal: %s\n", e.what());
    } catch (...) {
        fprintf(stderr, "slurm-k8s-agent: fatal: unknown exception\n");
    }
    return 1;
}

}  // namespace sk::agent
