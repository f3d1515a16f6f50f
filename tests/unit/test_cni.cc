// agent/network: the CNI chain's configuration, stdin, environment and
// results (what the standard plugins read and print, CNI 1.0), and the
// checks before root holds a sandbox's namespaces (a process that is not
// the job user's, the host's own namespace: refused, nothing left).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "agent/network/cni.h"
#include "agent/network/pod_network.h"
#include "agent/network/pod_routes.h"
#include "common/daemons/json.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

static Json::Value J(const std::string &s) {
    auto v = json::parse(s);
    ck_assert_msg(v.ok(), "%s", s.c_str());
    return *v;
}

START_TEST(subnets_and_names) {
    ck_assert_sstr_eq(subnet_error("10.244.3.0/24"), "");
    ck_assert_sstr_eq(subnet_error("10.0.0.0/8"), "");
    for (const char *bad : {"10.244.3.0", "10.244.3.1/24", "10.244.3.0/31", "10.244.3.0/7",
                            "fd00::/64", "10.244.3.0/", "10.244.3.0/2x", "x/24"})
        ck_assert_msg(!subnet_error(bad).empty(), "'%s' passed", bad);
    ck_assert(interface_name_ok("sk-pods0"));
    ck_assert(!interface_name_ok(""));
    ck_assert(!interface_name_ok("a-name-of-16-chr"));
    ck_assert(!interface_name_ok("br/0"));
    ck_assert(!interface_name_ok(".."));
}
END_TEST

START_TEST(chain_configuration) {
    CniSettings s;
    s.subnet = "10.244.3.0/24";
    s.ipam_dir = "/run/slurm-k8s/net/ipam";
    auto plain = cni_plugins(s, false);
    ck_assert_uint_eq(plain.size(), 1);
    const Json::Value &b = plain[0];
    ck_assert_sstr_eq(b["type"].asString(), "bridge");
    ck_assert_sstr_eq(b["bridge"].asString(), "sk-pods0");
    ck_assert(b["isGateway"].asBool() && b["ipMasq"].asBool() && b["hairpinMode"].asBool());
    ck_assert(!b.isMember("mtu"));
    ck_assert_sstr_eq(b["ipam"]["type"].asString(), "host-local");
    ck_assert_sstr_eq(b["ipam"]["ranges"][0][0]["subnet"].asString(), "10.244.3.0/24");
    ck_assert_sstr_eq(b["ipam"]["dataDir"].asString(), "/run/slurm-k8s/net/ipam");
    ck_assert_sstr_eq(b["ipam"]["routes"][0]["dst"].asString(), "0.0.0.0/0");
    s.masquerade = false;
    s.mtu = 9000;
    auto ports = cni_plugins(s, true);
    ck_assert_uint_eq(ports.size(), 2);
    ck_assert(!ports[0]["ipMasq"].asBool());
    ck_assert_int_eq(ports[0]["mtu"].asInt(), 9000);
    ck_assert_sstr_eq(ports[1]["type"].asString(), "portmap");

    // stdin: name and version, the previous result, portmap's mappings.
    Json::Value prev = J(R"({"cniVersion":"1.0.0","ips":[{"address":"10.244.3.2/24"}]})");
    auto first = J(cni_stdin(ports[0], Json::Value(), {}));
    ck_assert_sstr_eq(first["cniVersion"].asString(), kCniVersion);
    ck_assert_sstr_eq(first["name"].asString(), kCniNetworkName);
    ck_assert(!first.isMember("prevResult") && !first.isMember("runtimeConfig"));
    HostPort hp;
    hp.host_port = 18080;
    hp.container_port = 8080;
    HostPort udp;
    udp.host_port = 53;
    udp.container_port = 5353;
    udp.protocol = "udp";
    udp.host_ip = "10.239.0.11";
    auto second = J(cni_stdin(ports[1], prev, {hp, udp}));
    ck_assert_sstr_eq(second["prevResult"]["ips"][0]["address"].asString(), "10.244.3.2/24");
    const Json::Value &maps = second["runtimeConfig"]["portMappings"];
    ck_assert_uint_eq(maps.size(), 2);
    ck_assert_int_eq(maps[0]["hostPort"].asInt(), 18080);
    ck_assert_int_eq(maps[0]["containerPort"].asInt(), 8080);
    ck_assert_sstr_eq(maps[0]["protocol"].asString(), "tcp");
    ck_assert(!maps[0].isMember("hostIP"));
    ck_assert_sstr_eq(maps[1]["hostIP"].asString(), "10.239.0.11");
    ck_assert(!second.isMember("capabilities"));

    auto env = cni_env(s, "DEL", "uid-1", "/run/x/net", "default", "web");
    auto has = [&env](const std::string &e) {
        return std::find(env.begin(), env.end(), e) != env.end();
    };
    ck_assert(has("CNI_COMMAND=DEL") && has("CNI_CONTAINERID=uid-1") &&
              has("CNI_NETNS=/run/x/net") && has("CNI_IFNAME=eth0") &&
              has("CNI_PATH=/usr/lib/cni"));
}
END_TEST

START_TEST(plugin_results) {
    auto ok = cni_result(0, R"({"cniVersion":"1.0.0","ips":[{"address":"10.244.3.7/24"}]})", "");
    ck_assert(ok.ok());
    auto ip = cni_result_ip(*ok);
    ck_assert(ip.ok());
    ck_assert_sstr_eq(*ip, "10.244.3.7");
    // An IPv6 address first: the IPv4 one.
    auto two =
        cni_result_ip(J(R"({"ips":[{"address":"fd00::7/64"},{"address":"10.244.3.8/24"}]})"));
    ck_assert(two.ok() && *two == "10.244.3.8");
    ck_assert(!cni_result_ip(J(R"({"ips":[]})")).ok());
    ck_assert(!cni_result(0, "not json", "").ok());
    // The specification's error object, then stderr, then the code.
    auto e = cni_result(1, R"({"code":11,"msg":"failed to allocate","details":"range full"})", "");
    ck_assert(!e.ok());
    ck_assert_sstr_eq(e.message(), "failed to allocate: range full");
    auto e2 = cni_result(1, "", "iptables: not found\n");
    ck_assert_sstr_eq(e2.message(), "iptables: not found");
    ck_assert_sstr_eq(cni_result(2, "", "").message(), "exit code 2");
}
END_TEST

START_TEST(sandbox_checks) {
    char tmpl[] = "/tmp/sk-netns-XXXXXX";
    ck_assert(mkdtemp(tmpl));
    std::string d = std::string(tmpl) + "/pod";
    unsigned long ino = 0;
    // Not the job user's process.
    std::string why = hold_namespaces(getpid(), getuid() + 1, d, {}, &ino);
    ck_assert_msg(why.find("not the job's user's") != std::string::npos, "%s", why.c_str());
    // Its own namespaces are the host's (or, unprivileged, not in a user
    // namespace of its own): refused either way.
    why = hold_namespaces(getpid(), getuid(), d, {}, &ino);
    ck_assert_msg(why.find("host's network namespace") != std::string::npos ||
                      why.find("not in a user namespace") != std::string::npos,
                  "%s", why.c_str());
    ck_assert(!hold_namespaces(1 << 30, getuid(), d, {}, &ino).empty());
    ck_assert(!hold_namespaces(1, getuid(), d, {}, &ino).empty());
    release_namespaces(d);
    struct stat st;
    ck_assert(stat(d.c_str(), &st) != 0);
    ck_assert(rmdir(tmpl) == 0);
}
END_TEST

START_TEST(routes_between_hosts) {
    auto nodes = J(R"([
      {"metadata":{"name":"slurm-n1-7"},"spec":{"podCIDR":"10.244.1.0/24"},
       "status":{"addresses":[{"type":"InternalIP","address":"10.0.0.11"}]}},
      {"metadata":{"name":"slurm-n1-8"},"spec":{"podCIDR":"10.244.1.0/24"},
       "status":{"addresses":[{"type":"Hostname","address":"n1"},{"type":"InternalIP","address":"10.0.0.11"}]}},
      {"metadata":{"name":"slurm-n2-7"},"spec":{"podCIDR":"10.244.2.0/24"},
       "status":{"addresses":[{"type":"InternalIP","address":"10.0.0.12"}]}},
      {"metadata":{"name":"slurm-n3-9"},"spec":{},
       "status":{"addresses":[{"type":"InternalIP","address":"10.0.0.13"}]}},
      {"metadata":{"name":"slurm-n4-9"},"spec":{"podCIDR":"10.244.4.0/24"},"status":{}},
      {"metadata":{"name":"slurm-n5-9"},"spec":{"podCIDR":"not a range"},
       "status":{"addresses":[{"type":"InternalIP","address":"10.0.0.15"}]}},
      {"metadata":{"name":"slurm-a-9"},"spec":{"podCIDR":"10.244.2.0/24"},
       "status":{"addresses":[{"type":"InternalIP","address":"10.0.0.99"}]}}])");
    std::vector<std::string> conflicts;
    // On host n2: n1's range via n1; its own left out; no range, no address,
    // a bad range: none; a second claim of n2's own range: not routed.
    auto r = routes_from_nodes(nodes, "10.244.2.0/24", "10.0.0.12", &conflicts);
    ck_assert_uint_eq(r.size(), 1);
    ck_assert_sstr_eq(r["10.244.1.0/24"], "10.0.0.11");
    ck_assert(conflicts.empty());
    // On host n3: two claims of 10.244.2.0/24: the first by name, logged.
    r = routes_from_nodes(nodes, "10.244.3.0/24", "10.0.0.13", &conflicts);
    ck_assert_uint_eq(r.size(), 2);
    ck_assert_sstr_eq(r["10.244.2.0/24"], "10.0.0.99");
    ck_assert_uint_eq(conflicts.size(), 1);
    ck_assert(conflicts[0].find("10.244.2.0/24 is claimed by") != std::string::npos);
    // The commands from what is there to what is wanted.
    auto cmds = route_commands({{"10.244.1.0/24", "10.0.0.11"},
                                {"10.244.9.0/24", "10.0.0.19"},
                                {"10.244.2.0/24", "10.0.0.12"}},
                               {{"10.244.1.0/24", "10.0.0.11"},
                                {"10.244.2.0/24", "10.0.0.22"},
                                {"10.244.5.0/24", "10.0.0.15"}});
    ck_assert_uint_eq(cmds.size(), 3);
    auto line = [](const std::vector<std::string> &v) {
        std::string s;
        for (const auto &w : v)
            s += (s.empty() ? "" : " ") + w;
        return s;
    };
    ck_assert_sstr_eq(line(cmds[0]), "ip route del 10.244.9.0/24 proto 241");
    ck_assert_sstr_eq(line(cmds[1]), "ip route replace 10.244.2.0/24 via 10.0.0.22 proto 241");
    ck_assert_sstr_eq(line(cmds[2]), "ip route replace 10.244.5.0/24 via 10.0.0.15 proto 241");
    ck_assert(route_commands({{"a", "b"}}, {{"a", "b"}}).empty());
}
END_TEST

int main() {
    Suite *s = suite_create("cni");
    TCase *tc = tcase_create("cni");
    tcase_add_test(tc, subnets_and_names);
    tcase_add_test(tc, chain_configuration);
    tcase_add_test(tc, plugin_results);
    tcase_add_test(tc, sandbox_checks);
    tcase_add_test(tc, routes_between_hosts);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
