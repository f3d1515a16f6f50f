#include "tests/unit/fake_transport.h"

#include "common/daemons/json.h"

namespace sk::agent::test {

namespace {

// "https://h:1/api/v1/x?y" -> "/api/v1/x?y"
std::string url_path(const std::string &url) {
    size_t scheme = url.find("://");
    size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
    return slash == std::string::npos ? "/" : url.substr(slash);
}

}  // namespace

Json::Value FakeRequest::json() const {
    if (body.empty()) return Json::Value();
    auto v = json::parse(body);
    return v ? *v : Json::Value();
}

FakeAnswer FakeAnswer::ok(const Json::Value &v) {
    return FakeAnswer{200, json::write(v), false};
}

FakeAnswer FakeAnswer::error(long status, const std::string &reason, const std::string &message) {
    Json::Value s(Json::objectValue);
    s["kind"] = "Status";
    s["apiVersion"] = "v1";
    s["status"] = "Failure";
    s["reason"] = reason;
    s["message"] = message.empty() ? "fake " + std::to_string(status) : message;
    s["code"] = static_cast<Json::Int>(status);
    return FakeAnswer{status, json::write(s), false};
}

FakeTransport::FakeTransport(TimerSource &timers)
    : timers_(timers), alive_(std::make_shared<bool>(true)) {
    default_ = [](const FakeRequest &r) {
        return FakeAnswer{200, r.body.empty() ? "{}" : r.body, false};
    };
}

FakeTransport::~FakeTransport() {
    *alive_ = false;
}

FakeRequest FakeTransport::record(const HttpRequest &req, bool is_stream) {
    FakeRequest r;
    r.id = next_id_++;
    r.method = req.method;
    r.path = url_path(req.url);
    r.body = req.body;
    r.stream = is_stream;
    log_.push_back(r);
    return r;
}

void FakeTransport::on(const std::string &method, const std::string &path,
                       std::vector<FakeAnswer> seq) {
    Rule r;
    r.seq = std::move(seq);
    rules_[{method, path}] = std::move(r);
}

void FakeTransport::on(const std::string &method, const std::string &path, Responder fn) {
    Rule r;
    r.fn = std::move(fn);
    rules_[{method, path}] = std::move(r);
}

FakeAnswer FakeTransport::answer_for(const FakeRequest &r) {
    if (outage_) return FakeAnswer::refuse();
    auto it = rules_.find({r.method, r.path});
    if (it == rules_.end()) it = rules_.find({r.method, r.path.substr(0, r.path.find('?'))});
    if (it == rules_.end()) return default_(r);
    Rule &rule = it->second;
    if (rule.fn) return rule.fn(r);
    if (rule.seq.empty()) return default_(r);
    FakeAnswer a = rule.seq[rule.next];
    if (rule.next + 1 < rule.seq.size()) rule.next++;
    return a;
}

void FakeTransport::deliver(const FakeRequest &r, HttpCallback done, FakeAnswer a) {
    uint64_t id = r.id;
    pending_[id] = std::move(done);
    std::string what = r.method + " " + r.path;
    std::weak_ptr<bool> alive = alive_;
    uint64_t delay_ms = a.delay_ms;
    timers_.defer(
        [this, alive, id, what, a = std::move(a)] {
            auto live = alive.lock();
            if (!live || !*live) return;
            auto it = pending_.find(id);
            if (it == pending_.end()) return;  // cancelled
            HttpCallback cb = std::move(it->second);
            pending_.erase(it);
            if (a.refused)
                cb(fail(Error::Transient, what + ": Failed to connect: Connection refused"));
            else
                cb(HttpResponse{a.status, a.body, a.retry_after_s});
        },
        delay_ms);
}

uint64_t FakeTransport::request(HttpRequest req, HttpCallback done) {
    FakeRequest r = record(req, false);
    deliver(r, std::move(done), answer_for(r));
    return r.id;
}

uint64_t FakeTransport::stream(HttpRequest req, HttpDataCallback on_data, HttpCallback done) {
    FakeRequest r = record(req, true);
    FakeRequest as_watch = r;
    as_watch.method = "WATCH";
    bool canned = rules_.count({"WATCH", r.path}) ||
                  rules_.count({"WATCH", r.path.substr(0, r.path.find('?'))});
    if (outage_ || canned) {  // answered and closed at once (a refusal, a 410, a 500)
        deliver(r, std::move(done), answer_for(as_watch));
        return r.id;
    }
    streams_[r.id] = Stream{r.path, std::move(on_data), std::move(done), false};
    return r.id;
}

void FakeTransport::cancel(uint64_t id) {
    pending_.erase(id);
    streams_.erase(id);
}

void FakeTransport::set_outage(bool on) {
    outage_ = on;
    if (!on) return;
    std::vector<uint64_t> open;
    for (const auto &[id, s] : streams_)
        if (!s.ending) open.push_back(id);
    for (uint64_t id : open)
        end(id, FakeAnswer::refuse());
}

std::vector<FakeRequest> FakeTransport::matching(const std::string &method,
                                                 const std::string &path_prefix) const {
    std::vector<FakeRequest> out;
    for (const auto &r : log_)
        if (r.method == method && r.path.compare(0, path_prefix.size(), path_prefix) == 0)
            out.push_back(r);
    return out;
}

uint64_t FakeTransport::open_stream(const std::string &path_prefix) const {
    uint64_t found = 0;
    for (const auto &[id, s] : streams_)
        if (!s.ending && s.path.compare(0, path_prefix.size(), path_prefix) == 0) found = id;
    return found;
}

void FakeTransport::push(uint64_t id, const std::string &type, const Json::Value &object) {
    Json::Value ev(Json::objectValue);
    ev["type"] = type;
    ev["object"] = object;
    push_raw(id, json::write(ev));
}

void FakeTransport::push_raw(uint64_t id, const std::string &line) {
    std::weak_ptr<bool> alive = alive_;
    timers_.defer([this, alive, id, line] {
        auto live = alive.lock();
        if (!live || !*live) return;
        auto it = streams_.find(id);
        if (it == streams_.end()) return;
        HttpDataCallback on_data = it->second.on_data;  // it may cancel the stream
        on_data(line + "\n");
    });
}

void FakeTransport::end(uint64_t id, FakeAnswer a) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    it->second.ending = true;
    std::string what = "GET " + it->second.path;
    std::weak_ptr<bool> alive = alive_;
    // After the events pushed before it (deferred calls run in order).
    timers_.defer([this, alive, id, what, a = std::move(a)] {
        auto live = alive.lock();
        if (!live || !*live) return;
        auto s = streams_.find(id);
        if (s == streams_.end()) return;  // cancelled
        HttpCallback cb = std::move(s->second.done);
        streams_.erase(s);
        if (a.refused)
            cb(fail(Error::Transient, what + ": Failed to connect: Connection refused"));
        else
            cb(HttpResponse{a.status, a.body, a.retry_after_s});
    });
}

}  // namespace sk::agent::test
