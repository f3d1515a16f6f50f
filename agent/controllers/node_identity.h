// A virtual node's own identity towards the API server, obtained as a
// kubelet's TLS bootstrap obtains it (docs/admin-guide.md, "Node
// identities"): a new key, a certificate signing request for
// CN=system:node:<node>, O=system:nodes, sent as a
// `kubernetes.io/kube-apiserver-client-kubelet` CSR under the agent's own
// (bootstrap) credential; the controller-manager approves and signs it, and
// the node's API traffic then goes out under that certificate, so the Node
// authorizer and NodeRestriction confine it as they confine a kubelet.
// This file holds the pure parts (GnuTLS): the key and request, reading an
// issued certificate back, the renewal deadline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace sk::agent {

// The user a node identity authenticates as, and its group.
std::string node_user(const std::string &node_name);
constexpr const char *kNodesGroup = "system:nodes";
constexpr const char *kKubeletClientSigner = "kubernetes.io/kube-apiserver-client-kubelet";
constexpr const char *kKubeletServingSigner = "kubernetes.io/kubelet-serving";

// The names a serving certificate is for: what the API server dials (a
// Node's addresses), DNS names and IP addresses (textual, v4 or v6).
struct SubjectAltNames {
    std::vector<std::string> dns, ips;
    bool empty() const { return dns.empty() && ips.empty(); }
};

struct NodeKeyRequest {
    std::string key_pem;  // EC P-256 private key (PKCS#8 PEM)
    std::string csr_pem;  // PKCS#10, CN=system:node:<node>, O=system:nodes, signed by the key
};
// A fresh key and its request; no extensions (the CSR's usages are in the
// API object, and the signer refuses SANs in a client certificate).
Result<NodeKeyRequest> make_node_client_request(const std::string &node_name);
// The same for a `kubernetes.io/kubelet-serving` CSR: the subject a kubelet's
// serving request has (CN=system:node:<node>, O=system:nodes) and the
// subject alternative names `sans` (at least one: the signer refuses a
// serving request without; an address that does not parse is an error).
Result<NodeKeyRequest> make_node_serving_request(const std::string &node_name,
                                                 const SubjectAltNames &sans);

struct IssuedCertificate {
    int64_t not_before = 0, not_after = 0;  // unix s
    std::string common_name;
};
// Reads the first PEM certificate of cert_pem and checks that it is one for
// node_name (CN system:node:<node>, O system:nodes) and for key_pem's key:
// a certificate the signer issued for another request is refused. With
// `covers`, every name and address there must be one the certificate is
// valid for, as a TLS client checks it (a kept serving certificate from
// before an address change is not used).
Result<IssuedCertificate> check_node_certificate(const std::string &cert_pem,
                                                 const std::string &key_pem,
                                                 const std::string &node_name,
                                                 const SubjectAltNames *covers = nullptr);

// When to ask for the next certificate: at `fraction` (0.7..0.9, the
// kubelet's jittered window) of the validity from the later of not_before
// and `from`. A new certificate counts from when it arrived: signers
// backdate not_before (kube-controller-manager by 5 min), which would put
// a short-lived one's renewal in the past.
int64_t renewal_time(const IssuedCertificate &c, double fraction, int64_t from = 0);

}  // namespace sk::agent
