// The kubelet endpoint's stats (agent/kubelet/kubelet_stats.h) from the agent's
// loop: an HTTP thread's sample() hands the request to the loop (a uv_async)
// and waits for the answer with a bound (then Unavailable: the endpoint
// answers 503 / resource_scrape_error 1); on the loop the node's runtime is
// asked pod_stats and the rates are kept per node (StatsRates); the node's
// file system and the host's network are measured by the agent itself.
//
// The figures are per virtual node (the job's share of the host): the one
// kubelet port of a host serves them only while exactly one virtual node is
// registered there; with none or several, NotFound (404) says why (naming
// kubelet_node_ports, which gives each node an endpoint of its own,
// agent/node_endpoints.h), and no node's figures are passed off as another's.
#pragma once

#include <uv.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/core/runtime.h"
#include "agent/kubelet/kubelet_server.h"
#include "agent/kubelet/loop_calls.h"

namespace sk::agent {

// A StatsProvider that always refuses (NotFound: 404 with the reason).
class RefusedStats : public StatsProvider {
  public:
    explicit RefusedStats(std::string why) : why_(std::move(why)) {}
    Result<NodeUsageSample> sample() override { return fail(Error::NotFound, why_); }

  private:
    std::string why_;
};

// A registered virtual node and its runtime (null while no shim is
// attached); valid on the loop thread until the loop runs again.
struct NodeRuntimeRef {
    std::string node_name;
    int64_t registered_at_s = 0;
    PodRuntime *runtime = nullptr;
    std::string state_dir = {};  // the job's shim state dir ("" : no node fs figures)
};

// The figures root takes itself, on the loop, beside the shim's answer.
// The file system that holds `state_dir` (fstatvfs(2) on the directory
// opened O_PATH | O_DIRECTORY | O_NOFOLLOW: a symlink in its place is
// refused, never followed).
Result<FsFigures> measure_fs(const std::string &state_dir);
// The host's interfaces (/proc/net/dev) and default route (/proc/net/route),
// read with a bound (common/fs.h read_file).
Result<NetworkFigures> measure_network(const std::string &proc_net = "/proc/net");

// Held by a shared_ptr (a runtime's answer may come after the provider is
// gone: it is then dropped).
class AgentStatsProvider : public StatsProvider,
                           public std::enable_shared_from_this<AgentStatsProvider> {
  public:
    using Nodes = std::function<std::vector<NodeRuntimeRef>()>;  // called on the loop

    AgentStatsProvider(uv_loop_t *loop, Nodes nodes, int timeout_ms = 10000);
    ~AgentStatsProvider() override;
    AgentStatsProvider(const AgentStatsProvider &) = delete;
    AgentStatsProvider &operator=(const AgentStatsProvider &) = delete;

    Status start();  // loop thread
    // Loop thread, once nothing calls sample() any more (the kubelet server
    // stopped): waiting samples fail, the async handle closes.
    void close();

    // Any thread but the loop's.
    Result<NodeUsageSample> sample() override;

  private:
    void serve(const LoopCalls<NodeUsageSample>::Done &done);  // loop thread

    uv_loop_t *loop_;
    Nodes nodes_;
    int timeout_ms_;
    LoopCalls<NodeUsageSample> calls_{loop_};
    std::map<std::string, StatsRates> rates_;  // by node name; loop thread
};

}  // namespace sk::agent
