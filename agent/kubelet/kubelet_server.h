// The part of the kubelet API that `kubectl logs` reaches through the API
// server (which connects to https://<node InternalIP>:<kubeletEndpoint port>
// with its kubelet-client certificate):
//   GET /containerLogs/{namespace}/{pod}/{container}
//       ?follow=&tailLines=&sinceSeconds=&sinceTime=&timestamps=&previous=&limitBytes=
//   GET /healthz -> "ok"
//   POST|GET /exec, /attach, /portForward (agent/kubelet/stream_request.h), when a
//       StreamHandler is given: refusals as the kubelet's, else 101 and the
//       connection to the handler
//   GET /stats/summary, /metrics/resource (and /metrics/resource/v1alpha1,
//       the path older metrics-server asks), when a StatsProvider is given
//       (agent/kubelet/kubelet_stats.h renders them)
// everything else 404 (405 for another method on those paths).
//
// The server runs in libmicrohttpd's threads. Which files belong to a
// container, and whether it still runs, comes from a resolver the agent
// supplies; it is called from those threads and must be thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "agent/kubelet/http_server.h"
#include "agent/kubelet/kubelet_stats.h"
#include "agent/kubelet/stream_request.h"
#include "common/daemons/cri_log.h"
#include "common/result.h"

namespace sk {

struct ContainerLogRef {
    std::string ns;
    std::string pod;        // pod name
    std::string container;  // container name (init containers included)
    bool previous = false;  // the previous terminated instance (kubectl logs -p)
};

struct ContainerLogSource {
    // The directory the files lie below that root trusts (the job's shim state
    // dir, which the agent made): everything below it is the job user's, and
    // is opened without following symlinks (read_cri_log, common/daemons/cri_log.h).
    std::string trusted_dir;
    // Files of one container instance, oldest first, as from
    // log_files_oldest_first(container_log_path(...)); missing files are fine.
    std::vector<std::string> paths_oldest_first;
    // The instance may still write: a follow keeps waiting. false ends a
    // follow once the files are read (terminated, or --previous).
    bool running = false;
};

// Errors map to HTTP: NotFound -> 404, InvalidArgument -> 400, Refused -> 403,
// other -> 500;
// the message is the response body (kubectl shows it).
using ContainerLogResolver = std::function<Result<ContainerLogSource>(const ContainerLogRef &)>;

struct ContainerLogsRequest {
    ContainerLogRef ref;
    CriLogQuery query;  // limit_bytes applies to the bytes sent (timestamps included)
    bool follow = false;
    bool timestamps = false;
};

// Pure: parses the path and query of a /containerLogs request with the
// kubelet's validation rules. NotFound for a path that is not
// /containerLogs/ns/pod/container, InvalidArgument (-> 400) for bad values.
// `now_ns` turns sinceSeconds into a time.
Result<ContainerLogsRequest> parse_container_logs_request(
    const std::string &path, const std::map<std::string, std::string> &query, int64_t now_ns);

// Where the streaming endpoints' sessions go (`/exec`, `/attach`,
// `/portForward`: agent/kubelet/stream_request.h). Called from the server's threads;
// both must be thread-safe and must not block.
class StreamHandler {
  public:
    virtual ~StreamHandler() = default;
    // Before the upgrade: whether the pod and container can take the session.
    // NotFound -> 404 text, Invalid -> 400 with a JSON Status (kubectl prints
    // its message), Refused -> 429 with a JSON Status (too many sessions),
    // other -> 500 text.
    virtual Status check(const StreamRequest &req) = 0;
    // After the 101: the session's connection; the handler owns it (and calls
    // its close() when the session ends).
    virtual void start(StreamRequest req, HttpUpgrade conn) = 0;
};

// Where the stats endpoints' figures come from: a fresh sample of the one
// virtual node this server answers for. Called from the server's threads;
// must be thread-safe and return within its own bound. NotFound -> 404 with
// the message (no node's figures can be had here), other errors -> 503 for
// /stats/summary and resource_scrape_error 1 for /metrics/resource.
class StatsProvider {
  public:
    virtual ~StatsProvider() = default;
    virtual Result<NodeUsageSample> sample() = 0;
};

// Who may use the endpoint (agent/kubelet/webhook_gate.h: the kubelet's Webhook
// authentication and authorization): asked for every request before it is
// routed, from the server's threads; thread-safe, bounded. nullopt = serve
// the request; otherwise the answer to send instead (401, 403, 500).
// node: the virtual node the endpoint serves ("" on a port several share).
class RequestGate {
  public:
    virtual ~RequestGate() = default;
    virtual std::optional<HttpResponse> admit(const HttpRequest &req, const std::string &node) = 0;
    // Whether a request without a verified client certificate may still be
    // admitted (a bearer token): the server then passes it on
    // (HttpServerConfig::pass_unverified) instead of answering 401 itself.
    virtual bool authenticates_tokens() const = 0;
};

struct KubeletServerConfig {
    HttpServerConfig http;         // TLS, port, client CA; name defaults to "kubelet"
    int follow_poll_ms = 100;      // how often a follow looks for new lines
    int follow_recheck_ms = 1000;  // how often a follow asks the resolver if still running
    CriClock clock;                // for sinceSeconds; default: wall clock
    // null: a verified client certificate is enough (the server's 401
    // otherwise), as a kubelet in AlwaysAllow mode.
    std::shared_ptr<RequestGate> gate;
    std::string node_name;  // what the gate is told ("" = the host's shared port)
};

class KubeletServer {
  public:
    // No I/O; start() binds.
    // streams: null = the streaming endpoints answer 404, as before they existed.
    KubeletServer(KubeletServerConfig config, ContainerLogResolver resolver,
                  std::shared_ptr<StreamHandler> streams = nullptr);
    ~KubeletServer();
    KubeletServer(const KubeletServer &) = delete;
    KubeletServer &operator=(const KubeletServer &) = delete;

    // Optional, before start(): none = the stats paths answer 404.
    void set_stats_provider(std::shared_ptr<StatsProvider> stats) { stats_ = std::move(stats); }

    Status start();
    void stop();  // ends running follows, joins the server threads
    uint16_t port() const;

    // The routing, callable without a socket (tests).
    HttpResponse handle(const HttpRequest &req);

  private:
    HttpResponse container_logs(const HttpRequest &req);
    HttpResponse stream(const HttpRequest &req);
    HttpResponse stats(const HttpRequest &req);

    KubeletServerConfig config_;
    ContainerLogResolver resolver_;
    std::shared_ptr<StreamHandler> streams_;
    std::shared_ptr<StatsProvider> stats_;
    std::unique_ptr<HttpServer> http_;
};

}  // namespace sk
