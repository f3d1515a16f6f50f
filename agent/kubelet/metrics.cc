#include "agent/kubelet/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sk {
namespace {

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; labels the same without ':'
// and not starting with "__" (reserved).
bool valid_name(const std::string &s, bool label) {
    if (s.empty() || (label && s.compare(0, 2, "__") == 0)) return false;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        bool alpha =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

std::string escape_help(const std::string &s) {
    std::string out;
    for (char c : s) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

const char *type_name(MetricsRegistry::Kind k) {
    switch (k) {
        case MetricsRegistry::Kind::Counter:
            return "counter";
        case MetricsRegistry::Kind::Gauge:
            return "gauge";
        default:
            return "histogram";
    }
}

// {a="x",b="y"} (with an optional extra label such as le); "" when empty.
std::string label_set(const std::vector<std::string> &names, const std::vector<std::string> &values,
                      const char *extra_name = nullptr, const std::string &extra_value = {}) {
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) {
        s += s.empty() ? "{" : ",";
        s += names[i] + "=\"" + escape_label_value(values[i]) + "\"";
    }
    if (extra_name) {
        s += s.empty() ? "{" : ",";
        s += std::string(extra_name) + "=\"" + extra_value + "\"";
    }
    if (!s.empty()) s += "}";
    return s;
}

}  // namespace

std::string format_metric_value(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    char buf[64];
    if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
        snprintf(buf, sizeof buf, "%.0f", v);
        return buf;
    }
    for (int prec = 1; prec <= 17; ++prec) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

std::string escape_label_value(std::string_view v) {
    std::string out;
    for (char c : v) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

Status MetricsRegistry::add(Family f) {
    if (!valid_name(f.name, false))
        return fail(Error::InvalidArgument, "invalid metric name '" + f.name + "'");
    for (const auto &l : f.label_names)
        if (!valid_name(l, true) || (f.kind == Kind::Histogram && l == "le"))
            return fail(Error::InvalidArgument,
                        "invalid label name '" + l + "' for metric " + f.name);
    if (f.kind == Kind::Histogram) {
        if (f.buckets.empty())
            return fail(Error::InvalidArgument, "histogram " + f.name + " needs buckets");
        for (size_t i = 1; i < f.buckets.size(); ++i)
            if (!(f.buckets[i] > f.buckets[i - 1]))
                return fail(Error::InvalidArgument,
                            "histogram " + f.name + ": buckets must increase");
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto &g : families_)
        if (g->name == f.name)
            return fail(Error::InvalidArgument, "metric " + f.name + " declared twice");
    auto fam = std::make_unique<Family>(std::move(f));
    // A family without labels has exactly one series, shown from the start.
    if (fam->label_names.empty()) {
        Series &s = fam->series[{}];
        s.counts.assign(fam->buckets.size(), 0);
    }
    families_.push_back(std::move(fam));
    return {};
}

Status MetricsRegistry::add_counter(const std::string &name, const std::string &help,
                                    std::vector<std::string> label_names) {
    return add(Family{name, help, Kind::Counter, std::move(label_names), {}, {}});
}

Status MetricsRegistry::add_gauge(const std::string &name, const std::string &help,
                                  std::vector<std::string> label_names) {
    return add(Family{name, help, Kind::Gauge, std::move(label_names), {}, {}});
}

Status MetricsRegistry::add_histogram(const std::string &name, const std::string &help,
                                      std::vector<double> buckets,
                                      std::vector<std::string> label_names) {
    return add(Family{name, help, Kind::Histogram, std::move(label_names), std::move(buckets), {}});
}

// Called with mu_ held.
MetricsRegistry::Series *MetricsRegistry::series_for(const std::string &name, Kind kind,
                                                     const std::vector<std::string> &values) {
    for (auto &f : families_) {
        if (f->name != name) continue;
        if (f->kind != kind || f->label_names.size() != values.size()) return nullptr;
        auto it = f->series.find(values);
        if (it == f->series.end()) {
            it = f->series.emplace(values, Series{}).first;
            it->second.counts.assign(f->buckets.size(), 0);
        }
        return &it->second;
    }
    return nullptr;
}

bool MetricsRegistry::inc(const std::string &name, const std::vector<std::string> &values,
                          double by) {
    if (!(by >= 0)) return false;
    std::lock_guard<std::mutex> lock(mu_);
    Series *s = series_for(name, Kind::Counter, values);
    if (!s) return false;
    s->value += by;
    return true;
}

bool MetricsRegistry::set(const std::string &name, const std::vector<std::string> &values,
                          double v) {
    std::lock_guard<std::mutex> lock(mu_);
    Series *s = series_for(name, Kind::Gauge, values);
    if (!s) return false;
    s->value = v;
    return true;
}

bool MetricsRegistry::observe(const std::string &name, const std::vector<std::string> &values,
                              double v) {
    std::lock_guard<std::mutex> lock(mu_);
    Family *fam = nullptr;
    for (auto &f : families_)
        if (f->name == name) fam = f.get();
    Series *s = series_for(name, Kind::Histogram, values);
    if (!s || !fam) return false;
    for (size_t i = 0; i < fam->buckets.size(); ++i) {
        if (v <= fam->buckets[i]) {
            ++s->counts[i];
            break;
        }
    }
    ++s->count;
    s->sum += v;
    return true;
}

void MetricsRegistry::render_family(const Family &f, std::string *out) const {
    *out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
    *out += "# TYPE " + f.name + " " + type_name(f.kind) + "\n";
    for (const auto &[values, s] : f.series) {
        if (f.kind != Kind::Histogram) {
            *out += f.name + label_set(f.label_names, values) + " " + format_metric_value(s.value) +
                    "\n";
            continue;
        }
        uint64_t cumulative = 0;
        for (size_t i = 0; i < f.buckets.size(); ++i) {
            cumulative += s.counts[i];
            *out += f.name + "_bucket" +
                    label_set(f.label_names, values, "le", format_metric_value(f.buckets[i])) +
                    " " + std::to_string(cumulative) + "\n";
        }
        *out += f.name + "_bucket" + label_set(f.label_names, values, "le", "+Inf") + " " +
                std::to_string(s.count) + "\n";
        *out += f.name + "_sum" + label_set(f.label_names, values) + " " +
                format_metric_value(s.sum) + "\n";
        *out += f.name + "_count" + label_set(f.label_names, values) + " " +
                std::to_string(s.count) + "\n";
    }
}

std::string MetricsRegistry::render() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto &f : families_)
        render_family(*f, &out);
    return out;
}

// ---- the agent's set ----

const std::vector<double> AgentMetrics::kLatencyBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                           0.5,   1,    2.5,   5,    10};

AgentMetrics::AgentMetrics() {
    // Fixed names and buckets: these cannot fail.
    (void)registry_.add_counter("slurm_k8s_api_requests_total",
                                "Kubernetes API requests by verb and HTTP status code "
                                "(0: no response).",
                                {"verb", "code"});
    (void)registry_.add_counter("slurm_k8s_watch_restarts_total",
                                "Pod/node watches restarted (stream ended, error or 410 Gone).",
                                {"resource"});
    (void)registry_.add_gauge("slurm_k8s_pods", "Pods on this node's virtual nodes by phase.",
                              {"phase"});
    (void)registry_.add_histogram("slurm_k8s_node_registration_duration_seconds",
                                  "From a register request to the Node posted Ready.",
                                  kLatencyBuckets);
    (void)registry_.add_histogram("slurm_k8s_pod_start_duration_seconds",
                                  "From a pod bound to this node to Running posted.",
                                  kLatencyBuckets);
    (void)registry_.add_histogram(
        "slurm_k8s_pod_running_duration_seconds",
        "From a pod bound to this node to its runtime reporting it Running (no API write in it).",
        kLatencyBuckets);
    (void)registry_.add_gauge("slurm_k8s_api_credential_accepted",
                              "1 while the API server accepts the agent's credential, 0 once it "
                              "answered 401 to it (until it accepts one again).");
    (void)registry_.add_counter("slurm_k8s_api_credential_reloads_total",
                                "New credentials taken from their source (a token file that "
                                "changed, an exec plugin's new token or certificate).");
    (void)registry_.add_gauge("slurm_k8s_api_credential_expiry_timestamp_seconds",
                              "When the agent's credential expires (a token's exp claim, an "
                              "exec plugin's expirationTimestamp); 0 = unknown.");
    set_pods({});
    registry_.set("slurm_k8s_api_credential_accepted", {}, 1);
    registry_.inc("slurm_k8s_api_credential_reloads_total", {}, 0);
    registry_.set("slurm_k8s_api_credential_expiry_timestamp_seconds", {}, 0);
}

void AgentMetrics::api_credential(bool accepted) {
    registry_.set("slurm_k8s_api_credential_accepted", {}, accepted ? 1 : 0);
}

void AgentMetrics::api_credential_reloaded() {
    registry_.inc("slurm_k8s_api_credential_reloads_total");
}

void AgentMetrics::api_credential_expiry(int64_t unix_s) {
    registry_.set("slurm_k8s_api_credential_expiry_timestamp_seconds", {},
                  static_cast<double>(unix_s));
}

void AgentMetrics::api_request(const std::string &verb, int code) {
    registry_.inc("slurm_k8s_api_requests_total", {verb, std::to_string(code)});
}

void AgentMetrics::watch_restart(const std::string &resource) {
    registry_.inc("slurm_k8s_watch_restarts_total", {resource});
}

void AgentMetrics::set_pods(const std::map<std::string, int64_t> &by_phase) {
    static const char *const kPhases[] = {"Pending", "Running", "Succeeded", "Failed", "Unknown"};
    for (const char *p : kPhases) {
        auto it = by_phase.find(p);
        registry_.set("slurm_k8s_pods", {p}, it == by_phase.end() ? 0.0 : double(it->second));
    }
}

void AgentMetrics::node_registered(double seconds) {
    registry_.observe("slurm_k8s_node_registration_duration_seconds", {}, seconds);
}

void AgentMetrics::pod_started(double seconds) {
    registry_.observe("slurm_k8s_pod_start_duration_seconds", {}, seconds);
}

void AgentMetrics::pod_running(double seconds) {
    registry_.observe("slurm_k8s_pod_running_duration_seconds", {}, seconds);
}

// ---- endpoint ----

MetricsEndpoint::MetricsEndpoint(std::function<std::string()> render, std::string bind_address,
                                 uint16_t port)
    : render_(std::move(render)),
      http_(
          [&] {
              HttpServerConfig c;
              c.name = "metrics";
              c.bind_address = std::move(bind_address);
              c.port = port;
              c.max_connections = 8;
              return c;
          }(),
          [this](const HttpRequest &r) { return handle(r); }) {}

Status MetricsEndpoint::start() {
    return http_.start();
}
void MetricsEndpoint::stop() {
    http_.stop();
}

HttpResponse MetricsEndpoint::handle(const HttpRequest &req) const {
    if (req.path != "/metrics") return http_text(404, "404 page not found\n");
    if (req.method != "GET") return http_text(405, "405 method not allowed\n");
    HttpResponse r = http_text(200, render_());
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return r;
}

}  // namespace sk
