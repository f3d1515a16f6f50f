#include "agent/kubelet/kubelet_server.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/log.h"
#include "agent/kubelet/streams/remotecommand.h"
#include "common/strings.h"
#include "agent/kubelet/streams/ws_channel.h"

namespace sk {
namespace {

constexpr int64_t kNsPerSec = 1000000000;

// Kubernetes query bools: "false", "f", "0" (any case) are false, anything
// else, including an empty value ("?follow"), is true.
bool query_bool(const std::string &v) {
    std::string l = v;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    return !(l == "false" || l == "f" || l == "0");
}

Result<int64_t> query_int(const std::string &v, const char *name) {
    std::string_view s = v;
    bool neg = !s.empty() && s[0] == '-';
    if (neg) s.remove_prefix(1);
    auto u = parse_uint(s, name, static_cast<uint64_t>(INT64_MAX));
    if (!u.ok())
        return fail(Error::InvalidArgument, std::string(name) + ": invalid integer '" + v + "'");
    return neg ? -static_cast<int64_t>(*u) : static_cast<int64_t>(*u);
}

int status_for(Error e) {
    switch (e) {
        case Error::NotFound:
            return 404;
        case Error::InvalidArgument:
        case Error::Invalid:
            return 400;
        case Error::Forbidden:
        case Error::Refused:  // a log file that is a symlink, a FIFO, another's file
            return 403;
        default:
            return 500;
    }
}

std::string ref_name(const ContainerLogRef &r) {
    return r.ns + "/" + r.pod + "/" + r.container + (r.previous ? " (previous)" : "");
}

// Formats records as kubectl shows them, keeping the line-start state across
// calls (a P record ends a batch mid-line) and a byte budget.
class KubectlFormatter {
  public:
    KubectlFormatter(bool timestamps, std::optional<int64_t> limit)
        : timestamps_(timestamps), limit_(limit) {}

    // Appends to *out; false once the byte budget is spent.
    bool append(const std::vector<CriLogRecord> &recs, std::string *out) {
        size_t start = out->size();
        for (const auto &r : recs) {
            if (timestamps_ && line_start_) {
                out->append(format_rfc3339nano(r.ts_ns, false));
                out->push_back(' ');
            }
            out->append(r.content);
            if (!r.partial) out->push_back('\n');
            line_start_ = !r.partial;
        }
        if (!limit_) return true;
        int64_t added = static_cast<int64_t>(out->size() - start);
        if (added >= *limit_) {
            out->resize(start + static_cast<size_t>(*limit_));
            *limit_ = 0;
            return false;
        }
        *limit_ -= added;
        return true;
    }
    bool exhausted() const { return limit_ && *limit_ <= 0; }

  private:
    bool timestamps_;
    std::optional<int64_t> limit_;
    bool line_start_ = true;
};

class FollowStream : public HttpStream {
  public:
    FollowStream(ContainerLogsRequest req, const ContainerLogSource &src,
                 ContainerLogResolver resolver, const KubeletServerConfig &cfg, int fd,
                 std::unique_ptr<CriLogFollower> follower, std::string first, KubectlFormatter fmt)
        : req_(std::move(req)),
          path_(src.paths_oldest_first.back()),
          resolver_(std::move(resolver)),
          recheck_ms_(cfg.follow_recheck_ms),
          fd_(fd),
          follower_(std::move(follower)),
          pending_(std::move(first)),
          fmt_(fmt),
          closing_(!src.running || fmt_.exhausted()),
          last_check_(std::chrono::steady_clock::now()) {}

    ssize_t read(char *buf, size_t max) override {
        bool found = false;
        if (pending_.empty()) {
            if (ended_ || fmt_.exhausted()) return -1;
            auto recs = follower_->poll();
            if (!recs.ok()) {
                LOG_WARN("[pod %s] log follow ends: %s", ref_name(req_.ref).c_str(),
                         recs.message().c_str());
                return -1;
            }
            found = !recs->empty();
            if (found) fmt_.append(*recs, &pending_);
        }
        // What a poll found goes out at once, not after the next park.
        if (!pending_.empty()) {
            size_t n = std::min(max, pending_.size());
            memcpy(buf, pending_.data(), n);
            pending_.erase(0, n);
            return static_cast<ssize_t>(n);
        }
        auto now = std::chrono::steady_clock::now();
        if (found) {  // records, none to send: poll again
            if (lingering_) quiet_since_ = now;
            return 0;
        }
        if (closing_) {
            // The container ended (or its pod went): its runtime may still
            // be writing its last output (the shim drains the container's
            // pipes after the exit, and a pod deleted at the job's end is
            // forgotten here at once). Ended once the file stayed quiet for
            // kFollowLingerMs, not at the first empty poll.
            if (lingering_ && now - quiet_since_ < std::chrono::milliseconds(kFollowLingerMs))
                return 0;
            ended_ = true;
            return -1;
        }
        recheck();
        if (closing_) {
            lingering_ = true;
            quiet_since_ = now;
            return 0;
        }
        // Never wait here: the server parks the connection for
        // follow_poll_ms (HttpStream) and calls again.
        if (HttpServer::peer_closed(fd_, 0)) return -1;
        return 0;
    }

  private:
    void recheck() {
        auto now = std::chrono::steady_clock::now();
        if (now - last_check_ < std::chrono::milliseconds(recheck_ms_)) return;
        last_check_ = now;
        auto src = resolver_(req_.ref);
        // Gone, terminated, or restarted (a new instance is a new container:
        // the kubelet ends the follow too).
        if (!src.ok() || !src->running || src->paths_oldest_first.empty() ||
            src->paths_oldest_first.back() != path_)
            closing_ = true;
    }

    ContainerLogsRequest req_;
    std::string path_;
    ContainerLogResolver resolver_;
    int recheck_ms_;
    int fd_;
    std::unique_ptr<CriLogFollower> follower_;
    std::string pending_;
    KubectlFormatter fmt_;
    bool closing_;
    bool ended_ = false;
    // After a recheck found the end: polls go on until the file was quiet
    // this long (a follow begun after the end stops at the first empty poll).
    static constexpr int kFollowLingerMs = 1000;
    bool lingering_ = false;
    std::chrono::steady_clock::time_point quiet_since_;
    std::chrono::steady_clock::time_point last_check_;
};

}  // namespace

Result<ContainerLogsRequest> parse_container_logs_request(
    const std::string &path, const std::map<std::string, std::string> &query, int64_t now_ns) {
    auto parts = split(path, '/');
    if (parts.size() != 5 || !parts[0].empty() || parts[1] != "containerLogs" || parts[2].empty() ||
        parts[3].empty() || parts[4].empty())
        return fail(Error::NotFound, "404 page not found");
    ContainerLogsRequest r;
    r.ref.ns = parts[2];
    r.ref.pod = parts[3];
    r.ref.container = parts[4];
    auto get = [&](const char *k) -> const std::string * {
        auto it = query.find(k);
        return it == query.end() ? nullptr : &it->second;
    };
    if (auto v = get("follow")) r.follow = query_bool(*v);
    if (auto v = get("timestamps")) r.timestamps = query_bool(*v);
    if (auto v = get("previous")) r.ref.previous = query_bool(*v);
    if (auto v = get("tailLines")) {
        auto n = query_int(*v, "tailLines");
        if (!n.ok()) return n.failure();
        if (*n < 0)
            return fail(Error::InvalidArgument, "tailLines: must be greater than or equal to 0");
        r.query.tail_lines = *n;
    }
    if (auto v = get("limitBytes")) {
        auto n = query_int(*v, "limitBytes");
        if (!n.ok()) return n.failure();
        if (*n <= 0) return fail(Error::InvalidArgument, "limitBytes: must be greater than 0");
        r.query.limit_bytes = *n;
    }
    const std::string *secs = get("sinceSeconds");
    const std::string *time = get("sinceTime");
    if (secs && time)
        return fail(Error::InvalidArgument,
                    "at most one of `sinceTime` or `sinceSeconds` may be specified");
    if (secs) {
        auto n = query_int(*secs, "sinceSeconds");
        if (!n.ok()) return n.failure();
        if (*n <= 0) return fail(Error::InvalidArgument, "sinceSeconds: must be greater than 0");
        r.query.since_ns = *n > now_ns / kNsPerSec ? 0 : now_ns - *n * kNsPerSec;
    }
    if (time) {
        auto t = parse_rfc3339nano(*time);
        if (!t.ok())
            return fail(Error::InvalidArgument, "sinceTime: invalid RFC 3339 time '" + *time + "'");
        r.query.since_ns = *t;
    }
    return r;
}

KubeletServer::KubeletServer(KubeletServerConfig config, ContainerLogResolver resolver,
                             std::shared_ptr<StreamHandler> streams)
    : config_(std::move(config)), resolver_(std::move(resolver)), streams_(std::move(streams)) {
    if (config_.http.name == "http") config_.http.name = "kubelet";
    config_.http.stream_poll_ms = config_.follow_poll_ms;
    if (!config_.clock) config_.clock = cri_realtime_ns;
}

KubeletServer::~KubeletServer() {
    stop();
}

Status KubeletServer::start() {
    HttpServerConfig h = config_.http;
    if (config_.gate && config_.gate->authenticates_tokens()) h.pass_unverified = true;
    http_ = std::make_unique<HttpServer>(h, [this](const HttpRequest &r) { return handle(r); });
    Status st = http_->start();
    if (!st.ok()) http_.reset();
    return st;
}

void KubeletServer::stop() {
    if (http_) http_->stop();
    http_.reset();
}

uint16_t KubeletServer::port() const {
    return http_ ? http_->port() : 0;
}

HttpResponse KubeletServer::handle(const HttpRequest &req) {
    if (config_.gate)
        if (std::optional<HttpResponse> refused = config_.gate->admit(req, config_.node_name))
            return *refused;
    if (streams_ && (starts_with(req.path, "/exec/") || starts_with(req.path, "/attach/") ||
                     starts_with(req.path, "/portForward/")))
        return stream(req);
    bool logs = starts_with(req.path, "/containerLogs/");
    bool stats = stats_ && (req.path == "/stats/summary" || req.path == "/metrics/resource" ||
                            req.path == "/metrics/resource/v1alpha1");
    if (req.path != "/healthz" && !logs && !stats) return http_text(404, "404 page not found\n");
    if (req.method != "GET") {
        HttpResponse r = http_text(405, "405 method not allowed\n");
        r.headers["Allow"] = "GET";
        return r;
    }
    if (stats) return this->stats(req);
    if (!logs) return http_text(200, "ok");
    return container_logs(req);
}

HttpResponse KubeletServer::stats(const HttpRequest &req) {
    auto s = stats_->sample();
    if (!s.ok() && s.error() == Error::NotFound) return http_text(404, s.message() + "\n");
    if (!s.ok())
        LOG_WARN("stats for %s: %s", req.client_cn.empty() ? "anonymous" : req.client_cn.c_str(),
                 s.message().c_str());
    if (req.path == "/stats/summary") {
        if (!s.ok()) return http_text(503, s.message() + "\n");
        HttpResponse r = http_text(200, render_stats_summary(*s));
        r.content_type = "application/json";
        return r;
    }
    HttpResponse r = http_text(200, render_resource_metrics(s.ok() ? &*s : nullptr));
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return r;
}

HttpResponse KubeletServer::stream(const HttpRequest &req) {
    StreamParse p = parse_stream_request(req.method, req.path, req.query_all, req.headers);
    if (!p.ok) return http_text(p.refusal.status, p.refusal.body);
    Status st = streams_->check(p.request);
    if (!st.ok()) {
        if (st.error() == Error::NotFound) return http_text(404, st.message() + "\n");
        if (st.error() == Error::Refused) {
            HttpResponse r = http_text(
                429, remotecommand::status_http_error(429, "TooManyRequests", st.message()));
            r.content_type = "application/json";
            return r;
        }
        if (st.error() != Error::Invalid && st.error() != Error::InvalidArgument)
            return http_text(500, st.message() + "\n");
        HttpResponse r =
            http_text(400, remotecommand::status_http_error(400, "BadRequest", st.message()));
        r.content_type = "application/json";
        return r;
    }
    HttpResponse r;
    r.status = 101;
    if (p.request.transport == StreamTransport::WebSocket) {
        auto accept = ws::accept_key(p.request.websocket_key);
        if (!accept.ok()) return http_text(400, accept.message() + "\n");
        r.headers["Upgrade"] = "websocket";
        r.headers["Sec-WebSocket-Accept"] = *accept;
        r.headers["Sec-WebSocket-Protocol"] = p.request.protocol;
    } else {
        r.headers["Upgrade"] = "SPDY/3.1";
        r.headers["X-Stream-Protocol-Version"] = p.request.protocol;
    }
    auto handler = streams_;
    StreamRequest sr = p.request;
    r.upgrade = [handler, sr](HttpUpgrade conn) { handler->start(sr, std::move(conn)); };
    return r;
}

HttpResponse KubeletServer::container_logs(const HttpRequest &req) {
    auto parsed = parse_container_logs_request(req.path, req.query, config_.clock());
    if (!parsed.ok()) return http_text(status_for(parsed.error()), parsed.message() + "\n");
    ContainerLogsRequest r = std::move(*parsed);
    auto src = resolver_(r.ref);
    if (!src.ok()) return http_text(status_for(src.error()), src.message() + "\n");
    if (src->paths_oldest_first.empty())
        return http_text(500, "no log files for container " + ref_name(r.ref) + "\n");

    // limit_bytes counts what is sent (like the kubelet's limited writer), so
    // the formatter cuts the text; the reader's cut of the records' content
    // (never longer than the text made of it) only bounds what it reads.
    std::optional<int64_t> limit = r.query.limit_bytes;
    auto follower =
        std::make_unique<CriLogFollower>(src->trusted_dir, src->paths_oldest_first.back());
    auto recs = follower->start(src->paths_oldest_first, r.query);
    if (!recs.ok()) {
        LOG_WARN("[pod %s/%s] cannot read logs: %s", r.ref.ns.c_str(), r.ref.pod.c_str(),
                 recs.message().c_str());
        return http_text(recs.error() == Error::Refused ? 403 : 500, recs.message() + "\n");
    }
    KubectlFormatter fmt(r.timestamps, limit);
    std::string first;
    fmt.append(*recs, &first);
    LOG_VERBOSE("[pod %s/%s] logs of %s for %s%s", r.ref.ns.c_str(), r.ref.pod.c_str(),
                r.ref.container.c_str(),
                req.client_cn.empty() ? "anonymous" : req.client_cn.c_str(),
                r.follow ? " (follow)" : "");
    if (!r.follow) return http_text(200, std::move(first));
    HttpResponse resp;
    resp.stream = std::make_shared<FollowStream>(std::move(r), *src, resolver_, config_, req.fd,
                                                 std::move(follower), std::move(first), fmt);
    return resp;
}

}  // namespace sk
