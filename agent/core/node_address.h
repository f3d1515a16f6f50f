// The addresses a virtual node advertises (docs/admin-guide.md, "Node
// addresses"). kube-apiserver reaches a kubelet at the first address of the
// first type in its --kubelet-preferred-address-types (default Hostname,
// InternalDNS, InternalIP, ExternalDNS, ExternalIP: a Hostname wins wherever
// it stands in the list) and checks the serving certificate against that
// name. So a Node names a Hostname only when that name leads to the kubelet
// endpoint and its certificate: otherwise kubectl logs/exec fail on every
// virtual node with the API server's default flags.
#pragma once

#include <string>

#include "common/result.h"

namespace sk::agent {

// The host's primary IPv4 address: the source address of its default route
// (what a kubelet picks when it is given no --node-ip); without a default
// route the first non-loopback IPv4 of an interface that is up; else
// 127.0.0.1.
std::string primary_ipv4();

// This host's name as the resolver knows it: the canonical name of
// gethostname() where it resolves, else gethostname() itself.
std::string host_name();

// Ok when `name` may be advertised as the Hostname address of a node reached
// at `address`: it resolves (getaddrinfo, which may block) to `address`
// among its addresses and, when cert_file is given, the PEM certificate
// there is valid for that name (its DNS subject alternative names, as a Go
// TLS client checks). Otherwise the failure says which of these fails.
Status hostname_usable(const std::string &name, const std::string &address,
                       const std::string &cert_file);

}  // namespace sk::agent
