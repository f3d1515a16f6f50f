#include "agent/core/agent_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "agent/kube/kubeconfig.h"
#include "common/agent_call.h"
#include "common/config.h"
#include "common/fs.h"
#include "common/k8s_names.h"
#include "common/strings.h"

namespace sk::agent {
namespace {

// Files the admin names: a symlink is followed; 4 MiB at most.
Result<std::string> read_text(const std::string &path, const char *what) {
    auto text = read_file(path, size_t{4} << 20, Links::Follow);
    if (!text)
        return fail(text.error(),
                    std::string("cannot read ") + what + " " + path + ": " + text.message());
    return text;
}

// Keys of the API server and the agent's credential.
void add_api_keys(ConfigSchema &s, AgentConfig &c) {
    s.add_string("api_server", &c.api.server, "API server URL, https://HOST:PORT");
    s.add_path("api_ca_file", &c.api.ca_file, "CA bundle (PEM) for the API server certificate");
    s.add_path("api_token_file", &c.api.token_file, "file holding a bearer token");
    s.add_path("api_client_cert", &c.api.client_cert, "client certificate (PEM)");
    s.add_path("api_client_key", &c.api.client_key, "client key (PEM)");
    s.add_path("kubeconfig", &c.kubeconfig,
               "kubeconfig instead of api_* (its current-context, or kubeconfig_context)");
    s.add_string("kubeconfig_context", &c.kubeconfig_context,
                 "the kubeconfig's context to use (default: its current-context)");
    s.add_seconds("api_timeout", &c.api_timeout_s, 1, 300, "timeout of one API request");
}

// Keys of which node this is and how the API server reaches it.
void add_node_keys(ConfigSchema &s, AgentConfig &c) {
    s.add_string("cluster_name", &c.cluster_name, "Slurm cluster name (label slurm-k8s/cluster)");
    s.add_string("slurm_node", &c.slurm_node, "this node's Slurm name (default: short hostname)");
    s.add_string("node_name_template", &c.node_name_template,
                 "virtual node name: {node} and one of {job} (a name per job) or {slot} (names "
                 "and node identities reused by later jobs) are replaced");
    s.add_string("node_address", &c.node_address,
                 "InternalIP of the virtual nodes, the address the API server dials "
                 "(default: the source address of the default route)");
    s.add_string("node_hostname", &c.node_hostname,
                 "Hostname address of the virtual nodes, advertised only when it resolves to "
                 "node_address and kubelet_cert is valid for it (default: this host's name; "
                 "'-' = none)");
}

// Keys of the kubelet endpoint (logs, exec, port-forward, stats).
void add_kubelet_keys(ConfigSchema &s, AgentConfig &c) {
    s.add_string("kubelet_address", &c.kubelet_address,
                 "address the kubelet endpoint listens on (default: node_address; '*' = all)");
    s.add_uint("kubelet_port", &c.kubelet_port, 0, 65535,
               "kubelet endpoint port (0 = any free port; the Node carries the real one)");
    s.add_path("kubelet_cert", &c.kubelet_cert, "kubelet endpoint serving certificate (PEM)");
    s.add_path("kubelet_key", &c.kubelet_key, "kubelet endpoint private key (PEM)");
    s.add_enum("kubelet_serving", &c.kubelet_serving, {"files", "csr"},
               "where the kubelet endpoint's serving certificate comes from: kubelet_cert and "
               "kubelet_key, or kubernetes.io/kubelet-serving CSRs the agent sends and renews "
               "(approved by an admin; no CA key on the node)");
    s.add_path("kubelet_client_ca", &c.kubelet_client_ca,
               "CA that signs the API server's kubelet-client certificate (PEM)");
    s.add_bool("kubelet_insecure", &c.kubelet_insecure,
               "serve the kubelet endpoint over plain HTTP without client auth (tests only)");
    s.add_uint("kubelet_max_connections", &c.kubelet_max_connections, 4, 100000,
               "kubelet endpoint connections at most, all addresses together");
    s.add_uint("kubelet_max_connections_per_address", &c.kubelet_max_connections_per_address, 1,
               100000,
               "kubelet endpoint connections at most from one client address (the API server "
               "holds one per open kubectl logs)");
    s.add_seconds("kubelet_handshake_timeout", &c.kubelet_handshake_timeout_s, 1, 300,
                  "kubelet endpoint: inactivity a new connection may spend before its first "
                  "request (TLS handshake included)");
    s.add_uint("kubelet_max_stream_sessions", &c.kubelet_max_stream_sessions, 1, 4096,
               "kubectl exec sessions open at once on this node (more are answered 429; "
               "each also holds one of kubelet_max_connections)");
    s.add_seconds("kubelet_stream_idle_timeout", &c.kubelet_stream_idle_timeout_s, 1, 86400,
                  "kubectl exec: a session with no byte either way for this long is closed (the "
                  "kubelet's streamingConnectionIdleTimeout)");
    s.add_seconds("kubelet_stream_creation_timeout", &c.kubelet_stream_creation_timeout_s, 1, 300,
                  "kubectl exec over SPDY: a client that has not opened every stream it asked "
                  "for within this long is disconnected (the kubelet's 30 s)");
    s.add_enum("kubelet_authorization_mode", &c.kubelet_authorization_mode,
               {"Webhook", "AlwaysAllow"},
               "who may use the kubelet endpoint: Webhook asks the API server for each client "
               "and request (SubjectAccessReview on nodes/proxy, nodes/stats, nodes/metrics, "
               "nodes/log: a kubelet's --authorization-mode=Webhook; the agent's identity needs "
               "create on subjectaccessreviews), AlwaysAllow admits any client certificate of "
               "kubelet_client_ca");
    s.add_bool("kubelet_authentication_webhook", &c.kubelet_authentication_webhook,
               "a request with a bearer token instead of a client certificate is admitted when "
               "the API server's TokenReview names its user (a kubelet's "
               "--authentication-token-webhook; needs create on tokenreviews)");
    s.add_bool("kubelet_port_forward_any_port", &c.kubelet_port_forward_any_port,
               "kubectl port-forward also to ports a pod does not declare as containerPort "
               "(always only to a socket of the job's user; pods share the host's network)");
    s.add("kubelet_node_ports",
          "LOW-HIGH: a kubelet endpoint per virtual node on a free port of the range (what "
          "kubectl top needs with several jobs on a host)",
          [&c](const std::string &v, const std::string &k) -> Status {
              auto dash = v.find('-');
              auto lo = parse_uint(trim(std::string_view(v).substr(0, dash)), k, 65535);
              auto hi = dash == std::string::npos
                            ? lo
                            : parse_uint(trim(std::string_view(v).substr(dash + 1)), k, 65535);
              if (dash == std::string::npos || !lo || !hi || *lo == 0 || *hi < *lo)
                  return fail(Error::InvalidArgument,
                              k + "='" + v + "' is not a port range LOW-HIGH (1..65535)");
              c.kubelet_node_port_low = *lo;
              c.kubelet_node_port_high = *hi;
              return {};
          });
}

// Keys of the agent's metrics and priority.
void add_process_keys(ConfigSchema &s, AgentConfig &c) {
    s.add_uint("metrics_port", &c.metrics_port, 0, 65535,
               "Prometheus /metrics on metrics_address:PORT; 0 = off");
    s.add(
        "metrics_address", "the address /metrics listens on (an IP literal; default 127.0.0.1)",
        [&c](const std::string &v, const std::string &k) -> Status {
            unsigned char buf[sizeof(struct in6_addr)];
            if (inet_pton(AF_INET, v.c_str(), buf) != 1 && inet_pton(AF_INET6, v.c_str(), buf) != 1)
                return fail(Error::InvalidArgument,
                            k + ": '" + v +
                                "' is not an IP address; name one of this host's addresses "
                                "(127.0.0.1, 10.1.2.3, ::1), or 0.0.0.0 for all");
            c.metrics_address = v;
            return {};
        });
    s.add_nice("nice", &c.nice,
               "the agent's CPU nice value, -20..19, ahead of the pods' (default -5)");
}

// Keys of what every virtual node says and how its controllers follow the job.
void add_virtual_node_keys(ConfigSchema &s, AgentConfig &c) {
    s.add(
        "labels", "k=v,... added to every virtual node",
        [&c](const std::string &v, const std::string &k) -> Status {
            auto m = k8s::parse_labels(v);
            if (!m) return fail(Error::InvalidArgument, k + ": " + m.message());
            for (auto &[key, val] : *m)
                c.labels[key] = val;
            return {};
        },
        true);
    s.add(
        "taints", "k=v:Effect,... added to every virtual node",
        [&c](const std::string &v, const std::string &k) -> Status {
            auto t = k8s::parse_taints(v);
            if (!t) return fail(Error::InvalidArgument, k + ": " + t.message());
            c.taints.insert(c.taints.end(), t->begin(), t->end());
            return {};
        },
        true);
    s.add_bool("lift_not_ready_taint", &c.lift_not_ready_taint,
               "remove the API server's not-ready:NoSchedule taint from a Node created Ready, "
               "instead of waiting for the controller-manager");
    s.add_enum("node_identity", &c.node_identity, {"bootstrap", "impersonate", "agent"},
               "whose identity each virtual node's API traffic uses: bootstrap = its own "
               "system:node:<node> client certificate, asked for with a kubelet-client CSR under "
               "the agent's credential (a kubelet's TLS bootstrap; the Node authorizer and "
               "NodeRestriction then confine it), impersonate = the agent's credential acting as "
               "system:node:<node> in system:nodes (the same confinement, no CSR; needs {slot} "
               "in node_name_template), agent = the agent's own credential");
    s.add_seconds("node_csr_timeout", &c.node_csr_timeout_s, 1, 3600,
                  "a virtual node's certificate request not signed within this long fails its "
                  "registration (is the agent bound to the nodeclient ClusterRole?)");
    s.add_uint(
        "node_certificate_seconds", &c.node_certificate_seconds, 0, 31536000,
        "the lifetime asked for a virtual node's certificate (CSR expirationSeconds, at "
        "least 600; default a day: a certificate outlives its node by a day at most); 0 = the "
        "signer's default; renewed at 70-90 % of it");
    s.add_list("allowed_namespaces", &c.allowed_namespaces,
               "namespaces whose pods may run on a job's nodes when the job names none "
               "(--k8s-namespace); empty = none, * = any");
    s.add(
        "volume_roots",
        "PATH,... under which pods may mount node paths (hostPath volumes, and the hostPath, "
        "local and nfs PersistentVolumes their claims are bound to, as the job's user); empty = "
        "none",
        [&c](const std::string &v, const std::string &k) -> Status {
            if (v.empty()) {  // "key=" clears: an explicit "none"
                c.volume_roots.clear();
                return {};
            }
            for (const auto &item : split(v, ',')) {
                std::string t(trim(item));
                auto norm = clean_absolute_path(t);
                if (!norm) return fail(Error::InvalidArgument, k + ": " + norm.message());
                c.volume_roots.push_back(*norm);
            }
            return {};
        },
        true);
    s.add_path("image_store", &c.image_store,
               "the node's image store shared by all jobs here (public images pulled once per "
               "node, read-only to the jobs; needs fuse-overlayfs); empty = each job pulls into "
               "its own storage");
    s.add_string("image_store_user", &c.image_store_user,
                 "the unprivileged user that owns the image store and runs its pulls");
    s.add("image_store_size",
          "the image store's size bound (MiB, or with a suffix: 500G, 1T, 500Gi); beyond it the "
          "least recently used images no pod here runs go, down to 90 % of it; 0 = no bound",
          [&c](const std::string &v, const std::string &k) -> Status {
              if (v == "0") {
                  c.image_store_size = 0;
                  return {};
              }
              auto mib = parse_size_mib(v, k);
              if (!mib) return mib.failure();
              c.image_store_size = *mib << 20;
              return {};
          });
    s.add_list("image_store_insecure_registries", &c.image_store_insecure_registries,
               "registries (HOST[:PORT]) the image store pulls from over plain HTTP");
    s.add_uint("image_store_pulls", &c.image_store_pulls, 1, 64,
               "image store pulls run at once (more wait)");
    s.add_path("image_store_mount_program", &c.image_store_mount_program,
               "fuse-overlayfs, through which the jobs' podman reads the image store");
    s.add_string("podman", &c.podman, "the podman program the image store runs");
    s.add_enum("pod_network", &c.pod_network, {"host", "cni"},
               "host: pods share the node's network; cni: each pod its own network namespace "
               "and address from pod_cidr (hostNetwork pods keep the node's)");
    s.add_string("pod_cidr", &c.pod_cidr,
                 "this host's pod address range (a.b.c.d/n), distinct on each host; needed by "
                 "pod_network = cni");
    s.add_string("pod_network_bridge", &c.pod_network_bridge,
                 "the host's pod bridge (made by the CNI bridge plugin)");
    s.add_path("cni_plugin_dir", &c.cni_plugin_dir,
               "the CNI plugins (containernetworking-plugins: bridge, host-local, portmap)");
    s.add_path("pod_network_dir", &c.pod_network_dir,
               "where the pods' network namespaces are held (root's; on a tmpfs such as /run)");
    s.add_uint("pod_network_mtu", &c.pod_network_mtu, 0, 65520,
               "the MTU of the pods' interfaces and the bridge, 0 = the plugin's (1500); a "
               "larger one speeds up traffic between the host and its pods (docs/benchmarks.md), "
               "traffic to other hosts then depends on path MTU discovery");
    s.add_bool("pod_network_masquerade", &c.pod_network_masquerade,
               "pods reach addresses beyond this host through its own (the bridge plugin's "
               "ipMasq)");
    s.add_bool("allow_daemonsets", &c.allow_daemonsets,
               "run pods that a DaemonSet owns on the virtual nodes (off: refused)");
    s.add_seconds("volume_refresh_interval", &c.volume_refresh_s, 0, 3600,
                  "how often running pods' configMap and secret volumes are read again and "
                  "their changed files updated in place, 0 = never");
    s.add_seconds("lease_duration", &c.lease_duration_s, 10, 3600, "Lease leaseDurationSeconds");
    s.add_seconds("lease_renew_interval", &c.lease_renew_s, 1, 600, "Lease renewal period");
    s.add_seconds("status_report_interval", &c.status_report_s, 1, 3600,
                  "periodic node status report");
    s.add_seconds("node_check_interval", &c.node_check_s, 0, 3600,
                  "extra periodic check that the Node exists, 0 = off (a deleted Node is "
                  "noticed anyway: its Lease is garbage-collected, the next renewal gets 404)");
    s.add_seconds("cordon_before_end", &c.cordon_before_end_s, 0, 86400,
                  "cordon this long before the job's end time");
    s.add_seconds("drain_before_end", &c.drain_before_end_s, 0, 86400,
                  "stop the pods this long before the job's end time (jobs without "
                  "--k8s-drain-before), 0 = at the end");
    s.add_seconds("end_time_check_interval", &c.end_time_check_s, 0, 86400,
                  "re-read each job's end time this often (job_end_command, one run per job) "
                  "to follow a changed time limit; 0 = read once at register");
    s.add_seconds("job_state_check_interval", &c.job_state_check_s, 0, 86400,
                  "ask Slurm each job's state this often (job_alive_command, one run per job) "
                  "to follow a suspend and resume; 0 = never");
    s.add_seconds("gc_interval", &c.gc_interval_s, 10, 86400,
                  "garbage collection of what gone jobs left (Nodes, shim dirs, records)");
    s.add_bool("gc_failed_nodes", &c.gc_failed_nodes,
               "also remove the virtual nodes of other Slurm nodes whose agent stopped renewing "
               "their Lease, once Slurm says their job is gone (enable on one or two agents)");
}

// Keys of the agent's files and sockets, who may use them, the pods' runtime and limits.
void add_host_keys(ConfigSchema &s, AgentConfig &c,
                   const std::vector<std::string> &extra_runtimes) {
    s.add_path("state_dir", &c.state_dir, "agent state (one file per registered job)");
    s.add_path("shim_state_dir", &c.shim_state_dir, "parent of the per-job shim state dirs");
    s.add_path("socket_path", &c.socket_path, "the agent's unix socket");
    s.add_path("admin_socket_path", &c.admin_socket_path,
               "root's own socket (the plugin's and root's CLI), in a directory of mode 0700 the "
               "agent makes (default: admin/ beside socket_path)");
    s.add("socket_mode", "socket permissions, octal",
          [&c](const std::string &v, const std::string &k) -> Status {
              if (v.empty() || v.size() > 4 || v.find_first_not_of("01234567") != std::string::npos)
                  return fail(Error::InvalidArgument, k + "='" + v + "' is not an octal mode");
              c.socket_mode = std::stoul(v, nullptr, 8);
              return {};
          });
    s.add(
        "admin_uids", "uids allowed to register/deregister (default: 0 and slurm_user)",
        [&c](const std::string &v, const std::string &k) -> Status {
            for (const auto &item : split(v, ',')) {
                auto n = parse_uint(trim(item), k, UINT32_MAX);
                if (!n) return n.failure();
                c.admin_uids.push_back(static_cast<uint32_t>(*n));
            }
            return {};
        },
        true);
    s.add_string("slurm_user", &c.slurm_user, "SlurmUser (allowed to register)");
    s.add_enum("shim_auth", &c.shim_auth, {"cgroup", "uid"},
               "attach check: cgroup (uid + job cgroup) or uid (weaker, tests)");
    s.add_bool("pod_cgroups", &c.pod_cgroups,
               "each pod in a cgroup of its own below the job's extern step, denied the "
               "other GPUs (cgroup v1)");
    s.add_path("gpu_device", &c.gpu_device,
               "device node of GPU {index}, as gres.conf File= names it (pods' cgroups)");
    s.add_uint("pod_pids_max", &c.pod_pids_max, 0, 4194304,
               "pids.max of each pod's cgroup (0 = no limit)");
    std::vector<std::string> runtimes = {"shim"};
    runtimes.insert(runtimes.end(), extra_runtimes.begin(), extra_runtimes.end());
    std::string runtime_doc = "pod runtime: shim (the job's slurm-k8s-shim)";
    for (const auto &r : extra_runtimes)
        runtime_doc += ", or " + r;
    s.add_enum("runtime", &c.runtime, runtimes, runtime_doc);
    s.add_string("job_alive_command", &c.job_alive_command,
                 "prints the state of job {job}; exit 0 + RUNNING etc. = alive");
    s.add_string("job_end_command", &c.job_end_command,
                 "prints the end time of job {job} (Slurm format, N/A = none); empty = never ask");
    s.add_uint("max_jobs", &c.max_jobs, 1, 100000, "registered jobs at most");
    s.add_uint("max_pods", &c.max_pods, 1, 10000, "pods per virtual node (capacity pods)");
    s.add_uint("max_connections", &c.max_connections, 4, 100000,
               "socket connections of users (not of root, the SlurmUser or a job's shim) at most");
    s.add_uint("max_connections_per_uid", &c.max_connections_per_uid, 1, 100000,
               "socket connections of one user at most (besides one per job of theirs here)");
    s.add_uint("admin_connections", &c.admin_connections, 1, 100000,
               "socket connections reserved for root and the SlurmUser");
    s.add_seconds("socket_idle_timeout", &c.socket_idle_timeout_s, 1, 3600,
                  "a socket connection without a complete request this long is closed");
    s.add_enum("log_level", &c.log_level, {"error", "warning", "info", "verbose", "debug"},
               "log level");
}

// Every key, in the order describe_agent_config lists them.
void build_schema(ConfigSchema &s, AgentConfig &c, const std::vector<std::string> &extra_runtimes) {
    add_api_keys(s, c);
    add_node_keys(s, c);
    add_kubelet_keys(s, c);
    add_process_keys(s, c);
    add_virtual_node_keys(s, c);
    add_host_keys(s, c, extra_runtimes);
}

}  // namespace

Result<std::string> expand_node_name(const std::string &tmpl, const std::string &slurm_node,
                                     uint32_t job_id, uint32_t slot) {
    std::string out;
    for (size_t i = 0; i < tmpl.size(); i++) {
        if (tmpl.compare(i, 6, "{node}") == 0) {
            out += slurm_node;
            i += 5;
        } else if (tmpl.compare(i, 5, "{job}") == 0) {
            out += std::to_string(job_id);
            i += 4;
        } else if (tmpl.compare(i, 6, "{slot}") == 0) {
            out += std::to_string(slot);
            i += 5;
        } else {
            out += tmpl[i];
        }
    }
    for (auto &ch : out) {
        ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
        if (ch == '_') ch = '-';
    }
    if (!k8s::is_dns1123_subdomain(out))
        return fail(Error::InvalidArgument, "node name '" + out + "' (from node_name_template '" +
                                                tmpl + "') is not a valid Kubernetes node name");
    return out;
}

Result<AgentConfig> parse_agent_config(std::string_view text, std::string_view source,
                                       const std::vector<std::string> &extra_runtimes) {
    AgentConfig c;
    ConfigSchema schema;
    build_schema(schema, c, extra_runtimes);
    auto kvs = parse_kv_text(text, source);
    if (!kvs) return kvs.failure();
    if (auto st = schema.apply(*kvs); !st) return st.failure();
    std::string src(source);
    if (!c.kubeconfig.empty()) {
        if (!c.api.server.empty() || !c.api.token_file.empty() || !c.api.client_cert.empty())
            return fail(Error::InvalidArgument,
                        src + ": set either kubeconfig or api_server/api_*, not both");
        auto text_kc = read_text(c.kubeconfig, "kubeconfig");
        if (!text_kc)
            return fail(Error::InvalidArgument, src + ": kubeconfig: " + text_kc.message());
        std::string dir = c.kubeconfig.substr(0, c.kubeconfig.rfind('/'));
        auto creds = parse_kubeconfig(*text_kc, dir.empty() ? "/" : dir, c.kubeconfig_context);
        if (!creds) return fail(Error::InvalidArgument, src + ": " + creds.message());
        c.api = *creds;
    }
    if (c.api.server.empty())
        return fail(Error::InvalidArgument, src + ": api_server (or kubeconfig) is required");
    if (!starts_with(c.api.server, "https://") && !starts_with(c.api.server, "http://"))
        return fail(Error::InvalidArgument,
                    src + ": api_server='" + c.api.server + "' must start with https://");
    while (!c.api.server.empty() && c.api.server.back() == '/')
        c.api.server.pop_back();
    if (c.api.client_cert.empty() != c.api.client_key.empty())
        return fail(Error::InvalidArgument,
                    src + ": api_client_cert and api_client_key must be set together");
    if (!c.kubeconfig_context.empty() && c.kubeconfig.empty())
        return fail(Error::InvalidArgument, src + ": kubeconfig_context needs kubeconfig");
    if (!c.api.has_credential())
        return fail(Error::InvalidArgument,
                    src + ": set api_token_file or api_client_cert/api_client_key (credentials)");
    if (c.node_identity == "impersonate" && !node_names_per_slot(c))
        return fail(Error::InvalidArgument,
                    src +
                        ": node_identity = impersonate needs {slot} in node_name_template "
                        "(e.g. slurm-{node}-{slot}): the agent's RBAC must name every node it "
                        "may act as, and names per job cannot be listed ahead");
    if (nodes_act_as_nodes(c))
        for (const auto &[k, v] : c.labels)
            if (!k8s::node_may_set_label(k))
                return fail(Error::InvalidArgument,
                            src + ": labels: '" + k +
                                "' is under kubernetes.io or k8s.io, which a node identity may "
                                "not set (NodeRestriction): choose another prefix");
    if (c.node_certificate_seconds != 0 && c.node_certificate_seconds < 600)
        return fail(Error::InvalidArgument,
                    src +
                        ": node_certificate_seconds must be 0 (the signer's default) or at "
                        "least 600: the API refuses a shorter certificate");
    if (c.lease_renew_s * 2 > c.lease_duration_s)
        return fail(Error::InvalidArgument,
                    src + ": lease_renew_interval must be at most half of lease_duration");
    if (auto n = expand_node_name(c.node_name_template, "n1", 1); !n)
        return fail(Error::InvalidArgument, src + ": node_name_template: " + n.message());
    if (c.node_name_template.find("{node}") == std::string::npos ||
        (c.node_name_template.find("{job}") == std::string::npos) ==
            (c.node_name_template.find("{slot}") == std::string::npos))
        return fail(Error::InvalidArgument,
                    src +
                        ": node_name_template must contain {node} and one of {job} (a Node "
                        "name per job) or {slot} (names reused by later jobs)");
    bool any = std::find(c.allowed_namespaces.begin(), c.allowed_namespaces.end(), "*") !=
               c.allowed_namespaces.end();
    if (any && c.allowed_namespaces.size() > 1)
        return fail(Error::InvalidArgument,
                    src + ": allowed_namespaces: '*' (any namespace) stands alone");
    for (const auto &ns : c.allowed_namespaces)
        if (!any && !k8s::is_dns1123_label(ns))
            return fail(Error::InvalidArgument,
                        src + ": allowed_namespaces: '" + ns + "' is not a namespace name");
    if (!c.job_end_command.empty() && c.job_end_command.find("{job}") == std::string::npos)
        return fail(Error::InvalidArgument, src + ": job_end_command must contain {job}");
    if (c.kubelet_cert.empty() != c.kubelet_key.empty())
        return fail(Error::InvalidArgument,
                    src + ": kubelet_cert and kubelet_key must be set together");
    if (c.kubelet_insecure && !c.kubelet_cert.empty())
        return fail(Error::InvalidArgument,
                    src + ": kubelet_insecure = true and kubelet_cert exclude each other");
    if (c.kubelet_serving == "csr" && (!c.kubelet_cert.empty() || c.kubelet_insecure))
        return fail(Error::InvalidArgument,
                    src +
                        ": kubelet_serving = csr excludes kubelet_cert, kubelet_key and "
                        "kubelet_insecure (the certificate comes from the CSRs)");
    if ((!c.kubelet_cert.empty() || c.kubelet_serving == "csr") && c.kubelet_client_ca.empty())
        return fail(Error::InvalidArgument,
                    src +
                        ": kubelet_client_ca is required with kubelet_cert or kubelet_serving = "
                        "csr (the API server "
                        "authenticates to the kubelet endpoint with its kubelet-client "
                        "certificate; without it anyone could read container logs)");
    if (c.job_alive_command.find("{job}") == std::string::npos)
        return fail(Error::InvalidArgument, src + ": job_alive_command must contain {job}");
    if (c.pod_network == "cni" && c.pod_cidr.empty())
        return fail(Error::InvalidArgument,
                    src +
                        ": pod_network = cni needs pod_cidr, this host's pod address range "
                        "(e.g. 10.244.3.0/24; a range of its own on each host)");
    if (c.admin_socket_path.empty()) c.admin_socket_path = admin_socket_for(c.socket_path);
    if (c.admin_socket_path == c.socket_path ||
        c.admin_socket_path.substr(0, c.admin_socket_path.rfind('/')) ==
            c.socket_path.substr(0, c.socket_path.rfind('/')))
        return fail(Error::InvalidArgument,
                    src + ": admin_socket_path='" + c.admin_socket_path +
                        "' must be in a directory of its own, not socket_path's (the agent makes "
                        "it mode 0700 so that only root reaches the admin socket)");
    return c;
}

Result<AgentConfig> load_agent_config(const std::string &path,
                                      const std::vector<std::string> &extra_runtimes) {
    auto text = read_text(path, "configuration file");
    if (!text) return text.failure();
    return parse_agent_config(*text, path, extra_runtimes);
}

std::string describe_agent_config(const std::vector<std::string> &extra_runtimes) {
    AgentConfig c;
    ConfigSchema s;
    build_schema(s, c, extra_runtimes);
    return s.describe();
}

}  // namespace sk::agent
