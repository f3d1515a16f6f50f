// What the controllers report for metrics (agent/kubelet/metrics.h renders them).
// Plain callbacks so the controllers need neither the metrics registry nor
// the HTTP server; every member may be empty. Called on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace sk::agent {

struct AgentObserver {
    std::function<void(const std::string &resource)> watch_restart;
    std::function<void(double seconds)> node_registered;  // register -> Node Ready posted
    std::function<void(double seconds)> pod_started;      // pod seen -> Running posted
    std::function<void(double seconds)> pod_running;      // pod seen -> the runtime says Running
    std::function<void(const std::map<std::string, int64_t> &by_phase)> pods;
};

}  // namespace sk::agent
