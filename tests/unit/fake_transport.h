// An HttpTransport (agent/kube/http_client.h) for controller tests: canned
// answers keyed by method and path, every request recorded, watch streams
// the test feeds, and an outage switch. Like CurlTransport, it answers on
// its TimerSource (the controllers' virtual clock), later, never inside
// request()/stream(), and never calls the callbacks of a cancelled id.
//
// Paths are what KubeClient appends to its server URL ("/api/v1/nodes",
// "/api/v1/pods?fieldSelector=..."). An answer registered for a path with
// its query matches that exact URL; one registered without a query matches
// the path with any query. A sequence of answers is consumed in order and
// its last one repeats; a request nothing matches gets the default answer
// (see set_default). A watch (stream()) matches answers registered under
// the method "WATCH" (then it is answered and closed, e.g. 410 or 500);
// without one it stays open for push() and end().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <json/json.h>

#include "agent/core/timer_source.h"
#include "agent/kube/http_client.h"

namespace sk::agent::test {

struct FakeRequest {
    uint64_t id = 0;
    std::string method, path, body;  // path: the URL without scheme and host
    bool stream = false;
    Json::Value json() const;  // the body parsed (null when empty or not JSON)
};

struct FakeAnswer {
    long status = 200;
    std::string body;            // sent as is
    bool refused = false;        // a transport failure (connection refused) instead
    uint64_t delay_ms = 0;       // delivered this long after the request (an answer in flight)
    uint32_t retry_after_s = 0;  // its Retry-After header

    static FakeAnswer ok(const Json::Value &v);
    static FakeAnswer error(long status, const std::string &reason = "",
                            const std::string &message = "");  // a Kubernetes Status body
    static FakeAnswer refuse() { return FakeAnswer{0, "", true}; }
    // This answer, delivered ms after the request.
    FakeAnswer after_ms(uint64_t ms) const {
        FakeAnswer a = *this;
        a.delay_ms = ms;
        return a;
    }
};

class FakeTransport : public HttpTransport {
  public:
    // Computes the answer from the request (e.g. echo a PATCH merged into
    // an object the test keeps).
    using Responder = std::function<FakeAnswer(const FakeRequest &)>;

    explicit FakeTransport(TimerSource &timers);
    ~FakeTransport() override;

    uint64_t request(HttpRequest req, HttpCallback done) override;
    uint64_t stream(HttpRequest req, HttpDataCallback on_data, HttpCallback done) override;
    void cancel(uint64_t id) override;

    // ---- answers ----
    void on(const std::string &method, const std::string &path, std::vector<FakeAnswer> seq);
    void on(const std::string &method, const std::string &path, Responder r);
    // Default: 200 with the request's body echoed ("{}" when it has none).
    void set_default(Responder r) { default_ = std::move(r); }
    // While on, every request and every new stream fails like a refused
    // connection, and the open streams end that way at once.
    void set_outage(bool on);

    // ---- recorded requests, in the order they were made ----
    const std::vector<FakeRequest> &requests() const { return log_; }
    // Those whose method matches and whose path starts with path_prefix.
    std::vector<FakeRequest> matching(const std::string &method,
                                      const std::string &path_prefix) const;
    size_t count(const std::string &method, const std::string &path_prefix) const {
        return matching(method, path_prefix).size();
    }
    void clear_log() { log_.clear(); }

    // ---- watch streams ----
    // The id of the newest open stream whose path starts with path_prefix; 0 if none.
    uint64_t open_stream(const std::string &path_prefix) const;
    size_t open_streams() const { return streams_.size(); }
    // Sends one watch event line on stream id (delivered on the loop).
    void push(uint64_t id, const std::string &type, const Json::Value &object);
    void push_raw(uint64_t id, const std::string &line);
    // Ends stream id with an answer (200: the server closed a healthy stream).
    void end(uint64_t id, FakeAnswer a);

  private:
    struct Stream {
        std::string path;
        HttpDataCallback on_data;
        HttpCallback done;
        bool ending = false;  // end() called, its answer not delivered yet
    };
    struct Rule {
        std::vector<FakeAnswer> seq;
        size_t next = 0;
        Responder fn;
    };
    FakeRequest record(const HttpRequest &req, bool is_stream);
    FakeAnswer answer_for(const FakeRequest &r);
    void deliver(const FakeRequest &r, HttpCallback done, FakeAnswer a);

    TimerSource &timers_;
    uint64_t next_id_ = 1;
    bool outage_ = false;
    std::vector<FakeRequest> log_;
    std::map<std::pair<std::string, std::string>, Rule> rules_;  // (method, path)
    Responder default_;
    std::map<uint64_t, HttpCallback> pending_;  // requests not answered yet
    std::map<uint64_t, Stream> streams_;
    // Shared with the deferred deliveries: they do nothing once the transport is gone.
    std::shared_ptr<bool> alive_;
};

}  // namespace sk::agent::test
