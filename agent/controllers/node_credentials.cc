#include "agent/controllers/node_credentials.h"

#include <utility>

namespace sk::agent {

std::string node_credentials_file(const AgentConfig &cfg, const std::string &node) {
    return cfg.state_dir + "/pki/" + node + ".pem";
}

namespace {

CsrProfile client_profile(const AgentConfig &cfg, const std::string &node) {
    CsrProfile p;
    p.prefix = "[node " + node + "]";
    p.who = node_user(node);
    p.what = "identity " + p.who;
    p.node = node;
    p.generate_name = "slurm-k8s-" + node + "-";
    p.file = node_credentials_file(cfg, node);
    p.signer = kKubeletClientSigner;
    // What the kubelet asks for with an ECDSA key (key encipherment is RSA's).
    p.usages = {"digital signature", "client auth"};
    p.expiration_seconds = static_cast<int64_t>(cfg.node_certificate_seconds);
    p.timeout_s = cfg.node_csr_timeout_s;
    p.timeout_hint =
        "(node_csr_timeout): is the agent's identity bound to the ClusterRoles "
        "system:node-bootstrapper and system:certificates.k8s.io:certificatesigningrequests:"
        "nodeclient (etc/rbac-node-identity.yaml), and is the controller-manager's csrapproving "
        "and csrsigning running? (kubectl get csr)";
    p.refused_hint =
        "(the agent's identity needs the ClusterRole system:node-bootstrapper, "
        "etc/rbac-node-identity.yaml)";
    return p;
}

}  // namespace

NodeCredentials::NodeCredentials(AgentContext &ctx, const std::string &node_name,
                                 OnChange on_change)
    : CsrCertificate(ctx, client_profile(*ctx.cfg, node_name), std::move(on_change)) {}

}  // namespace sk::agent
