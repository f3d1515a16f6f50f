// The agent's configuration file (etc/agent.conf.example documents every
// key). Strict: an unknown key, a bad value or a missing requirement fails
// the start with the key and the reason (common/config.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/kube/credentials.h"
#include "common/k8s_names.h"
#include "common/result.h"

namespace sk::agent {

struct AgentConfig {
    ApiCredentials api;
    std::string kubeconfig;          // alternative to api_*: agent/kube/kubeconfig.h
    std::string kubeconfig_context;  // "" = its current-context
    uint64_t api_timeout_s = 10;

    std::string cluster_name = "slurm";
    std::string slurm_node;  // this agent's Slurm node name; empty = short hostname
    std::string node_name_template = "slurm-{node}-{job}";
    std::string node_address;  // InternalIP of the virtual nodes; empty = primary_ipv4()
    // The Hostname address, advertised only when usable (agent/core/node_address.h);
    // empty = host_name(); "-" = never.
    std::string node_hostname;
    std::string kubelet_address;    // listen address; empty = node_address; "*" = all
    uint64_t kubelet_port = 10250;  // 0 = any free port (the Node carries the real one)
    std::string kubelet_cert;       // PEM serving certificate for the kubelet endpoint
    std::string kubelet_key;        // its key
    // "files": kubelet_cert/kubelet_key; "csr": a certificate obtained and
    // renewed through kubernetes.io/kubelet-serving CSRs (state_dir/pki/
    // kubelet-serving.pem), as a kubelet with serverTLSBootstrap.
    std::string kubelet_serving = "files";
    std::string kubelet_client_ca;  // CA of the API server's kubelet-client certificate
    bool kubelet_insecure = false;  // plain HTTP, no client auth (tests only; logged)
    uint64_t metrics_port = 0;      // GET /metrics on metrics_address; 0 = off
    // Where /metrics listens (an IPv4 or IPv6 literal): loopback unless the
    // admin names an address a scraper reaches (the metrics carry no secret,
    // but who may read them is the site's choice).
    std::string metrics_address = "127.0.0.1";
    // The agent's CPU nice value, set at its start for all its threads:
    // ahead of the pods and the sessions' commands (the workload's nice) in
    // the scheduler, so that their load does not queue the pods' status.
    int nice = -5;
    std::map<std::string, std::string> labels;  // added to every virtual node
    std::vector<k8s::Taint> taints;             // added to every virtual node
    // The namespaces whose pods may run on a job's nodes when the job names
    // none (--k8s-namespace): empty = none, {"*"} = any.
    std::vector<std::string> allowed_namespaces;
    // Where pods may mount node paths from: hostPath volumes and the
    // PersistentVolumes (hostPath, local, nfs) their claims are bound to,
    // each at or below one of these (absolute, normalised). Empty: none
    // (both refused). agent/controllers/host_volumes.h.
    std::vector<std::string> volume_roots;
    // The node's image store shared by every job here (agent/images/image_store.h):
    // its directory ("" = none: each job pulls into its own podman storage),
    // the unprivileged user that owns it and runs its pulls (never root), its
    // size bound in bytes (least recently used images go beyond it; 0 = no
    // bound), the registries it pulls from over plain HTTP, the pulls it runs
    // at once, and fuse-overlayfs, through which the jobs' podman reads it.
    std::string image_store;
    std::string image_store_user = "slurm-k8s-images";
    uint64_t image_store_size = uint64_t{100} << 30;
    std::vector<std::string> image_store_insecure_registries;
    uint64_t image_store_pulls = 2;
    std::string image_store_mount_program = "/usr/bin/fuse-overlayfs";
    std::string podman = "podman";  // the podman program the image store runs
    // Each pod's own network (agent/network/pod_network.h): "host" = every
    // pod on the node's network (as before); "cni" = a network namespace
    // and an address from pod_cidr per pod (hostNetwork pods keep the
    // node's), on the bridge pod_network_bridge, by the CNI plugins in
    // cni_plugin_dir; namespaces held and results kept in pod_network_dir,
    // leases in pod_network_dir/ipam. pod_network_masquerade: pods reach
    // beyond the host through the host's address.
    std::string pod_network = "host";
    std::string pod_cidr;
    std::string pod_network_bridge = "sk-pods0";
    std::string cni_plugin_dir = "/usr/lib/cni";
    std::string pod_network_dir = "/run/slurm-k8s/net";
    bool pod_network_masquerade = true;
    uint64_t pod_network_mtu = 0;  // the pods' interfaces; 0 = the bridge plugin's (1500)
    // Pods a DaemonSet owns run on the virtual nodes only when set: a cluster
    // agent (log shipper, monitoring, CNI) would run inside the user's job.
    bool allow_daemonsets = false;
    // Bounds on the kubelet endpoint's peers before they authenticate: at
    // most this many connections in all and from one address, and the
    // inactivity a new connection may spend before its first request.
    uint64_t kubelet_max_connections = 256;
    uint64_t kubelet_max_connections_per_address = 64;
    uint64_t kubelet_handshake_timeout_s = 10;
    uint64_t kubelet_max_stream_sessions = 64;
    uint64_t kubelet_stream_idle_timeout_s = uint64_t{4} * 3600;
    bool kubelet_port_forward_any_port = false;
    // Who may use the kubelet endpoint (agent/kubelet/webhook_gate.h): Webhook asks
    // the API server (SubjectAccessReview on nodes/proxy, nodes/stats, ...),
    // AlwaysAllow lets any verified client certificate in.
    std::string kubelet_authorization_mode = "Webhook";
    bool kubelet_authentication_webhook = true;  // bearer tokens through TokenReview
    uint64_t kubelet_stream_creation_timeout_s = 30;
    // kubelet_node_ports = LOW-HIGH: each virtual node gets a kubelet
    // endpoint of its own on a free port of the range (its Node names it),
    // serving that node's pods and stats only; 0-0 = off (one shared port).
    uint64_t kubelet_node_port_low = 0, kubelet_node_port_high = 0;

    uint64_t lease_duration_s = 40;
    uint64_t lease_renew_s = 10;
    uint64_t status_report_s = 300;
    // 0 = off: a deleted Node is noticed through its Lease (garbage-collected
    // with the Node, so the next renewal gets 404) and the status report.
    uint64_t node_check_s = 0;
    uint64_t cordon_before_end_s = 60;
    // Pods stopped (SIGTERM, their grace period, Failed/Terminated) this long
    // before the job's end time, for jobs without --k8s-drain-before; 0 = off
    // (they stop at the job's end). The node is cordoned by then at the latest.
    uint64_t drain_before_end_s = 0;
    // How often the end time of each job is read again (job_end_command),
    // so that a changed time limit moves the end-time cordon; 0 = read once.
    uint64_t end_time_check_s = 30;
    // How often each job's state is asked of Slurm (job_alive_command, one
    // run per job) to follow a suspension (scontrol suspend, preemption by
    // suspension) and the resume; 0 = never (a suspended job's nodes stay
    // Ready and its pods run).
    uint64_t job_state_check_s = 10;
    uint64_t gc_interval_s = 300;
    // How often the ConfigMaps and Secrets that running pods' volumes hold
    // are read again, their changed files written in place (the kubelet's
    // pod sync: about a minute); 0 = never (the contents of the pod's start).
    uint64_t volume_refresh_s = 60;
    // Also collect the virtual nodes of the cluster's other Slurm nodes whose
    // agent stopped renewing their Lease (a failed node) once Slurm says the
    // job is gone (Agent::gc_failed_nodes). Meant for one or two agents of a
    // cluster (or one on the controller host), not all of them.
    bool gc_failed_nodes = false;

    std::string state_dir = "/var/lib/slurm-k8s";
    std::string shim_state_dir = "/run/slurm-k8s/shim";
    std::string socket_path = "/run/slurm-k8s/agent.sock";
    uint64_t socket_mode = 0666;  // peers are authenticated by SO_PEERCRED, not by mode
    // Root's and the SlurmUser's own socket, in a directory only the agent's
    // user may enter (common/agent_call.h); "" = admin_socket_for(socket_path).
    std::string admin_socket_path;
    std::vector<uint32_t> admin_uids;  // empty = root + slurm_user
    std::string slurm_user = "slurm";
    std::string shim_auth = "cgroup";  // cgroup | uid (weaker; tests without Slurm)
    // Each pod in a cgroup of its own below the extern step (cgroup v1,
    // common/cgroup/pod_cgroup.h): only its own GPUs at the device. gpu_device names
    // GPU {index}'s device node as gres.conf's File= does.
    bool pod_cgroups = true;
    std::string gpu_device = "/dev/nvidia{index}";
    // pids.max of a pod's cgroup (as the kubelet's --pod-max-pids): a pod
    // that forks without bound stops there, not at the node's limit.
    uint64_t pod_pids_max = 4096;
    // shim, or a runtime the daemon's build adds (agent/daemon.h: a test
    // build adds the in-memory "fake").
    std::string runtime = "shim";
    std::string job_alive_command = "squeue -h -t all -j {job} -o %T";
    // Asked when the plugin registered end_time=0; prints Slurm's EndTime
    // ("2026-01-01T12:00:00", local time) or N/A / Unknown. "" = never ask.
    std::string job_end_command = "squeue -h -j {job} -o %e";

    // Lift node.kubernetes.io/not-ready:NoSchedule from a Node the agent
    // created Ready (the controller-manager would, ~0.2-4 s later).
    bool lift_not_ready_taint = true;
    // Whose identity a virtual node's API traffic goes out under
    // (agent/controllers/node_identity.h): "bootstrap" = its own system:node:<node>
    // certificate from a kubelet-client CSR, "agent" = the agent's own.
    // "impersonate" = the agent's credential acting as system:node:<node>
    // (Impersonate-User/-Group): the same confinement, no CSR, no
    // connection per node; needs {slot} names (RBAC lists whom it may act
    // as). The shipped default is each node's own identity, confined by the
    // Node authorizer and NodeRestriction as a kubelet is; "agent" is an
    // explicit choice (every node's traffic under the agent's wider rights).
    std::string node_identity = "bootstrap";
    uint64_t node_csr_timeout_s = 60;           // a CSR not signed in this long fails the node
    uint64_t node_certificate_seconds = 86400;  // the CSR's expirationSeconds; 0 = the signer's
    uint64_t max_jobs = 64;
    uint64_t max_pods = 110;
    // The agent socket's admission (agent/socket_server.h, docs/security.md).
    uint64_t max_connections = 256;         // users' connections (not admins', not shims') in all
    uint64_t max_connections_per_uid = 16;  // one user's
    uint64_t admin_connections = 64;        // reserved for root and the SlurmUser
    uint64_t socket_idle_timeout_s = 10;    // no complete request in this long: closed
    std::string log_level = "info";
};

// Parses agent.conf text (source names it in messages) and checks the
// cross-key rules; does no I/O except reading a kubeconfig it names.
// extra_runtimes: the runtime= values besides "shim" this build accepts.
Result<AgentConfig> parse_agent_config(std::string_view text, std::string_view source,
                                       const std::vector<std::string> &extra_runtimes = {});
Result<AgentConfig> load_agent_config(const std::string &path,
                                      const std::vector<std::string> &extra_runtimes = {});
// "key: doc" lines for --help.
std::string describe_agent_config(const std::vector<std::string> &extra_runtimes = {});

// "slurm-{node}-{job}" -> "slurm-n1-42", "slurm-{node}-{slot}" ->
// "slurm-n1-0", lowercased; fails when the result is not a DNS-1123
// subdomain.
Result<std::string> expand_node_name(const std::string &tmpl, const std::string &slurm_node,
                                     uint32_t job_id, uint32_t slot = 0);

// node_name_template names slots ({slot}): a job's Node takes the lowest
// slot of its Slurm node no registered job holds, and the Node name and
// its identity (node_identity = bootstrap) outlive the job for the next
// one on that slot.
inline bool node_names_per_slot(const AgentConfig &c) {
    return c.node_name_template.find("{slot}") != std::string::npos;
}

// A virtual node's traffic goes out as system:node:<node> (its own
// certificate, or impersonating it): NodeRestriction's rules apply.
inline bool nodes_act_as_nodes(const AgentConfig &c) {
    return c.node_identity != "agent";
}

}  // namespace sk::agent
