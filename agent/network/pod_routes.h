// Routes to the other hosts' pods, as a host-gateway CNI (flannel's
// host-gw) programs them: for every virtual Node of the site whose
// spec.podCIDR is another host's, "podCIDR via its InternalIP" in this
// host's routing table (`ip route`, protocol kRouteProtocol, which marks
// them as the agent's: others' routes are never touched). The fabric
// between the hosts must carry the pods' addresses (docs/admin-guide.md,
// "Each pod's own network").
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <json/json.h>

typedef struct uv_loop_s uv_loop_t;

namespace sk::agent {

// The routing protocol number the agent's routes carry (ip-route(8)
// "proto"; 241 is unassigned, above the kernel's and the daemons' ones).
constexpr int kRouteProtocol = 241;

// CIDR -> gateway for the Nodes of `nodes` (a NodeList's items) that name a
// podCIDR other than own_cidr and an InternalIP other than own_address. Two
// hosts claiming one range: the Node first by name wins (the other is
// logged by the caller from `conflicts`).
std::map<std::string, std::string> routes_from_nodes(const Json::Value &nodes,
                                                     const std::string &own_cidr,
                                                     const std::string &own_address,
                                                     std::vector<std::string> *conflicts = nullptr);

// The `ip` commands that take `have` to `want` (replace what is new or
// moved, delete what is gone), each an argv.
std::vector<std::vector<std::string>> route_commands(
    const std::map<std::string, std::string> &have, const std::map<std::string, std::string> &want);

// The routes in place, applied one command at a time off the loop.
class PodRoutes {
  public:
    explicit PodRoutes(uv_loop_t *loop) : loop_(loop) {}
    // Reads the agent's routes left by an earlier agent (kept until the
    // first set(), which removes those no Node names any more).
    void start(const std::function<void()> &done = {});
    void set(std::map<std::string, std::string> want);
    const std::map<std::string, std::string> &installed() const { return have_; }

  private:
    void pump();
    uv_loop_t *loop_;
    std::map<std::string, std::string> have_, want_;
    bool running_ = false, dirty_ = false;
};

}  // namespace sk::agent
