// A kubelet endpoint per virtual node (agent.conf kubelet_node_ports =
// LOW-HIGH, docs/admin-guide.md): every virtual node of a host shares the
// host's address, so the API server can tell two jobs' nodes apart only by
// the port their Node names (status.daemonEndpoints.kubeletEndpoint.Port).
// Each node's endpoint serves that node's pods only (a pod of another job is
// 404 there, its logs included) and that node's stats (the job's share of
// the host, agent/stats_provider.h).
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>

#include "agent/kubelet/kubelet_server.h"
#include "agent/kubelet/log_index.h"
#include "agent/stats_provider.h"
#include "common/result.h"

namespace sk::agent {

class NodeEndpoints {
  public:
    // base: the shared endpoint's settings (TLS, limits); its port is not used.
    // nodes: the registered nodes, on the loop (Agent::node_runtimes).
    NodeEndpoints(uv_loop_t *loop, KubeletServerConfig base, uint16_t low, uint16_t high,
                  LogIndex *logs, AgentStatsProvider::Nodes nodes);

    struct Opened {
        uint16_t port = 0;
        std::shared_ptr<void> endpoint;  // the node holds it; dropping it closes the port
    };
    // Loop thread: an endpoint for node_name (pods whose logs lie in
    // state_dir, the job's shim state dir) on the first free port of the
    // range. Unavailable when none is free.
    Result<Opened> open(const std::string &node_name, const std::string &state_dir);
    // Before the first open(): the exec and port-forward sessions
    // (agent/stream_sessions.h), served on every node's endpoint too.
    void set_streams(std::shared_ptr<StreamHandler> s) { streams_ = std::move(s); }

  private:
    uv_loop_t *loop_;
    KubeletServerConfig base_;
    uint16_t low_, high_;
    LogIndex *logs_;
    AgentStatsProvider::Nodes nodes_;
    std::shared_ptr<StreamHandler> streams_;
};

}  // namespace sk::agent
