// A pod's own network, as a kubelet's CNI plugin gives it: a network
// namespace with an address from the node's pod range, plugged into the
// host's pod bridge by the root agent (agent/network/pod_network.h), never
// by the job's user. The controllers ask for it before they hand a pod to
// the runtime and let it go when the pod ends or goes; the controllers'
// tests leave AgentContext::networks null (pods then share the node's
// network, as hostNetwork pods do).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"

namespace sk::agent {

// A hostPort of the pod (the CNI portmap plugin's portMappings).
struct HostPort {
    uint16_t host_port = 0, container_port = 0;
    std::string protocol = "tcp";  // tcp, udp, sctp
    std::string host_ip;           // "" = every address of the node
    bool operator==(const HostPort &o) const {
        return host_port == o.host_port && container_port == o.container_port &&
               protocol == o.protocol && host_ip == o.host_ip;
    }
};

struct PodNetworkRequest {
    std::string pod_uid;
    std::string pod_name;  // "ns/name", for messages
    int sandbox_pid = 0;   // holds the namespaces (PodRuntime::sandbox)
    uint32_t uid = 0;      // the job's user: it must own them
    std::string job_tag;   // "job_<id>_<node>": the job's attachments go with it
    std::vector<HostPort> host_ports;
};

// What the pod got: its address and where its namespaces are held, which
// its processes join (common/daemons/shim_protocol.h PodRun::net_ns).
struct PodAddress {
    std::string ip;
    std::string net_ns, uts_ns;
    std::string job_tag;
};

class PodNetworks {
  public:
    virtual ~PodNetworks() = default;
    // Takes hold of the sandbox's namespaces and plugs them in; done once
    // (later, on the loop) with the address or why not (the pod's
    // FailedCreatePodSandBox). A pod attached already gets its address again.
    virtual void attach(const PodNetworkRequest &r,
                        std::function<void(Result<PodAddress>)> done) = 0;
    // Unplugs the pod and lets its namespaces go (the address back to the
    // range); done once that is over (also for a pod not attached).
    virtual void detach(const std::string &pod_uid, std::function<void()> done) = 0;
    // The pod's address when attached (also from before an agent restart).
    virtual const PodAddress *find(const std::string &pod_uid) const = 0;
    // Every pod attached, by uid (the garbage collection's view).
    virtual std::vector<std::string> attached() const = 0;
};

}  // namespace sk::agent
