#include "agent/node_endpoints.h"

#include "common/log.h"

namespace sk::agent {

namespace {

// The server and its stats provider, closed in the order that cannot stall
// the loop: waiting scrapes are answered first (their HTTP threads would
// otherwise hold the server's stop until their bound), then the server stops.
struct Endpoint {
    std::shared_ptr<AgentStatsProvider> stats;
    std::unique_ptr<KubeletServer> server;
    ~Endpoint() {
        stats->close();
        server->stop();
    }
};

// The host's stream sessions, admitted only for this node's pods: the same
// answer as for a pod the agent does not run.
class NodeStreams : public StreamHandler {
  public:
    NodeStreams(std::shared_ptr<StreamHandler> inner, LogIndex *logs, std::string state_dir)
        : inner_(std::move(inner)), logs_(logs), state_dir_(std::move(state_dir)) {}
    Status check(const StreamRequest &req) override {
        if (auto st = logs_->exec_check(req.ns, req.pod, req.container, state_dir_); !st) return st;
        return inner_->check(req);
    }
    void start(StreamRequest req, HttpUpgrade conn) override {
        inner_->start(std::move(req), std::move(conn));
    }

  private:
    std::shared_ptr<StreamHandler> inner_;
    LogIndex *logs_;
    std::string state_dir_;
};

}  // namespace

NodeEndpoints::NodeEndpoints(uv_loop_t *loop, KubeletServerConfig base, uint16_t low, uint16_t high,
                             LogIndex *logs, AgentStatsProvider::Nodes nodes)
    : loop_(loop),
      base_(std::move(base)),
      low_(low),
      high_(high),
      logs_(logs),
      nodes_(std::move(nodes)) {}

Result<NodeEndpoints::Opened> NodeEndpoints::open(const std::string &node_name,
                                                  const std::string &state_dir) {
    AgentStatsProvider::Nodes all = nodes_;
    auto stats = std::make_shared<AgentStatsProvider>(loop_, [all, node_name] {
        std::vector<NodeRuntimeRef> mine;
        for (auto &n : all())
            if (n.node_name == node_name) mine.push_back(n);
        return mine;
    });
    if (auto st = stats->start(); !st) return st.failure();
    LogIndex *logs = logs_;
    // The same answer as for a pod the agent does not run: this node knows
    // nothing of another job's pods.
    ContainerLogResolver resolve =
        [logs, state_dir](const ContainerLogRef &ref) -> Result<ContainerLogSource> {
        auto src = logs->resolve(ref);
        if (src && src->trusted_dir != state_dir)
            return fail(Error::NotFound, "pod \"" + ref.pod + "\" in namespace \"" + ref.ns +
                                             "\" is not on this node");
        return src;
    };
    std::shared_ptr<StreamHandler> streams;
    if (streams_) streams = std::make_shared<NodeStreams>(streams_, logs_, state_dir);
    for (uint32_t port = low_; port <= high_; port++) {
        KubeletServerConfig c = base_;
        c.http.port = static_cast<uint16_t>(port);
        c.node_name = node_name;  // what the gate authorizes against
        auto srv = std::make_unique<KubeletServer>(c, resolve, streams);
        srv->set_stats_provider(stats);
        if (!srv->start()) continue;  // in use: the next one
        LOG_INFO("[node %s] kubelet endpoint of its own on port %u", node_name.c_str(), port);
        auto e = std::make_shared<Endpoint>();
        e->stats = stats;
        e->server = std::move(srv);
        return Opened{static_cast<uint16_t>(port), e};
    }
    stats->close();
    return fail(Error::Unavailable, "no free port in kubelet_node_ports " + std::to_string(low_) +
                                        "-" + std::to_string(high_));
}

}  // namespace sk::agent
