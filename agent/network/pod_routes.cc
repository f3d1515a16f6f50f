#include "agent/network/pod_routes.h"

#include <arpa/inet.h>

#include <utility>

#include "agent/network/cni.h"
#include "common/daemons/json.h"
#include "common/log.h"
#include "uv/command_runner.h"

namespace sk::agent {

namespace {

bool ipv4(const std::string &a) {
    struct in_addr x {};
    return inet_pton(AF_INET, a.c_str(), &x) == 1;
}

constexpr uint64_t kIpTimeoutMs = 10000;

}  // namespace

std::map<std::string, std::string> routes_from_nodes(const Json::Value &nodes,
                                                     const std::string &own_cidr,
                                                     const std::string &own_address,
                                                     std::vector<std::string> *conflicts) {
    std::map<std::string, std::pair<std::string, std::string>> by_cidr;  // cidr -> (name, via)
    if (!nodes.isArray()) return {};
    for (const auto &n : nodes) {
        const Json::Value &spec = n["spec"];
        std::string cidr = spec["podCIDR"].isString() ? spec["podCIDR"].asString() : "";
        if (cidr.empty() || cidr == own_cidr || !subnet_error(cidr).empty()) continue;
        std::string via;
        for (const auto &a : n["status"]["addresses"])
            if (a["type"].asString() == "InternalIP" && ipv4(a["address"].asString())) {
                via = a["address"].asString();
                break;
            }
        if (via.empty() || via == own_address) continue;
        std::string name = n["metadata"]["name"].asString();
        auto it = by_cidr.find(cidr);
        if (it == by_cidr.end()) {
            by_cidr[cidr] = {name, via};
        } else if (it->second.second != via) {
            if (conflicts)
                conflicts->push_back(cidr + " is claimed by " + it->second.first + " (" +
                                     it->second.second + ") and " + name + " (" + via + ")");
            if (name < it->second.first) it->second = {name, via};
        }
    }
    std::map<std::string, std::string> out;
    for (const auto &[cidr, v] : by_cidr)
        out[cidr] = v.second;
    return out;
}

std::vector<std::vector<std::string>> route_commands(
    const std::map<std::string, std::string> &have,
    const std::map<std::string, std::string> &want) {
    std::vector<std::vector<std::string>> v;
    const std::string proto = std::to_string(kRouteProtocol);
    for (const auto &[cidr, via] : have)
        if (!want.count(cidr)) v.push_back({"ip", "route", "del", cidr, "proto", proto});
    for (const auto &[cidr, via] : want) {
        auto it = have.find(cidr);
        if (it == have.end() || it->second != via)
            v.push_back({"ip", "route", "replace", cidr, "via", via, "proto", proto});
    }
    return v;
}

void PodRoutes::start(const std::function<void()> &done) {
    running_ = true;
    run_program_async(loop_, {"ip", "-j", "route", "show", "proto", std::to_string(kRouteProtocol)},
                      {}, kIpTimeoutMs, [this, done](const CommandResult &r) {
                          running_ = false;
                          auto routes =
                              r.ran && r.exit_code == 0
                                  ? json::parse(r.output)
                                  : Result<Json::Value>(fail(Error::Io, r.error + r.errors));
                          if (routes && routes->isArray())
                              for (const auto &e : *routes)
                                  if (e["dst"].isString() && e["gateway"].isString())
                                      have_[e["dst"].asString()] = e["gateway"].asString();
                          if (!have_.empty())
                              LOG_INFO("pod routes: %zu from before the start", have_.size());
                          if (done) done();
                          pump();
                      });
}

void PodRoutes::set(std::map<std::string, std::string> want) {
    want_ = std::move(want);
    dirty_ = true;
    pump();
}

void PodRoutes::pump() {
    if (running_ || !dirty_) return;
    auto cmds = route_commands(have_, want_);
    if (cmds.empty()) {
        dirty_ = false;
        return;
    }
    running_ = true;
    auto cmd = cmds.front();
    run_program_async(loop_, cmd, {}, kIpTimeoutMs, [this, cmd](const CommandResult &r) {
        running_ = false;
        const std::string &cidr = cmd[3];
        bool ok = r.ran && r.exit_code == 0;
        if (cmd[2] == "del") {
            // Gone already counts as done.
            if (!ok) LOG_VERBOSE("pod routes: del %s: %s", cidr.c_str(), r.errors.c_str());
            have_.erase(cidr);
        } else if (ok) {
            have_[cidr] = cmd[5];
            LOG_INFO("pod routes: %s via %s", cidr.c_str(), cmd[5].c_str());
        } else {
            // Not retried in a loop: the next change of the Nodes tries again.
            LOG_WARN("pod routes: %s via %s: %s", cidr.c_str(), cmd[5].c_str(),
                     (r.errors.empty() ? r.error : r.errors).c_str());
            want_.erase(cidr);
        }
        pump();
    });
}

}  // namespace sk::agent
