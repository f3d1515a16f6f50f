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
#include <string_view>
#include <vector>

#include "common/daemons/shim_protocol.h"

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
    std::optional<proto::DiskUse> logs = std::nullopt;  // its log directory
};

struct PodUsage {
    std::string uid, ns, name;
    int64_t start_ms = 0;
    std::vector<ContainerUsage> containers;
    UsageFigures use;                                        // the sum of its containers
    std::optional<proto::DiskUse> ephemeral = std::nullopt;  // its directory in the shim's state
};

// A file system's figures as statvfs(2) has them, in the Summary's terms.
struct FsFigures {
    uint64_t capacity_bytes = 0;   // f_blocks * f_frsize
    uint64_t available_bytes = 0;  // f_bavail * f_frsize: what an unprivileged user may use
    uint64_t used_bytes = 0;       // (f_blocks - f_bfree) * f_frsize
    uint64_t inodes = 0;           // f_files
    uint64_t inodes_free = 0;      // f_ffree
};
// Pure: the figures from statvfs's fields (a count over its total is cut).
FsFigures fs_figures(uint64_t frsize, uint64_t blocks, uint64_t bfree, uint64_t bavail,
                     uint64_t files, uint64_t ffree);

struct InterfaceFigures {
    std::string name;
    uint64_t rx_bytes = 0, rx_errors = 0, tx_bytes = 0, tx_errors = 0;
};
// The host's interfaces (pods use the host's network) and which one is the
// default route's ("" when there is none: the Summary then names none).
struct NetworkFigures {
    std::string default_name;
    std::vector<InterfaceFigures> interfaces;
};

constexpr size_t kMaxInterfaces = 256;
// Pure: the interfaces of /proc/net/dev text, in its order, at most
// kMaxInterfaces; the loopback ("lo") left out as the kubelet does; lines
// that do not parse are skipped.
std::vector<InterfaceFigures> parse_net_dev(std::string_view text);
// Pure: the interface of /proc/net/route's default route (destination and
// mask 0, up), the lowest metric's; "" when none.
std::string default_route_interface(std::string_view text);

// One sample of a virtual node: the job's share of the host and its pods.
struct NodeUsageSample {
    std::string node_name;
    int64_t node_start_ms = 0;  // when the node registered
    int64_t time_ms = 0;        // when the agent received the figures (unix ms)
    proto::StatsSource source = proto::StatsSource::Pods;
    UsageFigures use;
    std::vector<PodUsage> pods;
    // The file system of the job's shim state (pods' logs and volumes), and
    // the host's network; absent when they could not be measured.
    std::optional<FsFigures> fs;
    std::optional<NetworkFigures> network;
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

// GET /stats/summary: {"node": {nodeName, startTime, cpu, memory, fs,
// network}, "pods": [{podRef, startTime, containers [{name, startTime, cpu,
// memory, logs}], cpu, memory, ephemeral-storage}]}; times as RFC 3339. fs,
// network, logs and ephemeral-storage only where measured; the disk figures
// of pods and containers carry the node fs's capacity and free figures, as
// the kubelet's do. Never: runtime.imageFs (no images here), container
// rootfs (a container writes to the host's file systems), pod network (pods
// use the host's network: the kubelet reports none for such pods either).
std::string render_stats_summary(const NodeUsageSample &s);

}  // namespace sk
