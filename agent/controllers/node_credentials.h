// A virtual node's identity (agent/controllers/node_identity.h): the certificate its API
// traffic presents, obtained and renewed as a kubelet's TLS bootstrap does
// (agent/controllers/csr_certificate.h): a
// kubernetes.io/kube-apiserver-client-kubelet CSR for system:node:<node>,
// which the controller-manager approves and signs; a first one not signed
// within node_csr_timeout fails the node's registration. The key and
// certificate live in <state_dir>/pki/<node>.pem.
#pragma once

#include <string>

#include "agent/controllers/csr_certificate.h"

namespace sk::agent {

// Where node's key and certificate are kept: <state_dir>/pki/<node>.pem.
std::string node_credentials_file(const AgentConfig &cfg, const std::string &node);

class NodeCredentials : public CsrCertificate {
  public:
    NodeCredentials(AgentContext &ctx, const std::string &node_name, OnChange on_change);
};

}  // namespace sk::agent
