// agent/kubelet/kubelet_stats: /metrics/resource as the kubelet writes it (parsed
// back: families, HELP/TYPE, names, labels, values, timestamps),
// /stats/summary's JSON, and the CPU rates from two samples; the
// KubeletServer routes to a StatsProvider.
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "agent/kubelet/kubelet_server.h"
#include "agent/kubelet/kubelet_stats.h"
#include "common/daemons/json.h"
#include "tests/unit/check_main.h"

using namespace sk;

namespace {

struct Sample {
    bool found = false;  // find(): false when there is no such sample
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
    std::string ts;  // "" when none
};

struct Exposition {
    std::map<std::string, std::string> help, type;
    std::vector<Sample> samples;
};

// A strict reader of the text format for what the renderer writes.
Exposition parse(const std::string &text) {
    Exposition e;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        ck_assert_msg(!line.empty(), "an empty line");
        if (line.rfind("# HELP ", 0) == 0) {
            auto sp = line.find(' ', 7);
            e.help[line.substr(7, sp - 7)] = line.substr(sp + 1);
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            auto sp = line.find(' ', 7);
            e.type[line.substr(7, sp - 7)] = line.substr(sp + 1);
            continue;
        }
        Sample s;
        size_t i = line.find_first_of("{ ");
        s.name = line.substr(0, i);
        ck_assert_msg(e.type.count(s.name), "%s before its # TYPE", s.name.c_str());
        if (line[i] == '{') {
            i++;
            while (line[i] != '}') {
                auto eq = line.find('=', i);
                std::string k = line.substr(i, eq - i);
                ck_assert(line[eq + 1] == '"');
                std::string v;
                size_t j = eq + 2;
                for (; line[j] != '"'; j++) {
                    if (line[j] == '\\') {
                        j++;
                        v += line[j] == 'n' ? '\n' : line[j];
                    } else {
                        v += line[j];
                    }
                }
                s.labels[k] = v;
                i = j + 1;
                if (line[i] == ',') i++;
            }
            i++;
        }
        ck_assert(line[i] == ' ');
        std::istringstream rest(line.substr(i + 1));
        std::string value;
        rest >> value >> s.ts;
        s.value = std::stod(value);
        e.samples.push_back(s);
    }
    return e;
}

Sample find(const Exposition &e, const std::string &name,
            const std::map<std::string, std::string> &labels = {}) {
    for (const auto &s : e.samples)
        if (s.name == name && s.labels == labels) {
            Sample out = s;
            out.found = true;
            return out;
        }
    return Sample{};
}

NodeUsageSample two_pods() {
    proto::PodStatsReply r;
    r.node = {proto::StatsSource::Cgroup, 7500000000ULL, 3ULL << 30};
    r.pods.push_back({"u1", "rl", "gen", 1700000000000, {}});
    r.pods[0].containers.push_back({"main", 1700000001000, 1500000000ULL, 1000});
    r.pods[0].containers.push_back({"side", 1700000002500, 500000000ULL, 24});
    r.pods.push_back({"u2", "rl", "we\"ird\\", 1700000003000, {}});
    r.pods[1].containers.push_back({"c", 1700000003000, 2ULL, 4096});
    return usage_sample("slurm-n1-42", 1699999999000, 1700000010123, r);
}

}  // namespace

START_TEST(resource_metrics_names_and_values) {
    NodeUsageSample s = two_pods();
    Exposition e = parse(render_resource_metrics(&s));
    for (const char *c : {"node_cpu_usage_seconds_total", "pod_cpu_usage_seconds_total",
                          "container_cpu_usage_seconds_total"})
        ck_assert_sstr_eq(e.type[c], "counter");
    for (const char *g : {"node_memory_working_set_bytes", "pod_memory_working_set_bytes",
                          "container_memory_working_set_bytes", "container_start_time_seconds",
                          "resource_scrape_error", "scrape_error"}) {
        ck_assert_sstr_eq(e.type[g], "gauge");
        ck_assert_msg(!e.help[g].empty(), "%s has no HELP", g);
    }
    Sample n = find(e, "node_cpu_usage_seconds_total");
    ck_assert(n.found && n.value == 7.5);
    ck_assert_sstr_eq(n.ts, "1700000010123");  // milliseconds
    n = find(e, "node_memory_working_set_bytes");
    ck_assert(n.found && n.value == 3.0 * (1 << 30));
    Sample p = find(e, "pod_cpu_usage_seconds_total", {{"namespace", "rl"}, {"pod", "gen"}});
    ck_assert(p.found && p.value == 2.0);  // its containers' sum
    p = find(e, "pod_memory_working_set_bytes", {{"namespace", "rl"}, {"pod", "gen"}});
    ck_assert(p.found && p.value == 1024);
    // Label values are escaped and read back whole.
    p = find(e, "pod_memory_working_set_bytes", {{"namespace", "rl"}, {"pod", "we\"ird\\"}});
    ck_assert(p.found && p.value == 4096);
    Sample c = find(e, "container_cpu_usage_seconds_total",
                    {{"container", "side"}, {"namespace", "rl"}, {"pod", "gen"}});
    ck_assert(c.found && c.value == 0.5);
    ck_assert_sstr_eq(c.ts, "1700000010123");
    c = find(e, "container_memory_working_set_bytes",
             {{"container", "main"}, {"namespace", "rl"}, {"pod", "gen"}});
    ck_assert(c.found && c.value == 1000);
    c = find(e, "container_start_time_seconds",
             {{"container", "side"}, {"namespace", "rl"}, {"pod", "gen"}});
    ck_assert(c.found && c.value == 1700000002.5);
    ck_assert_sstr_eq(c.ts, "1700000002500");  // the start itself, as the kubelet stamps it
    for (const char *err : {"resource_scrape_error", "scrape_error"}) {
        Sample x = find(e, err);
        ck_assert(x.found && x.value == 0 && x.ts.empty());
    }
    ck_assert_uint_eq(e.samples.size(), 3 * 3 + 2 + 2 * 2 + 2);
}
END_TEST

START_TEST(resource_metrics_error) {
    Exposition e = parse(render_resource_metrics(nullptr));
    ck_assert(find(e, "scrape_error").found && find(e, "scrape_error").value == 1);
    ck_assert(find(e, "resource_scrape_error").found &&
              find(e, "resource_scrape_error").value == 1);
    ck_assert_uint_eq(e.samples.size(), 2);  // no figures pretended
}
END_TEST

START_TEST(summary_json) {
    NodeUsageSample s = two_pods();
    StatsRates rates;
    rates.apply(&s);  // a first sample: no rates
    auto v = json::parse(render_stats_summary(s));
    ck_assert(v.ok());
    const Json::Value &node = (*v)["node"];
    ck_assert_sstr_eq(node["nodeName"].asString(), "slurm-n1-42");
    ck_assert_sstr_eq(node["startTime"].asString(), "2023-11-14T22:13:19Z");
    ck_assert_uint_eq(node["cpu"]["usageCoreNanoSeconds"].asUInt64(), 7500000000ULL);
    ck_assert(!node["cpu"].isMember("usageNanoCores"));
    ck_assert_sstr_eq(node["cpu"]["time"].asString(), "2023-11-14T22:13:30Z");
    ck_assert_uint_eq(node["memory"]["workingSetBytes"].asUInt64(), 3ULL << 30);
    ck_assert_uint_eq((*v)["pods"].size(), 2);
    const Json::Value &p = (*v)["pods"][0];
    ck_assert_sstr_eq(p["podRef"]["name"].asString(), "gen");
    ck_assert_sstr_eq(p["podRef"]["namespace"].asString(), "rl");
    ck_assert_sstr_eq(p["podRef"]["uid"].asString(), "u1");
    ck_assert_sstr_eq(p["startTime"].asString(), "2023-11-14T22:13:20Z");
    ck_assert_uint_eq(p["cpu"]["usageCoreNanoSeconds"].asUInt64(), 2000000000ULL);
    ck_assert_uint_eq(p["memory"]["workingSetBytes"].asUInt64(), 1024);
    ck_assert_uint_eq(p["containers"].size(), 2);
    ck_assert_sstr_eq(p["containers"][1]["name"].asString(), "side");
    ck_assert_sstr_eq(p["containers"][1]["startTime"].asString(), "2023-11-14T22:13:22Z");
    ck_assert_uint_eq(p["containers"][1]["cpu"]["usageCoreNanoSeconds"].asUInt64(), 500000000ULL);
    ck_assert_uint_eq(p["containers"][1]["memory"]["workingSetBytes"].asUInt64(), 24);
}
END_TEST

START_TEST(rates_from_two_samples) {
    StatsRates rates;
    NodeUsageSample a = two_pods();
    rates.apply(&a);
    ck_assert(!a.use.nano_cores && !a.pods[0].use.nano_cores &&
              !a.pods[0].containers[0].use.nano_cores);
    // 2 s later: main used 1 s more (half a core), the node 3 s (1.5 cores).
    NodeUsageSample b = two_pods();
    b.time_ms += 2000;
    b.use.cpu_ns += 3000000000ULL;
    b.pods[0].containers[0].use.cpu_ns += 1000000000ULL;
    b.pods[0].use.cpu_ns += 1000000000ULL;
    rates.apply(&b);
    ck_assert(b.use.nano_cores == 1500000000ULL);
    ck_assert(b.pods[0].containers[0].use.nano_cores == 500000000ULL);
    ck_assert(b.pods[0].containers[1].use.nano_cores == 0ULL);
    ck_assert(b.pods[0].use.nano_cores == 500000000ULL);
    auto v = json::parse(render_stats_summary(b));
    ck_assert_uint_eq((*v)["node"]["cpu"]["usageNanoCores"].asUInt64(), 1500000000ULL);
    ck_assert_uint_eq((*v)["pods"][0]["containers"][0]["cpu"]["usageNanoCores"].asUInt64(),
                      500000000ULL);
    // A restarted container (another start) has no rate yet; a counter of
    // one instance that reads lower keeps its larger value.
    NodeUsageSample c = b;
    c.time_ms += 1000;
    c.pods[0].containers[0].start_ms += 5000;
    c.pods[0].containers[1].use.cpu_ns -= 10;
    rates.apply(&c);
    ck_assert(!c.pods[0].containers[0].use.nano_cores);
    ck_assert_uint_eq(c.pods[0].containers[1].use.cpu_ns, b.pods[0].containers[1].use.cpu_ns);
    ck_assert(c.pods[0].containers[1].use.nano_cores == 0ULL);
    // Pods and instances that are gone are forgotten.
    NodeUsageSample d = c;
    d.time_ms += 1000;
    d.pods.clear();
    rates.apply(&d);
    ck_assert_uint_eq(rates.size(), 1);
}
END_TEST

// Recorded on a host (counters enlarged past 32 bits), with an old
// kernel's line (no space after the colon) and one that does not parse.
const char kNetDev[] =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
    "drop fifo colls carrier compressed\n"
    "    lo: 5516680207 1261534    0    0    0     0          0         0 5516680207 1261534    "
    "0    0    0     0       0          0\n"
    "  eth0: 22762715000     893    7    0    0     0          0         0    55551     741    "
    "3    0    0     0       0          0\n"
    "   ib0:12 1 2 0 0 0 0 0 34 1 4 0 0 0 0 0\n"
    "  bad0: 1 2 3\n"
    "  bad1: 1 2 x 0 0 0 0 0 34 1 4 0 0 0 0 0\n";

START_TEST(net_dev_parsed) {
    auto ifs = parse_net_dev(kNetDev);
    ck_assert_uint_eq(ifs.size(), 2);  // lo left out, bad0 and bad1 skipped
    ck_assert_sstr_eq(ifs[0].name, "eth0");
    ck_assert_uint_eq(ifs[0].rx_bytes, 22762715000ULL);
    ck_assert_uint_eq(ifs[0].rx_errors, 7);
    ck_assert_uint_eq(ifs[0].tx_bytes, 55551);
    ck_assert_uint_eq(ifs[0].tx_errors, 3);
    ck_assert_sstr_eq(ifs[1].name, "ib0");
    ck_assert_uint_eq(ifs[1].rx_bytes, 12);
    ck_assert_uint_eq(ifs[1].rx_errors, 2);
    ck_assert_uint_eq(ifs[1].tx_bytes, 34);
    ck_assert_uint_eq(ifs[1].tx_errors, 4);
    ck_assert(parse_net_dev("").empty());
    std::string many;
    for (size_t i = 0; i < kMaxInterfaces + 5; i++)
        many += "d" + std::to_string(i) + ": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n";
    ck_assert_uint_eq(parse_net_dev(many).size(), kMaxInterfaces);
}
END_TEST

START_TEST(default_route_found) {
    const char *route =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT  \n"
        "eth1\t00000000\t010200C0\t0003\t0\t0\t600\t00000000\t0\t0\t0   \n"
        "eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0   \n"
        "down\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0   \n"
        "ib0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0   \n";
    ck_assert_sstr_eq(default_route_interface(route), "eth0");  // up, lowest metric
    ck_assert_sstr_eq(default_route_interface(""), "");
    ck_assert_sstr_eq(
        default_route_interface("Iface\tDestination\n"
                                "ib0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"),
        "");
}
END_TEST

START_TEST(fs_figures_from_statvfs) {
    FsFigures f = fs_figures(4096, 1000, 400, 300, 100, 60);
    ck_assert_uint_eq(f.capacity_bytes, 4096000);
    ck_assert_uint_eq(f.available_bytes, 1228800);
    ck_assert_uint_eq(f.used_bytes, 2457600);
    ck_assert_uint_eq(f.inodes, 100);
    ck_assert_uint_eq(f.inodes_free, 60);
    f = fs_figures(4096, 10, 20, 30, 5, 9);  // nonsense is cut, never wraps
    ck_assert_uint_eq(f.used_bytes, 0);
    ck_assert_uint_eq(f.available_bytes, f.capacity_bytes);
    ck_assert_uint_eq(f.inodes_free, 5);
}
END_TEST

// What the Summary adds when the disk and the network are measured: node
// fs and network, each pod's ephemeral-storage and its containers' logs
// (their use, the node fs's capacity); never an image fs, a rootfs or a
// pod network (host network).
START_TEST(summary_fs_network_and_disk) {
    NodeUsageSample s = two_pods();
    s.fs = fs_figures(4096, 1000, 400, 300, 100, 60);
    s.network = NetworkFigures{"eth0", parse_net_dev(kNetDev)};
    s.pods[0].ephemeral = proto::DiskUse{65536, 9};
    s.pods[0].containers[0].logs = proto::DiskUse{12288, 3};
    auto v = json::parse(render_stats_summary(s));
    ck_assert(v.ok());
    const Json::Value &fs = (*v)["node"]["fs"];
    ck_assert_uint_eq(fs["capacityBytes"].asUInt64(), 4096000);
    ck_assert_uint_eq(fs["availableBytes"].asUInt64(), 1228800);
    ck_assert_uint_eq(fs["usedBytes"].asUInt64(), 2457600);
    ck_assert_uint_eq(fs["inodes"].asUInt64(), 100);
    ck_assert_uint_eq(fs["inodesFree"].asUInt64(), 60);
    ck_assert_uint_eq(fs["inodesUsed"].asUInt64(), 40);
    ck_assert_sstr_eq(fs["time"].asString(), "2023-11-14T22:13:30Z");
    ck_assert(!(*v)["node"].isMember("runtime"));  // no image fs
    const Json::Value &net = (*v)["node"]["network"];
    ck_assert_sstr_eq(net["name"].asString(), "eth0");
    ck_assert_uint_eq(net["rxBytes"].asUInt64(), 22762715000ULL);
    ck_assert_uint_eq(net["rxErrors"].asUInt64(), 7);
    ck_assert_uint_eq(net["txBytes"].asUInt64(), 55551);
    ck_assert_uint_eq(net["txErrors"].asUInt64(), 3);
    ck_assert(net.isMember("time"));
    ck_assert_uint_eq(net["interfaces"].size(), 2);
    ck_assert_sstr_eq(net["interfaces"][1]["name"].asString(), "ib0");
    ck_assert_uint_eq(net["interfaces"][1]["txBytes"].asUInt64(), 34);
    const Json::Value &p = (*v)["pods"][0];
    ck_assert(!p.isMember("network"));  // host network: the node's figures
    const Json::Value &eph = p["ephemeral-storage"];
    ck_assert_uint_eq(eph["usedBytes"].asUInt64(), 65536);
    ck_assert_uint_eq(eph["inodesUsed"].asUInt64(), 9);
    ck_assert_uint_eq(eph["capacityBytes"].asUInt64(), 4096000);
    ck_assert_uint_eq(eph["availableBytes"].asUInt64(), 1228800);
    const Json::Value &logs = p["containers"][0]["logs"];
    ck_assert_uint_eq(logs["usedBytes"].asUInt64(), 12288);
    ck_assert_uint_eq(logs["inodesUsed"].asUInt64(), 3);
    ck_assert_uint_eq(logs["inodesFree"].asUInt64(), 60);
    ck_assert(!p["containers"][0].isMember("rootfs"));
    ck_assert(!p["containers"][1].isMember("logs"));  // not measured
    ck_assert(!(*v)["pods"][1].isMember("ephemeral-storage"));

    // No default route: the interfaces alone, no figures passed off as one's.
    s.network->default_name.clear();
    v = json::parse(render_stats_summary(s));
    ck_assert(!(*v)["node"]["network"].isMember("name"));
    ck_assert_uint_eq((*v)["node"]["network"]["interfaces"].size(), 2);

    // Nothing measured: nothing pretended; a pod's disk use without the
    // node fs carries no capacity.
    NodeUsageSample bare = two_pods();
    bare.pods[0].ephemeral = proto::DiskUse{4096, 1};
    v = json::parse(render_stats_summary(bare));
    ck_assert(!(*v)["node"].isMember("fs") && !(*v)["node"].isMember("network"));
    ck_assert_uint_eq((*v)["pods"][0]["ephemeral-storage"]["usedBytes"].asUInt64(), 4096);
    ck_assert(!(*v)["pods"][0]["ephemeral-storage"].isMember("capacityBytes"));
}
END_TEST

// The shim's disk figures reach the sample.
START_TEST(sample_carries_disk_use) {
    proto::PodStatsReply r;
    r.pods.push_back({"u1", "rl", "gen", 1700000000000, {}, proto::DiskUse{100, 2}});
    r.pods[0].containers.push_back({"main", 1700000001000, 1, 1, proto::DiskUse{40, 1}});
    NodeUsageSample s = usage_sample("n", 1, 2, r);
    ck_assert(s.pods[0].ephemeral && s.pods[0].ephemeral->bytes == 100);
    ck_assert(s.pods[0].containers[0].logs && s.pods[0].containers[0].logs->inodes == 1);
    // The pod's figures are the containers' sum, or its own cgroup's when read.
    ck_assert_uint_eq(s.pods[0].use.cpu_ns, 1);
    r.pods[0].cgroup_cpu_ns = 900;
    r.pods[0].cgroup_memory_bytes = 4096;
    s = usage_sample("n", 1, 2, r);
    ck_assert_uint_eq(s.pods[0].use.cpu_ns, 900);
    ck_assert_uint_eq(s.pods[0].use.memory_bytes, 4096);
    ck_assert_uint_eq(s.pods[0].containers[0].use.cpu_ns, 1);  // containers as measured
}
END_TEST

namespace {

struct FixedStats : StatsProvider {
    Result<NodeUsageSample> r = fail(Error::NotFound, "two nodes here");
    Result<NodeUsageSample> sample() override { return r; }
};

HttpRequest get(const std::string &path) {
    HttpRequest r;
    r.method = "GET";
    r.path = path;
    return r;
}

}  // namespace

START_TEST(server_routes) {
    KubeletServer bare({}, [](const ContainerLogRef &) -> Result<ContainerLogSource> {
        return fail(Error::NotFound, "none");
    });
    ck_assert_int_eq(bare.handle(get("/stats/summary")).status, 404);
    ck_assert_int_eq(bare.handle(get("/metrics/resource")).status, 404);

    KubeletServer srv({}, [](const ContainerLogRef &) -> Result<ContainerLogSource> {
        return fail(Error::NotFound, "none");
    });
    auto stats = std::make_shared<FixedStats>();
    srv.set_stats_provider(stats);
    HttpResponse r = srv.handle(get("/metrics/resource"));
    ck_assert_int_eq(r.status, 404);
    ck_assert(r.body.find("two nodes here") != std::string::npos);
    stats->r = fail(Error::Unavailable, "no shim");
    ck_assert_int_eq(srv.handle(get("/stats/summary")).status, 503);
    r = srv.handle(get("/metrics/resource"));
    ck_assert_int_eq(r.status, 200);
    ck_assert(r.body.find("\nscrape_error 1\n") != std::string::npos);
    stats->r = two_pods();
    for (const char *path : {"/metrics/resource", "/metrics/resource/v1alpha1"}) {
        r = srv.handle(get(path));
        ck_assert_int_eq(r.status, 200);
        ck_assert(r.content_type.find("version=0.0.4") != std::string::npos);
        ck_assert(find(parse(r.body), "node_cpu_usage_seconds_total").found);
    }
    r = srv.handle(get("/stats/summary"));
    ck_assert_int_eq(r.status, 200);
    ck_assert_sstr_eq(r.content_type, "application/json");
    ck_assert_sstr_eq((*json::parse(r.body))["node"]["nodeName"].asString(), "slurm-n1-42");
    HttpRequest post = get("/stats/summary");
    post.method = "POST";
    ck_assert_int_eq(srv.handle(post).status, 405);
    ck_assert_int_eq(srv.handle(get("/stats/summaryx")).status, 404);
}
END_TEST

int main() {
    Suite *s = suite_create("kubelet_stats");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, resource_metrics_names_and_values);
    tcase_add_test(tc, resource_metrics_error);
    tcase_add_test(tc, summary_json);
    tcase_add_test(tc, rates_from_two_samples);
    tcase_add_test(tc, server_routes);
    tcase_add_test(tc, net_dev_parsed);
    tcase_add_test(tc, default_route_found);
    tcase_add_test(tc, fs_figures_from_statvfs);
    tcase_add_test(tc, summary_fs_network_and_disk);
    tcase_add_test(tc, sample_carries_disk_use);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
