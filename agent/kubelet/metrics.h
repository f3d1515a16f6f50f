// Prometheus text exposition (format 0.0.4): counters, gauges and histograms
// with fixed buckets, with labels. Thread-safe (one mutex): the agent's loop
// updates, the /metrics endpoint renders from an HTTP thread. Pure: no I/O;
// MetricsEndpoint is the thin HTTP edge.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/kubelet/http_server.h"
#include "common/result.h"

namespace sk {

// "3", "0.25", "1e+20", "+Inf", "NaN": integers without a fraction, other
// values in the shortest form that reads back to the same double.
std::string format_metric_value(double v);
// Escapes '\\', '"' and newlines as the exposition format requires.
std::string escape_label_value(std::string_view v);

class MetricsRegistry {
  public:
    enum class Kind { Counter, Gauge, Histogram };

    // Families are declared once, before use; rendered in declaration order.
    // InvalidArgument for a bad metric or label name, a duplicate family,
    // or histogram buckets that are empty or not strictly increasing.
    Status add_counter(const std::string &name, const std::string &help,
                       std::vector<std::string> label_names = {});
    Status add_gauge(const std::string &name, const std::string &help,
                     std::vector<std::string> label_names = {});
    Status add_histogram(const std::string &name, const std::string &help,
                         std::vector<double> buckets, std::vector<std::string> label_names = {});

    // Updates take label values in the order of the family's label names.
    // They never fail loudly (hot path): false for an unknown family, a kind
    // mismatch, a wrong number of label values, or a negative counter step.
    bool inc(const std::string &name, const std::vector<std::string> &label_values = {},
             double by = 1);
    bool set(const std::string &name, const std::vector<std::string> &label_values, double v);
    bool observe(const std::string &name, const std::vector<std::string> &label_values, double v);

    std::string render() const;

  private:
    struct Series {
        double value = 0;              // counter, gauge
        std::vector<uint64_t> counts;  // histogram: per bucket (not cumulative)
        uint64_t count = 0;
        double sum = 0;
    };
    struct Family {
        std::string name, help;
        Kind kind;
        std::vector<std::string> label_names;
        std::vector<double> buckets;
        std::map<std::vector<std::string>, Series> series;
    };
    Status add(Family f);
    Series *series_for(const std::string &name, Kind kind, const std::vector<std::string> &values);
    void render_family(const Family &f, std::string *out) const;

    mutable std::mutex mu_;
    std::vector<std::unique_ptr<Family>> families_;
};

// The agent's metrics (names are part of the admin docs):
//   slurm_k8s_api_requests_total{verb,code}         counter
//   slurm_k8s_watch_restarts_total{resource}        counter
//   slurm_k8s_pods{phase}                           gauge (all five phases)
//   slurm_k8s_node_registration_duration_seconds    histogram (register -> Node Ready)
//   slurm_k8s_pod_start_duration_seconds            histogram (bound -> Running posted)
//   slurm_k8s_pod_running_duration_seconds          histogram (bound -> the runtime's Running:
//                                                   the node's own part, no API write in it)
//   slurm_k8s_api_credential_accepted               gauge (0 after a 401, agent/kube/api_auth.h)
//   slurm_k8s_api_credential_reloads_total          counter
//   slurm_k8s_api_credential_expiry_timestamp_seconds gauge (0 = unknown)
class AgentMetrics {
  public:
    AgentMetrics();
    // verb: "GET", "POST", "PATCH", "DELETE", "WATCH"...; code: HTTP status,
    // 0 for a transport failure (rendered "0").
    void api_request(const std::string &verb, int code);
    void watch_restart(const std::string &resource);
    // Counts per phase; phases not in the map are set to 0.
    void set_pods(const std::map<std::string, int64_t> &by_phase);
    void node_registered(double seconds);
    void pod_started(double seconds);
    void pod_running(double seconds);
    void api_credential(bool accepted);
    void api_credential_reloaded();
    void api_credential_expiry(int64_t unix_s);
    std::string render() const { return registry_.render(); }
    MetricsRegistry &registry() { return registry_; }

    static const std::vector<double> kLatencyBuckets;

  private:
    MetricsRegistry registry_;
};

// GET /metrics over plain HTTP (bind to 127.0.0.1 unless the admin wants
// otherwise); everything else 404. `render` is called from an HTTP thread.
class MetricsEndpoint {
  public:
    MetricsEndpoint(std::function<std::string()> render, std::string bind_address, uint16_t port);
    Status start();
    void stop();
    uint16_t port() const { return http_.port(); }

    HttpResponse handle(const HttpRequest &req) const;  // testable without a socket

  private:
    std::function<std::string()> render_;
    HttpServer http_;
};

}  // namespace sk
