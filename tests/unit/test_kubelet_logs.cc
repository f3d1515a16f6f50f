// agent/log_paths and the pure part of agent/kubelet/kubelet_server: where logs live,
// which instance --previous means, how /containerLogs requests are parsed
// and routed.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "agent/kubelet/kubelet_server.h"
#include "common/daemons/log_paths.h"
#include "tests/unit/check_main.h"

using namespace sk;

// ---- paths ----
START_TEST(paths_follow_the_contract) {
    ck_assert_sstr_eq(container_log_path("/var/lib/sk/job_42", "u-1", "main", 3),
                      "/var/lib/sk/job_42/pods/u-1/main/3.log");
    auto files = log_files_oldest_first("/s/pods/u/c/0.log");
    ck_assert_int_eq(files.size(), 2);
    ck_assert_sstr_eq(files[0], "/s/pods/u/c/0.log.1");
    ck_assert_sstr_eq(files[1], "/s/pods/u/c/0.log");
}
END_TEST

struct NameCase {
    const char *name;
    int want;  // -1: not a log file
};
static const NameCase kNames[] = {
    {"0.log", 0},   {"3.log", 3},   {"12.log", 12},         {"3.log.1", -1},
    {"03.log", -1}, {"-1.log", -1}, {".log", -1},           {"x.log", -1},
    {"3.txt", -1},  {"3", -1},      {"1234567890.log", -1},
};
// podman's --runroot must stay within 50 characters (k8s-shim/podman.h).
START_TEST(podman_run_dirs_are_short) {
    ck_assert_sstr_eq(podman_run_dir(2001, 42, "n1"), "/tmp/sk-podman-2001/42_n1");
    std::string longer = podman_run_dir(4294967295u, 4294967295u, "gpu-node-a100-rack12-0123");
    ck_assert_uint_le(longer.size(), 50);
    ck_assert_sstr_eq(longer.substr(0, 37), "/tmp/sk-podman-4294967295/4294967295_");
    // Distinct nodes, distinct directories.
    ck_assert(longer != podman_run_dir(4294967295u, 4294967295u, "gpu-node-a100-rack12-0124"));
}
END_TEST

START_TEST(log_file_names) {
    const auto &c = kNames[_i];
    auto n = parse_log_file_name(c.name);
    if (c.want < 0)
        ck_assert_msg(!n.has_value(), "%s", c.name);
    else
        ck_assert_msg(n && *n == c.want, "%s", c.name);
}
END_TEST

struct PrevCase {
    std::vector<int> existing;
    int current;
    int want;  // -1: none
};
static const PrevCase kPrev[] = {
    {{0, 1, 2}, 2, 1}, {{0, 2}, 2, 0}, {{0, 1, 2}, 0, -1}, {{}, 3, -1},
    {{5}, 3, -1},      {{0, 3}, 9, 3}, {{2, 0, 1}, 2, 1},
};
START_TEST(previous_instance) {
    const auto &c = kPrev[_i];
    auto p = previous_restart_count(c.existing, c.current);
    if (c.want < 0)
        ck_assert(!p.has_value());
    else
        ck_assert_msg(p && *p == c.want, "case %d", _i);
}
END_TEST

struct ComponentCase {
    const char *s;
    bool ok;
};
static const ComponentCase kComponents[] = {
    {"main", true}, {"3f2a-uid", true}, {"", false},       {".", false},
    {"..", false},  {"a/b", false},     {"../etc", false},
};
START_TEST(path_components) {
    const auto &c = kComponents[_i];
    Status st = check_log_path_component(c.s, "container name");
    ck_assert_msg(st.ok() == c.ok, "'%s'", c.s);
    if (!c.ok) ck_assert(st.message().find("container name") != std::string::npos);
}
END_TEST

START_TEST(files_for_previous_come_from_the_directory) {
    std::string state = sk_test_tmpdir("/tmp/sk-logpaths-XXXXXX");
    std::string dir = container_log_dir(state, "u", "c");
    // NOLINTNEXTLINE(cert-env33-c): mkdir -p under the test's own mkdtemp directory
    ck_assert_int_eq(system(("mkdir -p " + dir).c_str()), 0);
    for (const char *f : {"0.log", "2.log", "2.log.1", "4.log", "junk"})
        std::ofstream(dir + "/" + f) << "";
    auto cur = container_log_files(state, "u", "c", 4, false);
    ck_assert(cur.ok());
    ck_assert_sstr_eq(cur->back(), dir + "/4.log");
    auto prev = container_log_files(state, "u", "c", 4, true);
    ck_assert(prev.ok());
    ck_assert_sstr_eq(prev->back(), dir + "/2.log");  // restart 3 left no file
    auto none = container_log_files(state, "u", "c", 0, true);
    ck_assert(!none.ok());
    ck_assert(none.error() == Error::NotFound);
    ck_assert(none.message().find("previous terminated container \"c\"") != std::string::npos);
    auto traversal = container_log_files(state, "..", "c", 0, false);
    ck_assert(!traversal.ok());
    ck_assert(traversal.error() == Error::InvalidArgument);
    auto listed = list_restart_counts(state, dir);
    ck_assert(listed.ok());
    ck_assert_int_eq(listed->size(), 3);
    auto missing = list_restart_counts(state, state + "/nope");
    ck_assert(missing.ok() && missing->empty());
}
END_TEST

// --previous lists the container's directory: a symlink in its place (to a
// directory of root's) is refused, not listed.
START_TEST(previous_refuses_a_symlinked_directory) {
    std::string state = sk_test_tmpdir("/tmp/sk-logpaths-XXXXXX");
    std::string elsewhere = state + "/elsewhere";
    ck_assert_int_eq(mkdir(elsewhere.c_str(), 0755), 0);
    std::ofstream(elsewhere + "/0.log") << "";
    ck_assert_int_eq(mkdir((state + "/pods").c_str(), 0755), 0);
    ck_assert_int_eq(mkdir((state + "/pods/u").c_str(), 0755), 0);
    ck_assert_int_eq(symlink(elsewhere.c_str(), container_log_dir(state, "u", "c").c_str()), 0);
    auto prev = container_log_files(state, "u", "c", 1, true);
    ck_assert(!prev.ok());
    ck_assert_msg(prev.error() == Error::Refused, "%s", prev.message().c_str());
    ck_assert(prev.message().find("a symbolic link") != std::string::npos);
    auto listed = list_restart_counts(state, container_log_dir(state, "u", "c"));
    ck_assert(!listed.ok() && listed.error() == Error::Refused);
}
END_TEST

// ---- request parsing ----
static const int64_t kNow = 1714564800LL * 1000000000LL;  // 2024-05-01T12:00:00Z
struct ReqCase {
    const char *path;
    std::map<std::string, std::string> query;
    Error err;         // Error::Internal = expected ok
    const char *want;  // ok: "ns/pod/c f=.. t=.. p=.. tail=.. since=.. limit=..", else message part
};
static const ReqCase kReqs[] = {
    {"/containerLogs/default/web/main", {}, Error::Internal, "default/web/main f=0 t=0 p=0 - - -"},
    {"/containerLogs/ns/p/c",
     {{"follow", "true"},
      {"timestamps", "1"},
      {"previous", "True"},
      {"tailLines", "10"},
      {"limitBytes", "100"}},
     Error::Internal,
     "ns/p/c f=1 t=1 p=1 10 - 100"},
    {"/containerLogs/ns/p/c", {{"follow", ""}}, Error::Internal, "ns/p/c f=1 t=0 p=0 - - -"},
    {"/containerLogs/ns/p/c",
     {{"follow", "false"}, {"previous", "F"}},
     Error::Internal,
     "ns/p/c f=0 t=0 p=0 - - -"},
    {"/containerLogs/ns/p/c", {{"tailLines", "0"}}, Error::Internal, "ns/p/c f=0 t=0 p=0 0 - -"},
    {"/containerLogs/ns/p/c",
     {{"sinceSeconds", "60"}},
     Error::Internal,
     "ns/p/c f=0 t=0 p=0 - 1714564740 -"},
    {"/containerLogs/ns/p/c",
     {{"sinceTime", "2024-05-01T11:00:00Z"}},
     Error::Internal,
     "ns/p/c f=0 t=0 p=0 - 1714561200 -"},
    {"/containerLogs/ns/p", {}, Error::NotFound, "404"},
    {"/containerLogs/ns/p/c/extra", {}, Error::NotFound, "404"},
    {"/containerLogs//p/c", {}, Error::NotFound, "404"},
    {"/containerLogs/ns/p/c",
     {{"tailLines", "-1"}},
     Error::InvalidArgument,
     "tailLines: must be greater than or equal to 0"},
    {"/containerLogs/ns/p/c", {{"tailLines", "ten"}}, Error::InvalidArgument, "tailLines"},
    {"/containerLogs/ns/p/c",
     {{"limitBytes", "0"}},
     Error::InvalidArgument,
     "limitBytes: must be greater than 0"},
    {"/containerLogs/ns/p/c",
     {{"sinceSeconds", "0"}},
     Error::InvalidArgument,
     "sinceSeconds: must be greater than 0"},
    {"/containerLogs/ns/p/c", {{"sinceTime", "yesterday"}}, Error::InvalidArgument, "sinceTime"},
    {"/containerLogs/ns/p/c",
     {{"sinceTime", "2024-05-01T11:00:00Z"}, {"sinceSeconds", "5"}},
     Error::InvalidArgument,
     "at most one of `sinceTime` or `sinceSeconds`"},
};
static std::string opt(const std::optional<int64_t> &v, int64_t div = 1) {
    return v ? std::to_string(*v / div) : "-";
}
START_TEST(request_table) {
    const auto &c = kReqs[_i];
    auto r = parse_container_logs_request(c.path, c.query, kNow);
    if (c.err != Error::Internal) {
        ck_assert_msg(!r.ok(), "%s should fail", c.path);
        ck_assert(r.error() == c.err);
        ck_assert_msg(r.message().find(c.want) != std::string::npos, "message '%s'",
                      r.message().c_str());
        return;
    }
    ck_assert_msg(r.ok(), "%s: %s", c.path, r.ok() ? "" : r.message().c_str());
    std::string got = r->ref.ns + "/" + r->ref.pod + "/" + r->ref.container +
                      " f=" + std::to_string(r->follow) + " t=" + std::to_string(r->timestamps) +
                      " p=" + std::to_string(r->ref.previous) + " " + opt(r->query.tail_lines) +
                      " " + opt(r->query.since_ns, 1000000000) + " " + opt(r->query.limit_bytes);
    ck_assert_sstr_eq(got, c.want);
}
END_TEST

// ---- routing without a socket ----
struct RouteCase {
    const char *method;
    const char *path;
    int status;
    const char *body;
};
static const RouteCase kRoutes[] = {
    {"GET", "/healthz", 200, "ok"},
    {"POST", "/healthz", 405, "405 method not allowed\n"},
    {"GET", "/", 404, "404 page not found\n"},
    {"GET", "/pods", 404, "404 page not found\n"},
    {"GET", "/containerLogs/ns/p", 404, "404 page not found\n"},
    {"GET", "/containerLogs/ns/gone/c", 404, "pod \"gone\" not found\n"},
    {"GET", "/containerLogs/ns/p/c?x", 400, "tailLines: must be greater than or equal to 0\n"},
};
START_TEST(route_table) {
    const auto &c = kRoutes[_i];
    KubeletServer server({}, [](const ContainerLogRef &r) -> Result<ContainerLogSource> {
        return fail(Error::NotFound, "pod \"" + r.pod + "\" not found");
    });
    HttpRequest req;
    req.method = c.method;
    req.path = c.path;
    if (std::string(c.path).find("?x") != std::string::npos) {
        req.path = "/containerLogs/ns/p/c";
        req.query["tailLines"] = "-5";
    }
    HttpResponse resp = server.handle(req);
    ck_assert_int_eq(resp.status, c.status);
    ck_assert_sstr_eq(resp.body, c.body);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kubelet_logs");
    TCase *tc = tcase_create("log_paths");
    tcase_add_test(tc, paths_follow_the_contract);
    tcase_add_test(tc, podman_run_dirs_are_short);
    tcase_add_loop_test(tc, log_file_names, 0, TABLE_SIZE(kNames));
    tcase_add_loop_test(tc, previous_instance, 0, TABLE_SIZE(kPrev));
    tcase_add_loop_test(tc, path_components, 0, TABLE_SIZE(kComponents));
    tcase_add_test(tc, files_for_previous_come_from_the_directory);
    tcase_add_test(tc, previous_refuses_a_symlinked_directory);
    suite_add_tcase(s, tc);
    tc = tcase_create("requests");
    tcase_add_loop_test(tc, request_table, 0, TABLE_SIZE(kReqs));
    tcase_add_loop_test(tc, route_table, 0, TABLE_SIZE(kRoutes));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
