// agent/core/agent_config: agent.conf (good, bad, the kubelet endpoint's and the
// job end's keys, defaults), the kubeconfig subset and node name templates.
#include <string>

#include "agent/core/agent_config.h"
#include "agent/kube/kubeconfig.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

static const char *kGoodConf =
    "api_server = https://127.0.0.1:6443/\n"
    "api_ca_file = /etc/ca.crt\n"
    "api_token_file = /etc/token\n"
    "labels = site=a\n"
    "taints = dedicated=gpu:NoSchedule\n"
    "admin_uids = 0,64030\n"
    "socket_mode = 0660\n"
    "lease_renew_interval = 8s\n";

START_TEST(config_good) {
    auto c = parse_agent_config(kGoodConf, "agent.conf");
    ck_assert_msg(c.ok(), "%s", c.ok() ? "" : c.message().c_str());
    ck_assert_sstr_eq(c->api.server, "https://127.0.0.1:6443");
    ck_assert_sstr_eq(c->labels.at("site"), "a");
    ck_assert_sstr_eq(c->taints[0].key, "dedicated");
    ck_assert_int_eq(c->admin_uids.size(), 2);
    ck_assert_uint_eq(c->socket_mode, 0660);
    ck_assert_uint_eq(c->lease_renew_s, 8);
    ck_assert_uint_eq(c->lease_duration_s, 40);
    ck_assert_int_eq(c->nice, -5);  // ahead of the pods by default
    ck_assert_int_eq(parse_agent_config(std::string(kGoodConf) + "nice = 0\n", "a.conf")->nice, 0);
}
END_TEST

struct BadConf {
    const char *extra;
    const char *message_has;
};
static const BadConf kBadConfs[] = {
    {"nope = 1\n", "unknown key 'nope'"},
    {"lease_duration = 12s\n", "at most half"},
    {"api_client_cert = /c\n", "set together"},
    {"max_pods = 0\n", "out of range"},
    {"shim_auth = none\n", "shim_auth"},
    {"runtime = fake\n", "runtime"},  // the test double is no choice of the shipped daemon
    {"node_name_template = {node}\n", "{node} and one of {job} (a Node name per job) or {slot}"},
    {"node_name_template = {node}-{job}-{slot}\n", "{node} and one of {job}"},
    {"node_name_template = BAD_{node}_{job}!\n", "not a valid Kubernetes node name"},
    {"allowed_namespaces = Bad\n", "not a namespace name"},
    {"allowed_namespaces = *, rl\n", "'*' (any namespace) stands alone"},
    {"volume_roots = shared\n", "volume_roots: 'shared' is not an absolute path"},
    {"volume_roots = /a, /b/../etc\n", "must not contain a '..' component"},
    {"image_store = images\n", "image_store"},
    {"image_store_size = lots\n", "image_store_size"},
    {"image_store_pulls = 0\n", "out of range"},
    {"nice = -30\n", "nice='-30' is not a nice value (allowed -20..19)"},
    {"kubeconfig = /nonexistent/kc\n", "set either kubeconfig"},
    {"api_server = x\n", "set twice"},
    // the admin socket must be alone in a directory the agent makes 0700
    {"admin_socket_path = /run/slurm-k8s/agent.sock\n", "in a directory of its own"},
    {"admin_socket_path = /run/slurm-k8s/root.sock\n", "in a directory of its own"},
    {"node_identity = node\n", "node_identity"},
    {"metrics_address = localhost\n", "'localhost' is not an IP address"},
    {"node_identity = bootstrap\nlabels = node-role.kubernetes.io/gpu=\n",
     "labels: 'node-role.kubernetes.io/gpu' is under kubernetes.io or k8s.io"},
    // RBAC must list whom the agent may act as: names per job cannot be.
    {"node_identity = impersonate\n",
     "node_identity = impersonate needs {slot} in node_name_template"},
    {"node_identity = impersonate\nnode_name_template = slurm-{node}-{slot}\n"
     "labels = node-role.kubernetes.io/gpu=\n",
     "labels: 'node-role.kubernetes.io/gpu' is under kubernetes.io or k8s.io"},
    // The API refuses a CSR's expirationSeconds under 600.
    {"node_certificate_seconds = 599\n",
     "node_certificate_seconds must be 0 (the signer's "
     "default) or at least 600"},
};
START_TEST(config_bad) {
    std::string text = std::string(kGoodConf) + kBadConfs[_i].extra;
    auto c = parse_agent_config(text, "agent.conf");
    ck_assert_msg(!c.ok(), "accepted %s", kBadConfs[_i].extra);
    ck_assert_msg(c.message().find(kBadConfs[_i].message_has) != std::string::npos, "%s",
                  c.message().c_str());
}
END_TEST

// A build that registers extra runtimes (agent/daemon.h) accepts their names.
START_TEST(config_extra_runtime) {
    auto c =
        parse_agent_config(std::string(kGoodConf) + "runtime = fake\n", "agent.conf", {"fake"});
    ck_assert_msg(c.ok(), "%s", c.ok() ? "" : c.message().c_str());
    ck_assert_sstr_eq(c->runtime, "fake");
    ck_assert_sstr_eq(parse_agent_config(kGoodConf, "agent.conf", {"fake"})->runtime, "shim");
    ck_assert(describe_agent_config({"fake"}).find("or fake") != std::string::npos);
    ck_assert(describe_agent_config().find("fake") == std::string::npos);
}
END_TEST

START_TEST(config_requires_credentials) {
    auto c = parse_agent_config("api_server = https://h:1\n", "a.conf");
    ck_assert(!c.ok());
    ck_assert(c.message().find("api_token_file") != std::string::npos);
    ck_assert(!parse_agent_config("", "a.conf").ok());
}
END_TEST

// A kubeconfig as kubectl writes one (kubectl config set-cluster/-credentials/
// -context): its current-context picks the cluster and the user.
const char kKubeconfig[] = R"(apiVersion: v1
kind: Config
current-context: agent@prod
clusters:
- name: staging
  cluster:
    server: https://staging.example:6443
- name: prod
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    tls-server-name: kubernetes.default
contexts:
- name: agent@staging
  context: {cluster: staging, user: agent-file}
- name: agent@prod
  context:
    cluster: prod
    user: agent-exec
    namespace: kube-system
users:
- name: agent-file
  user:
    tokenFile: token
    client-certificate: certs/agent.crt
    client-key: /abs/agent.key
- name: agent-exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/get-token
      args: ["--cluster", "prod"]
      env:
      - name: REGION
        value: eu-1
      provideClusterInfo: true
      interactiveMode: Never
)";

START_TEST(kubeconfig_as_kubectl_reads_it) {
    auto a = parse_kubeconfig(kKubeconfig, "/etc/slurm-k8s");
    ck_assert_msg(a.ok(), "%s", a.ok() ? "" : a.message().c_str());
    ck_assert_sstr_eq(a->context, "agent@prod");
    ck_assert_sstr_eq(a->server, "https://10.0.0.1:6443");
    ck_assert_sstr_eq(a->ca_data, "-----BEGIN CERTIFICATE-----\n");
    ck_assert(a->ca_file.empty());
    ck_assert_sstr_eq(a->tls_server_name, "kubernetes.default");
    ck_assert_sstr_eq(a->exec.api_version, "client.authentication.k8s.io/v1");
    ck_assert_sstr_eq(a->exec.command, "/etc/slurm-k8s/bin/get-token");
    ck_assert_int_eq(a->exec.args.size(), 2);
    ck_assert_sstr_eq(a->exec.args[1], "prod");
    ck_assert_int_eq(a->exec.env.size(), 1);
    ck_assert_sstr_eq(a->exec.env[0].first, "REGION");
    ck_assert_sstr_eq(a->exec.env[0].second, "eu-1");
    ck_assert(a->exec.provide_cluster_info);
    ck_assert(a->has_credential());

    auto f = parse_kubeconfig(kKubeconfig, "/etc/slurm-k8s", "agent@staging");
    ck_assert_msg(f.ok(), "%s", f.ok() ? "" : f.message().c_str());
    ck_assert_sstr_eq(f->server, "https://staging.example:6443");
    ck_assert_sstr_eq(f->token_file, "/etc/slurm-k8s/token");
    ck_assert_sstr_eq(f->client_cert, "/etc/slurm-k8s/certs/agent.crt");
    ck_assert_sstr_eq(f->client_key, "/abs/agent.key");
    ck_assert(f->exec.command.empty());

    // JSON is YAML too; inline data are base64.
    auto j = parse_kubeconfig(
        R"({"current-context":"c","contexts":[{"name":"c","context":{"cluster":"k","user":"u"}}],
            "clusters":[{"name":"k","cluster":{"server":"https://h:1","certificate-authority":"ca.crt"}}],
            "users":[{"name":"u","user":{"token":"abc","client-certificate-data":"Q0VSVA==",
                                          "client-key-data":"S0VZ"}}]})",
        "/d");
    ck_assert_msg(j.ok(), "%s", j.ok() ? "" : j.message().c_str());
    ck_assert_sstr_eq(j->ca_file, "/d/ca.crt");
    ck_assert_sstr_eq(j->token, "abc");
    ck_assert_sstr_eq(j->client_cert_data, "CERT");
    ck_assert_sstr_eq(j->client_key_data, "KEY");
}
END_TEST

START_TEST(kubeconfig_refusals_say_why) {
    struct Case {
        std::string text, context, expect;
    } cases[] = {
        {"users: []\n", "", "no current-context"},
        {"current-context: x\n", "", "no context named 'x'"},
        {kKubeconfig, "nope", "no context named 'nope'"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n", "",
         "names cluster 'k', which is not in clusters"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://h'}}]\n",
         "", "names user 'u', which is not in users"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://h', insecure-skip-tls-verify: true}}]\n"
         "users: [{name: u, user: {token: t}}]\n",
         "", "insecure-skip-tls-verify is not supported"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
         "users: [{name: u, user: {auth-provider: {name: oidc}}}]\n",
         "", "auth-provider is not supported"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
         "users: [{name: u, user: {}}]\n",
         "", "its user has no credential"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
         "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1alpha1, "
         "command: x}}}]\n",
         "", "apiVersion 'client.authentication.k8s.io/v1alpha1' is not supported"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
         "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
         "command: x, interactiveMode: Always}}}]\n",
         "", "interactiveMode Always needs a terminal"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
         "users: [{name: u, user: {client-certificate: a.crt}}]\n",
         "", "a client certificate needs its key"},
        {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://h',\n", "",
         "kubeconfig: line "},
    };
    for (const auto &c : cases) {
        auto r = parse_kubeconfig(c.text, "/d", c.context);
        ck_assert_msg(!r.ok(), "accepted: %s", c.text.c_str());
        ck_assert_msg(r.message().find(c.expect) != std::string::npos, "'%s' lacks '%s'",
                      r.message().c_str(), c.expect.c_str());
    }
}
END_TEST

START_TEST(node_names) {
    auto n = expand_node_name("slurm-{node}-{job}", "GPU_N1", 42);
    ck_assert(n.ok());
    ck_assert_sstr_eq(*n, "slurm-gpu-n1-42");
    ck_assert(!expand_node_name("{node}-{job}-", "n1", 1).ok());
    auto s = expand_node_name("slurm-{node}-{slot}", "n1", 42, 3);
    ck_assert(s.ok());
    ck_assert_sstr_eq(*s, "slurm-n1-3");
}
END_TEST

// ---- the kubelet endpoint's and the job end's keys, defaults ----
static const char kConf[] = "api_server = https://127.0.0.1:6443\napi_token_file = /t\n";
struct ConfCase {
    const char *extra, *error_has;  // error_has null = accepted
};
static const ConfCase kConfCases[] = {
    {"kubelet_cert = /c\nkubelet_key = /k\nkubelet_client_ca = /ca\n", nullptr},
    {"kubelet_insecure = true\nkubelet_port = 0\nmetrics_port = 9100\n", nullptr},
    {"job_end_command = \n", nullptr},
    {"node_name_template = gpu-{slot}-{node}\n", nullptr},
    {"kubelet_cert = /c\n", "set together"},
    {"kubelet_cert = /c\nkubelet_key = /k\n", "kubelet_client_ca is required"},
    {"kubelet_serving = csr\n", "kubelet_client_ca is required"},
    {"kubelet_serving = csr\nkubelet_client_ca = /ca\n", nullptr},
    {"kubelet_serving = csr\nkubelet_cert = /c\nkubelet_key = /k\nkubelet_client_ca = /ca\n",
     "kubelet_serving = csr excludes kubelet_cert"},
    {"kubelet_serving = csr\nkubelet_insecure = true\n", "kubelet_serving = csr excludes"},
    {"kubelet_serving = acme\n", "kubelet_serving"},
    {"kubelet_insecure = true\nkubelet_cert = /c\nkubelet_key = /k\nkubelet_client_ca = /ca\n",
     "exclude each other"},
    {"job_end_command = squeue -o %e\n", "must contain {job}"},
    {"metrics_port = 70000\n", "out of range"},
    {"kubelet_insecure = maybe\n", "kubelet_insecure"},
    {"kubelet_node_ports = 10300-10363\n", nullptr},
    {"kubelet_node_ports = 10300 - 10300\n", nullptr},
    {"kubelet_node_ports = 10300\n", "is not a port range LOW-HIGH"},
    {"kubelet_node_ports = 10363-10300\n", "is not a port range LOW-HIGH"},
    {"kubelet_node_ports = 0-10\n", "is not a port range LOW-HIGH"},
    {"kubelet_node_ports = 1-70000\n", "is not a port range LOW-HIGH"},
    {"kubelet_node_ports = a-b\n", "is not a port range LOW-HIGH"},
};
START_TEST(config_keys) {
    const ConfCase &k = kConfCases[_i];
    auto c = parse_agent_config(std::string(kConf) + k.extra, "agent.conf");
    if (!k.error_has) {
        ck_assert_msg(c.ok(), "%s: %s", k.extra, c.ok() ? "" : c.message().c_str());
        return;
    }
    ck_assert_msg(!c.ok(), "accepted %s", k.extra);
    ck_assert_msg(c.message().find(k.error_has) != std::string::npos, "%s", c.message().c_str());
}
END_TEST
START_TEST(config_defaults) {
    auto c = parse_agent_config(kConf, "agent.conf");
    ck_assert(c.ok());
    ck_assert_uint_eq(c->kubelet_node_port_low, 0);  // off: one shared port
    auto ports = parse_agent_config(std::string(kConf) + "kubelet_node_ports = 10300-10363\n", "a");
    ck_assert(ports.ok());
    ck_assert_uint_eq(ports->kubelet_node_port_low, 10300);
    ck_assert_uint_eq(ports->kubelet_node_port_high, 10363);
    ck_assert_uint_eq(c->cordon_before_end_s, 60);
    // No namespace and no DaemonSet unless the site says so.
    ck_assert(c->allowed_namespaces.empty());
    ck_assert(!c->allow_daemonsets);
    ck_assert(c->volume_roots.empty());  // no node path unless the site says which
    auto roots = parse_agent_config(
        std::string(kConf) + "volume_roots = /shared/, //scratch/./jobs\nvolume_roots = /x\n", "a");
    ck_assert_msg(roots.ok(), "%s", roots.ok() ? "" : roots.message().c_str());
    ck_assert_uint_eq(roots->volume_roots.size(), 3);
    ck_assert_sstr_eq(roots->volume_roots[0], "/shared");
    ck_assert_sstr_eq(roots->volume_roots[1], "/scratch/jobs");
    // No node image store unless the site names one; its keys as written.
    ck_assert(c->image_store.empty());
    ck_assert_uint_eq(c->image_store_size, uint64_t{100} << 30);
    auto store = parse_agent_config(
        std::string(kConf) +
            "image_store = /var/lib/sk/images\nimage_store_size = 1M\nimage_store_user = imgs\n"
            "image_store_insecure_registries = r:5000, 10.0.0.1:80\n",
        "a");
    ck_assert_msg(store.ok(), "%s", store.ok() ? "" : store.message().c_str());
    ck_assert_sstr_eq(store->image_store, "/var/lib/sk/images");
    ck_assert_uint_eq(store->image_store_size, 1 << 20);
    ck_assert_sstr_eq(store->image_store_user, "imgs");
    ck_assert_uint_eq(store->image_store_insecure_registries.size(), 2);
    ck_assert_sstr_eq(store->image_store_insecure_registries[1], "10.0.0.1:80");
    ck_assert_uint_eq(
        parse_agent_config(std::string(kConf) + "image_store_size = 0\n", "a")->image_store_size,
        0);
    auto any = parse_agent_config(std::string(kConf) + "allowed_namespaces = *\n", "a");
    ck_assert(any.ok());
    ck_assert_int_eq(any->allowed_namespaces.size(), 1);
    ck_assert_uint_eq(c->metrics_port, 0);
    ck_assert_uint_eq(c->kubelet_port, 10250);
    ck_assert_sstr_eq(c->job_end_command, "squeue -h -j {job} -o %e");
    ck_assert_sstr_eq(c->socket_path, "/run/slurm-k8s/agent.sock");
    ck_assert_sstr_eq(c->admin_socket_path, "/run/slurm-k8s/admin/agent.sock");
    auto moved = parse_agent_config(std::string(kConf) + "socket_path = /tmp/x/a.sock\n", "a");
    ck_assert(moved.ok());
    ck_assert_sstr_eq(moved->admin_socket_path, "/tmp/x/admin/a.sock");  // follows socket_path
    auto own = parse_agent_config(std::string(kConf) + "admin_socket_path = /run/r/a.sock\n", "a");
    ck_assert(own.ok());
    ck_assert_sstr_eq(own->admin_socket_path, "/run/r/a.sock");
    // Node identities: each node its own unless the site says agent.
    ck_assert_sstr_eq(c->node_identity, "bootstrap");
    ck_assert_sstr_eq(c->metrics_address, "127.0.0.1");
    auto own_id = parse_agent_config(std::string(kConf) + "node_identity = agent\n", "a");
    ck_assert(own_id.ok());
    ck_assert_sstr_eq(own_id->node_identity, "agent");
    auto imp = parse_agent_config(std::string(kConf) +
                                      "node_identity = impersonate\n"
                                      "node_name_template = slurm-{node}-{slot}\n",
                                  "a");
    ck_assert_msg(imp.ok(), "%s", imp.ok() ? "" : imp.message().c_str());
    ck_assert_sstr_eq(imp->node_identity, "impersonate");
    ck_assert(nodes_act_as_nodes(*imp) && nodes_act_as_nodes(*c) && !nodes_act_as_nodes(*own_id));
    auto m6 = parse_agent_config(std::string(kConf) + "metrics_address = ::1\n", "a");
    ck_assert(m6.ok());
    ck_assert_sstr_eq(m6->metrics_address, "::1");
    ck_assert_uint_eq(c->node_csr_timeout_s, 60);
    ck_assert_uint_eq(c->node_certificate_seconds, 86400);
    auto boot = parse_agent_config(std::string(kConf) +
                                       "node_identity = bootstrap\nnode_csr_timeout = 2m\n"
                                       "node_certificate_seconds = 0\n",
                                   "a");
    ck_assert_msg(boot.ok(), "%s", boot.ok() ? "" : boot.message().c_str());
    ck_assert_sstr_eq(boot->node_identity, "bootstrap");
    ck_assert_uint_eq(boot->node_csr_timeout_s, 120);
    ck_assert_uint_eq(boot->node_certificate_seconds, 0);
}
END_TEST

int main() {
    Suite *s = suite_create("agent_config");
    TCase *tc = tcase_create("agent_config");
    tcase_add_test(tc, config_good);
    tcase_add_loop_test(tc, config_bad, 0, TABLE_SIZE(kBadConfs));
    tcase_add_test(tc, config_extra_runtime);
    tcase_add_test(tc, config_requires_credentials);
    tcase_add_test(tc, kubeconfig_as_kubectl_reads_it);
    tcase_add_test(tc, kubeconfig_refusals_say_why);
    tcase_add_test(tc, node_names);
    tcase_add_loop_test(tc, config_keys, 0, TABLE_SIZE(kConfCases));
    tcase_add_test(tc, config_defaults);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
