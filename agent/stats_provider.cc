#include "agent/stats_provider.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/fs.h"
#include "common/log.h"

namespace sk::agent {

namespace {

// /proc/net/dev is about 130 bytes a line: room for thousands of interfaces.
constexpr size_t kMaxProcNetBytes = size_t{1} << 20;

}  // namespace

Result<FsFigures> measure_fs(const std::string &state_dir) {
    int fd = open(state_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return fail(err == ENOENT ? Error::NotFound : Error::Io,
                    state_dir + ": " + std::string(strerror(err)));
    }
    struct statvfs v;
    int rc = fstatvfs(fd, &v);
    int err = errno;
    close(fd);
    if (rc != 0) return fail(Error::Io, state_dir + ": fstatvfs: " + std::string(strerror(err)));
    return fs_figures(v.f_frsize, v.f_blocks, v.f_bfree, v.f_bavail, v.f_files, v.f_ffree);
}

Result<NetworkFigures> measure_network(const std::string &proc_net) {
    auto dev = read_file(proc_net + "/dev", kMaxProcNetBytes);
    if (!dev) return dev.failure();
    NetworkFigures n;
    n.interfaces = parse_net_dev(*dev);
    if (auto route = read_file(proc_net + "/route", kMaxProcNetBytes))
        n.default_name = default_route_interface(*route);
    return n;
}

AgentStatsProvider::AgentStatsProvider(uv_loop_t *loop, Nodes nodes, int timeout_ms)
    : loop_(loop), nodes_(std::move(nodes)), timeout_ms_(timeout_ms) {}

AgentStatsProvider::~AgentStatsProvider() {
    close();
}

Status AgentStatsProvider::start() {
    return calls_.start();
}

void AgentStatsProvider::close() {
    calls_.close("the agent is stopping");
}

Result<NodeUsageSample> AgentStatsProvider::sample() {
    std::weak_ptr<AgentStatsProvider> self = weak_from_this();
    return calls_.call(
        [self](const LoopCalls<NodeUsageSample>::Done &done) {
            if (auto me = self.lock())
                me->serve(done);
            else
                done(fail(Error::Unavailable, "the agent is stopping"));
        },
        timeout_ms_,
        "the node's shim did not answer pod_stats within " + std::to_string(timeout_ms_ / 1000) +
            " s",
        "the agent is not serving stats");
}

void AgentStatsProvider::serve(const LoopCalls<NodeUsageSample>::Done &done) {
    std::vector<NodeRuntimeRef> nodes = nodes_ ? nodes_() : std::vector<NodeRuntimeRef>{};
    if (nodes.empty())
        return done(fail(Error::NotFound, "no virtual node is registered on this host"));
    if (nodes.size() > 1)
        return done(
            fail(Error::NotFound, "stats are per virtual node, and this kubelet port serves the " +
                                      std::to_string(nodes.size()) +
                                      " virtual nodes of this host: set kubelet_node_ports in "
                                      "agent.conf to give each node a port of its own"));
    const NodeRuntimeRef &n = nodes[0];
    if (!n.runtime)
        return done(fail(Error::Unavailable,
                         "node " + n.node_name + ": no shim is attached to measure it"));
    std::string name = n.node_name;
    std::string state_dir = n.state_dir;
    int64_t start_ms = n.registered_at_s * 1000;
    std::weak_ptr<AgentStatsProvider> self = weak_from_this();
    n.runtime->stats([self, done, name, state_dir, start_ms](Result<proto::PodStatsReply> r) {
        auto me = self.lock();
        if (!me) return done(fail(Error::Unavailable, "the agent is stopping"));
        if (!r) return done(fail(r.error(), "node " + name + ": pod_stats: " + r.message()));
        auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
        NodeUsageSample s = usage_sample(name, start_ms, now, *r);
        if (!state_dir.empty()) {
            if (auto fs = measure_fs(state_dir))
                s.fs = *fs;
            else
                LOG_DEBUG("[node %s] stats: no fs figures: %s", name.c_str(), fs.message().c_str());
        }
        if (auto net = measure_network())
            s.network = std::move(*net);
        else
            LOG_DEBUG("[node %s] stats: no network figures: %s", name.c_str(),
                      net.message().c_str());
        me->rates_[name].apply(&s);
        done(std::move(s));
    });
    // Nodes that are gone keep no rates.
    for (auto it = rates_.begin(); it != rates_.end();)
        it = it->first == name ? std::next(it) : rates_.erase(it);
}

}  // namespace sk::agent
