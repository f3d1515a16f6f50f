// The kubelet's resource stats of one virtual node, as `kubectl top`,
// metrics-server and the HPA read them through the API server
// (nodes/NAME/proxy/...): GET /metrics/resource (Prometheus text, the
// kubelet's metric names and labels, millisecond timestamps) and GET
// /stats/summary (the kubelet's statsapi Summary JSON). Pure: the figures
// come from the job's shim (pod_stats, docs/protocol.md, measured as
// k8s-shim/pod_stats.h says); the agent keeps one StatsRates per node for
// the rates the Summary carries (usageNanoCores).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/shim_protocol.h"

namespace sk {

struct UsageFigures {
    uint64_t cpu_ns = 0;        // cumulative CPU, user + system
    uint64_t memory_bytes = 0;  // working set
    // CPU rate between the previous sample and this one (StatsRates); absent
    // after a first sample, a restart, or a counter that went back.
    std::optional<uint64_t> nano_cores;
};

struct ContainerUsage {
    std::string name;
    int64_t start_ms = 0;
    UsageFigures use;
};

struct PodUsage {
    std::string uid, ns, name;
    int64_t start_ms = 0;
    std::vector<ContainerUsage> containers;
    UsageFigures use;  // the sum of its containers
};

// One sample of a virtual node: the job's share of the host and its pods.
struct NodeUsageSample {
    std::string node_name;
    int64_t node_start_ms = 0;  // when the node registered
    int64_t time_ms = 0;        // when the agent received the figures (unix ms)
    proto::StatsSource source = proto::StatsSource::Pods;
    UsageFigures use;
    std::vector<PodUsage> pods;
};

// The shim's reply as a sample; each pod's figures are its containers' sums.
NodeUsageSample usage_sample(const std::string &node_name, int64_t node_start_ms, int64_t time_ms,
                             const proto::PodStatsReply &reply);

// The previous sample of each counter of one node (the node, each pod by
// uid, each container instance by uid, name and start): apply() fills the
// nano_cores of a new sample from it and keeps the new one. Counters that
// went back (a pod's sum when a container restarted, a measurement glitch)
// get no rate; the container counters a scrape shows never go back within an
// instance (the larger value is kept).
class StatsRates {
  public:
    void apply(NodeUsageSample *s);
    size_t size() const { return prev_.size(); }

  private:
    struct Prev {
        int64_t time_ms;
        uint64_t cpu_ns;
    };
    void rate(const std::string &key, int64_t time_ms, UsageFigures *u,
              std::map<std::string, Prev> *next) const;
    std::map<std::string, Prev> prev_;
};

// GET /metrics/resource: node_cpu_usage_seconds_total,
// node_memory_working_set_bytes, pod_cpu_usage_seconds_total{namespace,pod},
// pod_memory_working_set_bytes, container_cpu_usage_seconds_total
// {container,namespace,pod}, container_memory_working_set_bytes,
// container_start_time_seconds, resource_scrape_error and scrape_error (its
// older name), with # HELP and # TYPE lines. `s` null: no figures could be
// had (scrape_error 1 and nothing else).
std::string render_resource_metrics(const NodeUsageSample *s);

// GET /stats/summary: {"node": {nodeName, startTime, cpu, memory}, "pods":
// [{podRef, startTime, containers [{name, startTime, cpu, memory}], cpu,
// memory}]}; times as RFC 3339.
std::string render_stats_summary(const NodeUsageSample &s);

}  // namespace sk
