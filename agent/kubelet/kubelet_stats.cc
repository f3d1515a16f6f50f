#include "agent/kubelet/kubelet_stats.h"

#include <json/json.h>

#include <algorithm>

#include "agent/kubelet/metrics.h"
#include "common/daemons/json.h"
#include "common/rfc3339.h"
#include "common/strings.h"

namespace sk {

namespace {

constexpr double kNsPerSec = 1e9;

std::string rfc3339_ms(int64_t ms) {
    return format_rfc3339(ms / 1000, (ms % 1000) * 1000000, 0, true);
}

// One family: # HELP, # TYPE, then its samples.
class Exposition {
  public:
    void family(const char *name, const char *type, const char *help) {
        out_ += "# HELP ";
        out_ += name;
        out_ += ' ';
        out_ += help;
        out_ += "\n# TYPE ";
        out_ += name;
        out_ += ' ';
        out_ += type;
        out_ += '\n';
        name_ = name;
    }
    void sample(const std::vector<std::pair<const char *, std::string>> &labels, double value,
                std::optional<int64_t> time_ms) {
        out_ += name_;
        if (!labels.empty()) {
            out_ += '{';
            bool first = true;
            for (const auto &[k, v] : labels) {
                if (!first) out_ += ',';
                first = false;
                out_ += k;
                out_ += "=\"";
                out_ += escape_label_value(v);
                out_ += '"';
            }
            out_ += '}';
        }
        out_ += ' ';
        out_ += format_metric_value(value);
        if (time_ms) {
            out_ += ' ';
            out_ += std::to_string(*time_ms);
        }
        out_ += '\n';
    }
    std::string take() { return std::move(out_); }

  private:
    std::string out_;
    std::string name_;
};

Json::Value cpu_json(const UsageFigures &u, int64_t time_ms) {
    Json::Value v(Json::objectValue);
    v["time"] = rfc3339_ms(time_ms);
    if (u.nano_cores) v["usageNanoCores"] = Json::UInt64(*u.nano_cores);
    v["usageCoreNanoSeconds"] = Json::UInt64(u.cpu_ns);
    return v;
}

// Only the working set is measured (k8s-shim/pod_stats.h); the usage the
// Summary also carries is that figure too, so that no consumer reads a
// usage below the working set.
Json::Value memory_json(const UsageFigures &u, int64_t time_ms) {
    Json::Value v(Json::objectValue);
    v["time"] = rfc3339_ms(time_ms);
    v["usageBytes"] = Json::UInt64(u.memory_bytes);
    v["workingSetBytes"] = Json::UInt64(u.memory_bytes);
    return v;
}

// The Summary's FsStats: a file system's figures and, for a directory on
// it, what the directory uses (`used`), as the kubelet reports logs and
// ephemeral-storage; without `used` the file system's own.
Json::Value fs_json(const std::optional<FsFigures> &fs, const proto::DiskUse *used,
                    int64_t time_ms) {
    Json::Value v(Json::objectValue);
    v["time"] = rfc3339_ms(time_ms);
    if (fs) {
        v["capacityBytes"] = Json::UInt64(fs->capacity_bytes);
        v["availableBytes"] = Json::UInt64(fs->available_bytes);
        v["inodes"] = Json::UInt64(fs->inodes);
        v["inodesFree"] = Json::UInt64(fs->inodes_free);
    }
    if (used) {
        v["usedBytes"] = Json::UInt64(used->bytes);
        v["inodesUsed"] = Json::UInt64(used->inodes);
    } else if (fs) {
        v["usedBytes"] = Json::UInt64(fs->used_bytes);
        v["inodesUsed"] = Json::UInt64(fs->inodes - fs->inodes_free);
    }
    return v;
}

void interface_json(const InterfaceFigures &i, Json::Value *v) {
    (*v)["name"] = i.name;
    (*v)["rxBytes"] = Json::UInt64(i.rx_bytes);
    (*v)["rxErrors"] = Json::UInt64(i.rx_errors);
    (*v)["txBytes"] = Json::UInt64(i.tx_bytes);
    (*v)["txErrors"] = Json::UInt64(i.tx_errors);
}

// The kubelet's NetworkStats: the default interface's figures inline, then
// every interface.
Json::Value network_json(const NetworkFigures &n, int64_t time_ms) {
    Json::Value v(Json::objectValue);
    v["time"] = rfc3339_ms(time_ms);
    Json::Value all(Json::arrayValue);
    for (const auto &i : n.interfaces) {
        if (i.name == n.default_name) interface_json(i, &v);
        Json::Value j(Json::objectValue);
        interface_json(i, &j);
        all.append(j);
    }
    v["interfaces"] = all;
    return v;
}

// A hexadecimal field of /proc/net/route (at most 16 digits).
std::optional<uint64_t> hex_value(std::string_view s) {
    if (s.empty() || s.size() > 16) return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return std::nullopt;
        v = v << 4 | static_cast<uint64_t>(d);
    }
    return v;
}

}  // namespace

FsFigures fs_figures(uint64_t frsize, uint64_t blocks, uint64_t bfree, uint64_t bavail,
                     uint64_t files, uint64_t ffree) {
    bfree = std::min(bfree, blocks);
    bavail = std::min(bavail, bfree);
    ffree = std::min(ffree, files);
    return {blocks * frsize, bavail * frsize, (blocks - bfree) * frsize, files, ffree};
}

std::vector<InterfaceFigures> parse_net_dev(std::string_view text) {
    std::vector<InterfaceFigures> out;
    for (const auto &line : split(text, '\n')) {
        if (out.size() >= kMaxInterfaces) break;
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;  // the two header lines
        std::string_view name = trim(std::string_view(line).substr(0, colon));
        if (name.empty() || name == "lo" || name.find(' ') != std::string_view::npos) continue;
        // Receive: bytes packets errs drop fifo frame compressed multicast,
        // then Transmit: bytes packets errs drop fifo colls carrier compressed.
        std::vector<uint64_t> f;
        bool ok = true;
        for (const auto &w : split(trim(std::string_view(line).substr(colon + 1)), ' ')) {
            if (w.empty()) continue;  // columns are padded with runs of spaces
            auto n = parse_uint(w, "counter");
            if (!n) {
                ok = false;
                break;
            }
            f.push_back(*n);
        }
        if (!ok || f.size() < 16) continue;
        out.push_back({std::string(name), f[0], f[2], f[8], f[10]});
    }
    return out;
}

std::string default_route_interface(std::string_view text) {
    constexpr uint64_t kRtfUp = 0x1;
    std::string best;
    uint64_t best_metric = UINT64_MAX;
    bool header = true;
    for (const auto &line : split(text, '\n')) {
        if (header) {  // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
            header = false;
            continue;
        }
        std::vector<std::string> f;
        for (const auto &w : split(line, '\t'))
            if (!trim(w).empty()) f.emplace_back(trim(w));
        if (f.size() < 8 || f[1] != "00000000" || f[7] != "00000000") continue;
        auto flags = hex_value(f[3]);
        auto metric = parse_uint(f[6], "metric");
        if (!flags || (*flags & kRtfUp) == 0 || !metric || *metric >= best_metric) continue;
        best = f[0];
        best_metric = *metric;
    }
    return best;
}

NodeUsageSample usage_sample(const std::string &node_name, int64_t node_start_ms, int64_t time_ms,
                             const proto::PodStatsReply &reply) {
    NodeUsageSample s;
    s.node_name = node_name;
    s.node_start_ms = node_start_ms;
    s.time_ms = time_ms;
    s.source = reply.node.source;
    s.use.cpu_ns = reply.node.cpu_ns;
    s.use.memory_bytes = reply.node.memory_bytes;
    for (const auto &p : reply.pods) {
        PodUsage pu;
        pu.uid = p.uid;
        pu.ns = p.ns;
        pu.name = p.name;
        pu.start_ms = p.start_ms;
        for (const auto &c : p.containers) {
            pu.containers.push_back(
                {c.name, c.start_ms, {c.cpu_ns, c.memory_bytes, std::nullopt}, c.logs});
            pu.use.cpu_ns += c.cpu_ns;
            pu.use.memory_bytes += c.memory_bytes;
        }
        // The pod's own cgroups count what the containers' processes miss
        // (the supervisors, what nobody reaped): a kubelet reads a pod so.
        if (p.cgroup_cpu_ns) pu.use.cpu_ns = *p.cgroup_cpu_ns;
        if (p.cgroup_memory_bytes) pu.use.memory_bytes = *p.cgroup_memory_bytes;
        pu.ephemeral = p.ephemeral;
        s.pods.push_back(std::move(pu));
    }
    return s;
}

void StatsRates::rate(const std::string &key, int64_t time_ms, UsageFigures *u,
                      std::map<std::string, Prev> *next) const {
    u->nano_cores.reset();
    auto it = prev_.find(key);
    if (it != prev_.end() && time_ms > it->second.time_ms && u->cpu_ns >= it->second.cpu_ns) {
        uint64_t dns = u->cpu_ns - it->second.cpu_ns;
        auto dms = static_cast<uint64_t>(time_ms - it->second.time_ms);
        // ns of CPU per second of wall time, in nano-cores: dns * 1000 / dms.
        u->nano_cores = dns / dms * 1000 + dns % dms * 1000 / dms;
    }
    (*next)[key] = {time_ms, u->cpu_ns};
}

void StatsRates::apply(NodeUsageSample *s) {
    std::map<std::string, Prev> next;
    rate("node", s->time_ms, &s->use, &next);
    for (auto &p : s->pods) {
        for (auto &c : p.containers) {
            std::string key = "c/" + p.uid + "/" + c.name + "/" + std::to_string(c.start_ms);
            if (auto it = prev_.find(key); it != prev_.end() && c.use.cpu_ns < it->second.cpu_ns)
                c.use.cpu_ns = it->second.cpu_ns;  // a counter of one instance never goes back
            rate(key, s->time_ms, &c.use, &next);
        }
        rate("p/" + p.uid, s->time_ms, &p.use, &next);
    }
    prev_ = std::move(next);
}

std::string render_resource_metrics(const NodeUsageSample *s) {
    Exposition e;
    if (s) {
        e.family("container_cpu_usage_seconds_total", "counter",
                 "[STABLE] Cumulative cpu time consumed by the container in core-seconds");
        for (const auto &p : s->pods)
            for (const auto &c : p.containers)
                e.sample({{"container", c.name}, {"namespace", p.ns}, {"pod", p.name}},
                         static_cast<double>(c.use.cpu_ns) / kNsPerSec, s->time_ms);
        e.family("container_memory_working_set_bytes", "gauge",
                 "[STABLE] Current working set of the container in bytes");
        for (const auto &p : s->pods)
            for (const auto &c : p.containers)
                e.sample({{"container", c.name}, {"namespace", p.ns}, {"pod", p.name}},
                         static_cast<double>(c.use.memory_bytes), s->time_ms);
        e.family("container_start_time_seconds", "gauge",
                 "[STABLE] Start time of the container since unix epoch in seconds");
        for (const auto &p : s->pods)
            for (const auto &c : p.containers)
                e.sample({{"container", c.name}, {"namespace", p.ns}, {"pod", p.name}},
                         static_cast<double>(c.start_ms) / 1000.0, c.start_ms);
        e.family("node_cpu_usage_seconds_total", "counter",
                 "[STABLE] Cumulative cpu time consumed by the node in core-seconds");
        e.sample({}, static_cast<double>(s->use.cpu_ns) / kNsPerSec, s->time_ms);
        e.family("node_memory_working_set_bytes", "gauge",
                 "[STABLE] Current working set of the node in bytes");
        e.sample({}, static_cast<double>(s->use.memory_bytes), s->time_ms);
        e.family("pod_cpu_usage_seconds_total", "counter",
                 "[STABLE] Cumulative cpu time consumed by the pod in core-seconds");
        for (const auto &p : s->pods)
            e.sample({{"namespace", p.ns}, {"pod", p.name}},
                     static_cast<double>(p.use.cpu_ns) / kNsPerSec, s->time_ms);
        e.family("pod_memory_working_set_bytes", "gauge",
                 "[STABLE] Current working set of the pod in bytes");
        for (const auto &p : s->pods)
            e.sample({{"namespace", p.ns}, {"pod", p.name}},
                     static_cast<double>(p.use.memory_bytes), s->time_ms);
    }
    e.family("resource_scrape_error", "gauge",
             "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise");
    e.sample({}, s ? 0 : 1, std::nullopt);
    e.family("scrape_error", "gauge",
             "[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise");
    e.sample({}, s ? 0 : 1, std::nullopt);
    return e.take();
}

std::string render_stats_summary(const NodeUsageSample &s) {
    Json::Value node(Json::objectValue);
    node["nodeName"] = s.node_name;
    node["startTime"] = rfc3339_ms(s.node_start_ms);
    node["cpu"] = cpu_json(s.use, s.time_ms);
    node["memory"] = memory_json(s.use, s.time_ms);
    if (s.fs) node["fs"] = fs_json(s.fs, nullptr, s.time_ms);
    if (s.network) node["network"] = network_json(*s.network, s.time_ms);
    Json::Value pods(Json::arrayValue);
    for (const auto &p : s.pods) {
        Json::Value j(Json::objectValue);
        j["podRef"]["name"] = p.name;
        j["podRef"]["namespace"] = p.ns;
        j["podRef"]["uid"] = p.uid;
        j["startTime"] = rfc3339_ms(p.start_ms);
        Json::Value cs(Json::arrayValue);
        for (const auto &c : p.containers) {
            Json::Value cj(Json::objectValue);
            cj["name"] = c.name;
            cj["startTime"] = rfc3339_ms(c.start_ms);
            cj["cpu"] = cpu_json(c.use, s.time_ms);
            cj["memory"] = memory_json(c.use, s.time_ms);
            if (c.logs) cj["logs"] = fs_json(s.fs, &*c.logs, s.time_ms);
            cs.append(cj);
        }
        j["containers"] = cs;
        j["cpu"] = cpu_json(p.use, s.time_ms);
        j["memory"] = memory_json(p.use, s.time_ms);
        if (p.ephemeral) j["ephemeral-storage"] = fs_json(s.fs, &*p.ephemeral, s.time_ms);
        pods.append(j);
    }
    Json::Value v(Json::objectValue);
    v["node"] = node;
    v["pods"] = pods;
    return json::write(v);
}

}  // namespace sk
