// The kubelet endpoint's request handling (agent/kubelet/kubelet_server.h): the
// routing of KubeletServer::handle and parse_container_logs_request over
// the decoded path and query that libmicrohttpd hands over, before any
// client is trusted with a file. The resolver never names a file, so no
// request here reads one.
// Input: 1 flag byte (bits 0-1 method, bits 2-3 the resolver's answer, bit 4
// now = 0), then lines: the path, then query entries `key=value` (`key`
// alone = empty value; the last of a key wins, as HttpServer collects them).
// Properties: no crash or throw; the status is one the kubelet answers; an
// error has a body; /healthz answers ok; a path outside /healthz and
// /containerLogs/ns/pod/container is 404; a parsed request has three
// non-empty segments without '/', tailLines >= 0, limitBytes > 0, a
// sinceSeconds time not in the future; the resolver's refusal maps to its
// HTTP status.
#include <map>
#include <string>
#include <vector>

#include "agent/kubelet/kubelet_server.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;

constexpr int64_t kNow = 1714564800LL * 1000000000LL;  // 2024-05-01T12:00:00Z

// Independent of kubelet_server.cc's split: "/containerLogs/A/B/C" with
// non-empty A, B, C and nothing after C.
bool logs_path_shape(const std::string &p) {
    const std::string prefix = "/containerLogs/";
    if (p.compare(0, prefix.size(), prefix) != 0) return false;
    std::vector<std::string> segs;
    size_t start = prefix.size();
    for (;;) {
        size_t slash = p.find('/', start);
        segs.push_back(
            p.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
        if (slash == std::string::npos) break;
        start = slash + 1;
    }
    if (segs.size() != 3) return false;
    for (const auto &s : segs)
        if (s.empty()) return false;
    return true;
}

}  // namespace

SK_FUZZ_TARGET(kubelet_request) {
    if (size == 0) return 0;
    const unsigned flags = data[0];
    std::string text(reinterpret_cast<const char *>(data + 1), size - 1);
    std::vector<std::string> lines;
    size_t start = 0;
    for (;;) {
        size_t nl = text.find('\n', start);
        lines.push_back(
            text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
        if (nl == std::string::npos) break;
        start = nl + 1;
    }
    static const char *const kMethods[] = {"GET", "POST", "HEAD", "DELETE"};
    HttpRequest req;
    req.method = kMethods[flags & 3];
    req.path = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
        size_t eq = lines[i].find('=');
        if (eq == std::string::npos)
            req.query[lines[i]] = "";
        else
            req.query[lines[i].substr(0, eq)] = lines[i].substr(eq + 1);
    }
    const unsigned answer = (flags >> 2) & 3;
    const int64_t now = (flags & 16) ? 0 : kNow;

    bool resolved = false;
    KubeletServerConfig cfg;
    cfg.clock = [now] { return now; };
    KubeletServer server(cfg, [&](const ContainerLogRef &ref) -> Result<ContainerLogSource> {
        resolved = true;
        FUZZ_CHECK(!ref.ns.empty() && !ref.pod.empty() && !ref.container.empty());
        switch (answer) {
            case 0:
                return fail(Error::NotFound, "pod not found");
            case 1:
                return fail(Error::InvalidArgument, "bad container");
            case 2:
                return fail(Error::Forbidden, "not yours");
            default:
                return ContainerLogSource{};  // no files: a 500, nothing read
        }
    });

    const bool shape = logs_path_shape(req.path);
    auto parsed = parse_container_logs_request(req.path, req.query, now);
    if (parsed) {
        FUZZ_CHECK(shape);
        for (const std::string *seg : {&parsed->ref.ns, &parsed->ref.pod, &parsed->ref.container})
            FUZZ_CHECK(!seg->empty() && seg->find('/') == std::string::npos);
        FUZZ_CHECK(!parsed->query.tail_lines || *parsed->query.tail_lines >= 0);
        FUZZ_CHECK(!parsed->query.limit_bytes || *parsed->query.limit_bytes > 0);
        if (req.query.count("sinceSeconds")) {
            FUZZ_CHECK(parsed->query.since_ns && *parsed->query.since_ns >= 0 &&
                       *parsed->query.since_ns <= now);
        }
    } else {
        FUZZ_CHECK(!parsed.message().empty());
        FUZZ_CHECK(parsed.error() == Error::NotFound || parsed.error() == Error::InvalidArgument);
        FUZZ_CHECK((parsed.error() == Error::NotFound) == !shape);
    }

    HttpResponse resp = server.handle(req);
    FUZZ_CHECK(!resp.stream);  // no file behind any of these: never a follow
    const int st = resp.status;
    FUZZ_CHECK(st == 200 || st == 400 || st == 403 || st == 404 || st == 405 || st == 500);
    if (st != 200) FUZZ_CHECK(!resp.body.empty());
    const bool logs_prefix = req.path.compare(0, 15, "/containerLogs/") == 0;
    if (req.path != "/healthz" && !logs_prefix) FUZZ_CHECK(st == 404 && !resolved);
    if (req.path == "/healthz") {
        FUZZ_CHECK(req.method == "GET" ? (st == 200 && resp.body == "ok") : st == 405);
        FUZZ_CHECK(st != 405 || resp.headers.count("Allow"));
    }
    if (logs_prefix && req.method == "GET") {
        if (!parsed) {
            FUZZ_CHECK(!resolved);
            FUZZ_CHECK(st == (parsed.error() == Error::NotFound ? 404 : 400));
        } else {
            static const int kWant[] = {404, 400, 403, 500};
            FUZZ_CHECK(resolved && st == kWant[answer]);
        }
    }
    if (req.method != "GET") FUZZ_CHECK(!resolved);
    return 0;
}
