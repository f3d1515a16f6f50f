// agent/kubelet/metrics: the exact Prometheus text an admin's scraper reads.
#include <string>
#include <thread>
#include <vector>

#include "agent/kubelet/metrics.h"
#include "tests/unit/check_main.h"

using namespace sk;

struct ValueCase {
    double v;
    const char *want;
};
static const ValueCase kValues[] = {
    {0, "0"},
    {3, "3"},
    {-2, "-2"},
    {0.25, "0.25"},
    {0.1, "0.1"},
    {0.005, "0.005"},
    {2.5, "2.5"},
    {1e20, "1e+20"},
    {1.0 / 3, "0.3333333333333333"},
    {HUGE_VAL, "+Inf"},
    {-HUGE_VAL, "-Inf"},
    {NAN, "NaN"},
};
START_TEST(value_format) {
    ck_assert_sstr_eq(format_metric_value(kValues[_i].v), kValues[_i].want);
}
END_TEST

START_TEST(label_escaping) {
    ck_assert_sstr_eq(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    MetricsRegistry r;
    ck_assert(r.add_gauge("g", "help with \\ and\nnewline", {"path"}).ok());
    ck_assert(r.set("g", {"/x\"y"}, 1));
    ck_assert_sstr_eq(r.render(),
                      "# HELP g help with \\\\ and\\nnewline\n"
                      "# TYPE g gauge\n"
                      "g{path=\"/x\\\"y\"} 1\n");
}
END_TEST

struct DeclCase {
    const char *name;
    std::vector<std::string> labels;
    std::vector<double> buckets;  // empty: a counter
    const char *err;              // nullptr: ok
};
static const DeclCase kDecls[] = {
    {"ok_total", {"verb"}, {}, nullptr},
    {"ns:sub_total", {}, {}, nullptr},
    {"", {}, {}, "invalid metric name"},
    {"9lives", {}, {}, "invalid metric name"},
    {"has-dash", {}, {}, "invalid metric name"},
    {"x", {"bad-label"}, {}, "invalid label name 'bad-label'"},
    {"x", {"__reserved"}, {}, "invalid label name"},
    {"x", {"a:b"}, {}, "invalid label name"},
    {"h", {}, {1, 2}, nullptr},
    {"h", {"le"}, {1, 2}, "invalid label name 'le'"},
    {"h", {}, {2, 1}, "buckets must increase"},
    {"h", {}, {1, 1}, "buckets must increase"},
};
START_TEST(declarations) {
    const auto &c = kDecls[_i];
    MetricsRegistry r;
    Status st = c.buckets.empty() ? r.add_counter(c.name, "h", c.labels)
                                  : r.add_histogram(c.name, "h", c.buckets, c.labels);
    if (!c.err) {
        ck_assert_msg(st.ok(), "%s: %s", c.name, st.ok() ? "" : st.message().c_str());
        return;
    }
    ck_assert_msg(!st.ok(), "%s should be refused", c.name);
    ck_assert_msg(st.message().find(c.err) != std::string::npos, "%s", st.message().c_str());
}
END_TEST

START_TEST(duplicate_and_misuse) {
    MetricsRegistry r;
    ck_assert(r.add_counter("c_total", "c", {"a"}).ok());
    Status dup = r.add_gauge("c_total", "again");
    ck_assert(!dup.ok());
    ck_assert(dup.message().find("declared twice") != std::string::npos);
    ck_assert(!r.inc("nope_total", {"x"}));      // unknown family
    ck_assert(!r.inc("c_total", {}));            // wrong label count
    ck_assert(!r.inc("c_total", {"x"}, -1));     // counters only go up
    ck_assert(!r.set("c_total", {"x"}, 5));      // kind mismatch
    ck_assert(!r.observe("c_total", {"x"}, 5));  // kind mismatch
    ck_assert_sstr_eq(r.render(), "# HELP c_total c\n# TYPE c_total counter\n");
}
END_TEST

START_TEST(labelled_histogram_text) {
    MetricsRegistry r;
    ck_assert(r.add_histogram("lat_seconds", "latency", {0.1, 1}, {"op"}).ok());
    ck_assert(r.observe("lat_seconds", {"get"}, 0.0625));
    ck_assert(r.observe("lat_seconds", {"get"}, 0.1));  // le is inclusive
    ck_assert(r.observe("lat_seconds", {"get"}, 0.5));
    ck_assert(r.observe("lat_seconds", {"get"}, 7));
    ck_assert(r.observe("lat_seconds", {"del"}, 0.25));
    ck_assert_sstr_eq(r.render(),
                      "# HELP lat_seconds latency\n"
                      "# TYPE lat_seconds histogram\n"
                      "lat_seconds_bucket{op=\"del\",le=\"0.1\"} 0\n"
                      "lat_seconds_bucket{op=\"del\",le=\"1\"} 1\n"
                      "lat_seconds_bucket{op=\"del\",le=\"+Inf\"} 1\n"
                      "lat_seconds_sum{op=\"del\"} 0.25\n"
                      "lat_seconds_count{op=\"del\"} 1\n"
                      "lat_seconds_bucket{op=\"get\",le=\"0.1\"} 2\n"
                      "lat_seconds_bucket{op=\"get\",le=\"1\"} 3\n"
                      "lat_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"
                      "lat_seconds_sum{op=\"get\"} 7.6625\n"
                      "lat_seconds_count{op=\"get\"} 4\n");
}
END_TEST

START_TEST(agent_metrics_text) {
    AgentMetrics m;
    m.api_request("PATCH", 200);
    m.api_request("PATCH", 200);
    m.api_request("GET", 404);
    m.api_request("POST", 0);
    m.watch_restart("pods");
    m.set_pods({{"Running", 3}, {"Pending", 1}});
    m.node_registered(0.012);
    m.pod_started(0.0390625);
    m.pod_started(0.3125);
    m.pod_running(0.0078125);
    std::string want =
        "# HELP slurm_k8s_api_requests_total Kubernetes API requests by verb and HTTP status code "
        "(0: no response).\n"
        "# TYPE slurm_k8s_api_requests_total counter\n"
        "slurm_k8s_api_requests_total{verb=\"GET\",code=\"404\"} 1\n"
        "slurm_k8s_api_requests_total{verb=\"PATCH\",code=\"200\"} 2\n"
        "slurm_k8s_api_requests_total{verb=\"POST\",code=\"0\"} 1\n"
        "# HELP slurm_k8s_watch_restarts_total Pod/node watches restarted (stream ended, error or "
        "410 Gone).\n"
        "# TYPE slurm_k8s_watch_restarts_total counter\n"
        "slurm_k8s_watch_restarts_total{resource=\"pods\"} 1\n"
        "# HELP slurm_k8s_pods Pods on this node's virtual nodes by phase.\n"
        "# TYPE slurm_k8s_pods gauge\n"
        "slurm_k8s_pods{phase=\"Failed\"} 0\n"
        "slurm_k8s_pods{phase=\"Pending\"} 1\n"
        "slurm_k8s_pods{phase=\"Running\"} 3\n"
        "slurm_k8s_pods{phase=\"Succeeded\"} 0\n"
        "slurm_k8s_pods{phase=\"Unknown\"} 0\n"
        "# HELP slurm_k8s_node_registration_duration_seconds From a register request to the Node "
        "posted Ready.\n"
        "# TYPE slurm_k8s_node_registration_duration_seconds histogram\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"0.005\"} 0\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"0.01\"} 0\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"0.025\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"0.05\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"0.1\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"0.25\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"0.5\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"1\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"2.5\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"5\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"10\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_bucket{le=\"+Inf\"} 1\n"
        "slurm_k8s_node_registration_duration_seconds_sum 0.012\n"
        "slurm_k8s_node_registration_duration_seconds_count 1\n"
        "# HELP slurm_k8s_pod_start_duration_seconds From a pod bound to this node to Running "
        "posted.\n"
        "# TYPE slurm_k8s_pod_start_duration_seconds histogram\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"0.005\"} 0\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"0.01\"} 0\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"0.025\"} 0\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"0.05\"} 1\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"0.1\"} 1\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"0.25\"} 1\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"0.5\"} 2\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"1\"} 2\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"2.5\"} 2\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"5\"} 2\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"10\"} 2\n"
        "slurm_k8s_pod_start_duration_seconds_bucket{le=\"+Inf\"} 2\n"
        "slurm_k8s_pod_start_duration_seconds_sum 0.3515625\n"
        "slurm_k8s_pod_start_duration_seconds_count 2\n"
        "# HELP slurm_k8s_pod_running_duration_seconds From a pod bound to this node to its "
        "runtime reporting it Running (no API write in it).\n"
        "# TYPE slurm_k8s_pod_running_duration_seconds histogram\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"0.005\"} 0\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"0.01\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"0.025\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"0.05\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"0.1\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"0.25\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"0.5\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"1\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"2.5\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"5\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"10\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_bucket{le=\"+Inf\"} 1\n"
        "slurm_k8s_pod_running_duration_seconds_sum 0.0078125\n"
        "slurm_k8s_pod_running_duration_seconds_count 1\n"
        "# HELP slurm_k8s_api_credential_accepted 1 while the API server accepts the agent's "
        "credential, 0 once it answered 401 to it (until it accepts one again).\n"
        "# TYPE slurm_k8s_api_credential_accepted gauge\n"
        "slurm_k8s_api_credential_accepted 1\n"
        "# HELP slurm_k8s_api_credential_reloads_total New credentials taken from their source (a "
        "token file that changed, an exec plugin's new token or certificate).\n"
        "# TYPE slurm_k8s_api_credential_reloads_total counter\n"
        "slurm_k8s_api_credential_reloads_total 0\n"
        "# HELP slurm_k8s_api_credential_expiry_timestamp_seconds When the agent's credential "
        "expires (a token's exp claim, an exec plugin's expirationTimestamp); 0 = unknown.\n"
        "# TYPE slurm_k8s_api_credential_expiry_timestamp_seconds gauge\n"
        "slurm_k8s_api_credential_expiry_timestamp_seconds 0\n";
    ck_assert_sstr_eq(m.render(), want);
    // set_pods replaces: a phase no longer reported drops to 0.
    m.set_pods({{"Succeeded", 4}});
    std::string text = m.render();
    ck_assert(text.find("slurm_k8s_pods{phase=\"Running\"} 0\n") != std::string::npos);
    ck_assert(text.find("slurm_k8s_pods{phase=\"Succeeded\"} 4\n") != std::string::npos);
}
END_TEST

START_TEST(concurrent_updates_are_all_counted) {
    AgentMetrics m;
    std::vector<std::thread> threads;
    threads.reserve(4);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 10000; ++i) {
                m.api_request("GET", 200);
                if (i % 100 == 0) (void)m.render();
            }
        });
    for (auto &t : threads)
        t.join();
    ck_assert(m.render().find("slurm_k8s_api_requests_total{verb=\"GET\",code=\"200\"} 40000\n") !=
              std::string::npos);
}
END_TEST

START_TEST(endpoint_routes) {
    MetricsEndpoint ep([] { return std::string("x 1\n"); }, "127.0.0.1", 0);
    HttpRequest req;
    req.method = "GET";
    req.path = "/metrics";
    HttpResponse r = ep.handle(req);
    ck_assert_int_eq(r.status, 200);
    ck_assert_sstr_eq(r.body, "x 1\n");
    ck_assert_sstr_eq(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    req.path = "/";
    ck_assert_int_eq(ep.handle(req).status, 404);
    req.path = "/metrics";
    req.method = "DELETE";
    ck_assert_int_eq(ep.handle(req).status, 405);
}
END_TEST

START_TEST(endpoint_serves_over_http) {
    AgentMetrics m;
    m.watch_restart("nodes");
    MetricsEndpoint ep([&m] { return m.render(); }, "127.0.0.1", 0);
    ck_assert(ep.start().ok());
    ck_assert_uint_gt(ep.port(), 0);
    std::string cmd =
        "curl -sS --max-time 5 http://127.0.0.1:" + std::to_string(ep.port()) + "/metrics 2>&1";
    // NOLINTNEXTLINE(cert-env33-c): the test drives the real curl client; the command is fixed
    FILE *p = popen(cmd.c_str(), "r");
    ck_assert_ptr_nonnull(p);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        out.append(buf, n);
    int rc = pclose(p);
    ep.stop();
    if (rc != 0 && out.find("not found") != std::string::npos) return;  // no curl here
    ck_assert_msg(rc == 0, "curl: %s", out.c_str());
    ck_assert_sstr_eq(out, m.render());
}
END_TEST

int main(void) {
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("exposition");
    tcase_add_loop_test(tc, value_format, 0, TABLE_SIZE(kValues));
    tcase_add_test(tc, label_escaping);
    tcase_add_loop_test(tc, declarations, 0, TABLE_SIZE(kDecls));
    tcase_add_test(tc, duplicate_and_misuse);
    tcase_add_test(tc, labelled_histogram_text);
    tcase_add_test(tc, agent_metrics_text);
    tcase_add_test(tc, concurrent_updates_are_all_counted);
    suite_add_tcase(s, tc);
    tc = tcase_create("endpoint");
    tcase_add_test(tc, endpoint_routes);
    tcase_add_test(tc, endpoint_serves_over_http);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
