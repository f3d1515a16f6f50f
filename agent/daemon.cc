// slurm-k8s-agent's main(), as a library function (agent/daemon.h). Reads
// like a table of contents: configuration, credentials, host facts, HTTP,
// the agent, the loop; teardown in reverse.
#include <config.h>  // PACKAGE_VERSION (agent/agent_config.h is the agent's own)

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
#include "agent/agent_config.h"
#include "agent/api_auth.h"
#include "agent/controllers/csr_certificate.h"
#include "agent/http_client.h"
#include "agent/kube_client.h"
#include "agent/kubelet_server.h"
#include "agent/log_index.h"
#include "agent/stream_sessions.h"
#include "agent/metrics.h"
#include "agent/node_address.h"
#include "agent/node_endpoints.h"
#include "agent/uv_timer_source.h"
#include "agent/stats_provider.h"
#include "agent/tls_front.h"
#include "agent/webhook_gate.h"
#include "common/fs.h"
#include "uv/handles.h"
#include "common/log.h"
#include "common/strings.h"

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

    // 1. configuration: any error names the key and stops the start.
    auto cfg = load_agent_config(config_path, extra_runtimes);
    if (!cfg) {
        LOG_ERROR("%s", cfg.message().c_str());
        return 1;
    }
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
    // Before any thread starts: a thread inherits its creator's nice value
    // (on Linux it is each thread's own). The loop and the API client run at
    // `nice`; the kubelet endpoint's threads, which carry what its clients
    // move, at the one the agent started with (docs/architecture.md,
    // "Priorities"). Not fatal: the agent works at any priority, its pods'
    // status only waits longer behind their load.
    std::optional<int> relay_nice;
    errno = 0;
    if (int started = getpriority(PRIO_PROCESS, 0); errno == 0 && started > cfg->nice)
        relay_nice = started;
    if (setpriority(PRIO_PROCESS, 0, cfg->nice) != 0) {
        LOG_WARN("cannot set the agent's nice value to %d (nice): %s", cfg->nice, strerror(errno));
        relay_nice.reset();
    }

    // 2. the API server's address and trust; the credential is ApiAuth's
    TlsConfig tls;
    tls.ca_file = cfg->api.ca_file;
    tls.ca_data = cfg->api.ca_data;
    tls.proxy_url = cfg->api.proxy_url;
    std::string server = cfg->api.server;
    if (!cfg->api.tls_server_name.empty())
        server = with_tls_server_name(server, cfg->api.tls_server_name, &tls.connect_to);

    // 3. loop, signals, HTTP
    signal(SIGPIPE, SIG_IGN);  // a shim that went away must not kill the agent
    uv_loop_t loop;
    uv_loop_init(&loop);
    ApiAuth auth(&loop, cfg->api, cfg->api.server);
    CurlTransport http(&loop, tls);
    http.set_auth(&auth);
    // Every virtual node's requests under the agent's credential share the
    // HTTP/2 connections. A node holds one long watch, so max_jobs watches
    // and a burst's short requests fit in max_jobs / 50 + 2 connections even
    // where the server allows half of kube-apiserver's 100 streams. With node
    // identities each node's certificate needs a connection of its own, as a
    // kubelet has: no cap.
    if (cfg->node_identity == "agent")
        http.set_http2_connection_cap(static_cast<long>(cfg->max_jobs / 50 + 2));
    if (auto st = http.start(); !st) {
        LOG_ERROR("HTTP client: %s", st.message().c_str());
        return 1;
    }
    KubeClient kube(http, server, cfg->api_timeout_s * 1000);
    SystemClock clock;
    CommandJobChecker checker(&loop, cfg->job_alive_command, cfg->job_end_command);

    // 4. metrics (updated on the loop, rendered from an HTTP thread)
    AgentMetrics metrics;
    auth.set_observer({[&metrics] { metrics.api_credential_reloaded(); },
                       [&metrics](bool ok) { metrics.api_credential(ok); },
                       [&metrics](int64_t s) { metrics.api_credential_expiry(s); }});
    // The credential before the first request: an exec plugin answers on the loop.
    if (auto st = auth.start(); !st) {
        LOG_ERROR("%s", st.message().c_str());
        return 1;
    }
    while (!auth.ready() && auth.start_error().empty())
        uv_run(&loop, UV_RUN_ONCE);
    if (!auth.ready()) {
        LOG_ERROR("%s", auth.start_error().c_str());
        return 1;
    }
    AgentObserver obs = observe_into(metrics);
    kube.set_observer([&metrics](const char *verb, int code) { metrics.api_request(verb, code); });
    std::unique_ptr<MetricsEndpoint> metrics_ep;
    if (cfg->metrics_port) {
        metrics_ep = std::make_unique<MetricsEndpoint>([&metrics] { return metrics.render(); },
                                                       cfg->metrics_address,
                                                       static_cast<uint16_t>(cfg->metrics_port));
        if (auto st = metrics_ep->start(); !st) {
            LOG_ERROR("metrics endpoint on %s:%llu: %s (metrics_address, metrics_port)",
                      cfg->metrics_address.c_str(),
                      static_cast<unsigned long long>(cfg->metrics_port), st.message().c_str());
            return 1;
        }
        bool v6 = cfg->metrics_address.find(':') != std::string::npos;
        LOG_INFO("metrics on http://%s%s%s:%u/metrics", v6 ? "[" : "", cfg->metrics_address.c_str(),
                 v6 ? "]" : "", metrics_ep->port());
    }

    // 5. the kubelet endpoint (kubectl logs through the API server); its
    //    port goes into every Node's daemonEndpoints, so it starts first.
    //    Its stats come from the agent's loop (agent/stats_provider.h).
    //    With kubelet_node_ports each node gets an endpoint of its own
    //    (agent/node_endpoints.h) and the shared one serves no stats.
    //    Who may use it: a kubelet's Webhook authentication and
    //    authorization, asked of the API server on the loop
    //    (agent/webhook_gate.h); off in kubelet_insecure mode.
    std::shared_ptr<WebhookGate> gate;
    bool webhook =
        cfg->kubelet_authorization_mode == "Webhook" || cfg->kubelet_authentication_webhook;
    if (kubelet_endpoint_on(*cfg) && !cfg->kubelet_insecure && webhook) {
        WebhookGateOptions o;
        o.token_webhook = cfg->kubelet_authentication_webhook;
        o.authorize_webhook = cfg->kubelet_authorization_mode == "Webhook";
        o.timeout_ms = static_cast<int>(cfg->api_timeout_s * 1000);
        gate = std::make_shared<WebhookGate>(
            &loop,
            [&kube](const std::string &path, const Json::Value &body, WebhookGate::Done done) {
                kube.post(path, body, std::move(done));
            },
            o);
        if (auto st = gate->start(); !st) {
            LOG_ERROR("kubelet endpoint authorization: %s", st.message().c_str());
            return 1;
        }
    }
    LogIndex logs;
    StreamLimits stream_limits;
    stream_limits.max_sessions = static_cast<size_t>(cfg->kubelet_max_stream_sessions);
    stream_limits.idle_timeout_ms = cfg->kubelet_stream_idle_timeout_s * 1000;
    stream_limits.forward_any_port = cfg->kubelet_port_forward_any_port;
    stream_limits.creation_timeout_ms = cfg->kubelet_stream_creation_timeout_s * 1000;
    auto streams = std::make_shared<StreamSessions>(
        &loop, stream_limits,
        [&logs](const StreamRequest &r) { return logs.exec_check(r.ns, r.pod, r.container); },
        relay_nice);
    if (auto st = streams->start(); !st) {
        LOG_ERROR("streaming sessions: %s", st.message().c_str());
        return 1;
    }
    std::unique_ptr<Agent> agent;
    AgentStatsProvider::Nodes nodes = [&agent] {
        return agent ? agent->node_runtimes() : std::vector<NodeRuntimeRef>{};
    };
    auto stats = std::make_shared<AgentStatsProvider>(&loop, nodes);
    if (auto st = stats->start(); !st) {
        LOG_ERROR("stats: %s", st.message().c_str());
        return 1;
    }
    // kubelet_serving = csr: one certificate for every endpoint of the host,
    // obtained on the loop once the endpoints listen (they close their
    // connections until then).
    std::shared_ptr<ServingCredentials> serving;
    if (cfg->kubelet_serving == "csr") {
        serving = std::make_shared<ServingCredentials>();
        serving->set_waiting("its certificate signing request is not sent yet");
    }
    std::unique_ptr<NodeEndpoints> node_endpoints;
    std::shared_ptr<StatsProvider> shared_stats = stats;
    if (cfg->kubelet_node_port_low && kubelet_endpoint_on(*cfg)) {
        node_endpoints = std::make_unique<NodeEndpoints>(
            &loop, kubelet_config(*cfg, gate, relay_nice, serving),
            static_cast<uint16_t>(cfg->kubelet_node_port_low),
            static_cast<uint16_t>(cfg->kubelet_node_port_high), &logs, nodes);
        shared_stats = std::make_shared<RefusedStats>(
            "this port is shared by the host's virtual nodes: each serves its stats on its own "
            "port (kubelet_node_ports), the one its Node's kubeletEndpoint names");
    }
    if (node_endpoints) node_endpoints->set_streams(streams);
    auto kubelet =
        start_kubelet_endpoint(*cfg, logs, shared_stats, streams, gate, relay_nice, serving);
    if (!kubelet) {
        LOG_ERROR("%s", kubelet.message().c_str());
        return 1;
    }
    UvTimerSource serving_timers(&loop);
    AgentContext serving_ctx;
    serving_ctx.timers = &serving_timers;
    serving_ctx.kube = &kube;
    serving_ctx.cfg = &*cfg;
    serving_ctx.clock = &clock;
    std::unique_ptr<CsrCertificate> serving_cert;
    auto serving_owner = std::make_shared<int>(0);  // what guards its callbacks
    if (serving) {
        serving_cert =
            std::make_unique<CsrCertificate>(serving_ctx, serving_profile(*cfg),
                                             [serving](const std::shared_ptr<const Credential> &c) {
                                                 serving->set(c->cert_pem, c->key_pem);
                                             });
        serving_cert->bind(serving_owner);
        serving_cert->set_on_pending([serving](const std::string &csr) {
            bool renewal = serving->generation() != 0;
            LOG_WARN(
                "[kubelet endpoint] certificate signing request %s waits for an admin's approval "
                "(kubectl certificate approve %s); %s",
                csr.c_str(), csr.c_str(),
                renewal
                    ? "the current certificate serves meanwhile"
                    : "until then kubectl logs, exec and top fail on this host's virtual nodes");
            if (!renewal)
                serving->set_waiting("certificate signing request " + csr +
                                     " awaits approval: kubectl certificate approve " + csr);
        });
        serving_cert->start([](const Status &) {});
    }
    NodeSpecInput host = host_facts(*cfg);
    if (*kubelet) host.kubelet_port = (*kubelet)->port();

    // 6. the agent: state, socket, controllers
    agent = std::make_unique<Agent>(&loop, *cfg, kube, clock, checker, host);
    agent->set_observer(&obs);
    agent->set_api_status([&auth, &serving_cert, &clock] {
        Json::Value v = auth.status();
        if (serving_cert) v["kubelet_serving"] = serving_cert->describe(clock.now_s());
        return v;
    });
    agent->set_log_index(&logs);
    agent->set_stream_sessions(streams.get());
    agent->set_node_endpoints(node_endpoints.get());
    if (auto it = extra.find(cfg->runtime); it != extra.end())
        agent->set_runtime_factory(it->second);
    if (auto st = agent->start(); !st) {
        LOG_ERROR("%s", st.message().c_str());
        return 1;
    }
    LOG_INFO("listening on %s; API server %s; slurm node %s, node address %s",
             cfg->socket_path.c_str(), cfg->api.server.c_str(), cfg->slurm_node.c_str(),
             cfg->node_address.c_str());

    // 7. run until SIGTERM/SIGINT: virtual nodes stay (jobs outlive an agent restart).
    Signal sigs[2] = {Signal(&loop), Signal(&loop)};
    int signums[2] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        sigs[i].start(signums[i], [&agent, &loop](int signum) {
            LOG_INFO("signal %d: stopping (virtual nodes are kept)", signum);
            if (agent) agent->stop();
            uv_stop(&loop);
        });
    }
    uv_run(&loop, UV_RUN_DEFAULT);

    // 8. teardown in reverse
    if (serving_cert)
        serving_cert->stop();  // its timers and watch, before the client and the loop go
    serving_cert.reset();
    stats->close();           // scrapes waiting for the loop are answered: nothing holds the stops
    if (gate) gate->close();  // so are requests waiting for their review
    if (*kubelet) (*kubelet)->stop();
    streams->stop();         // no start() can come now from the shared endpoint's threads
    agent.reset();           // each node's own endpoint closes with it
    cancel_deferred(&loop);  // calls into the agent that is gone
    if (metrics_ep) metrics_ep->stop();
    http.stop();
    for (auto &s : sigs)
        s.close();
    // Close callbacks free the handles; thread-pool work (state-file fsyncs)
    // must finish before the loop closes. Bounded: a handle left active by
    // a bug must not turn SIGTERM into a hang.
    for (int i = 0; i < 200 && uv_run(&loop, UV_RUN_NOWAIT) != 0; i++)
        usleep(10 * 1000);
    // Not 0: a bug, memory and descriptors leak (make check-valgrind).
    if (uv_loop_close(&loop) != 0) log_open_handles(&loop, "teardown");
    LOG_INFO("stopped");
    return 0;
}

}  // namespace

// An exception escaping run() (std::bad_alloc, a jsoncpp LogicError) would
// abort with no word on stderr: name it and exit 1 instead.
int agent_daemon_main(int argc, char **argv, const RuntimeFactories &extra_runtimes) {
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
