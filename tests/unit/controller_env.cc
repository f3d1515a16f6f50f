#include "tests/unit/controller_env.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace sk::agent::test {

namespace {

Json::Value with_meta(Json::Value obj, const std::string &uid, const std::string &rv) {
    if (!uid.empty()) obj["metadata"]["uid"] = uid;
    obj["metadata"]["resourceVersion"] = rv;
    return obj;
}

}  // namespace

Json::Value make_pod(const std::string &name, const std::string &uid, const std::string &rv) {
    Json::Value p(Json::objectValue);
    p["apiVersion"] = "v1";
    p["kind"] = "Pod";
    p["metadata"]["name"] = name;
    p["metadata"]["namespace"] = "default";
    p["metadata"]["uid"] = uid;
    p["metadata"]["resourceVersion"] = rv;
    p["spec"]["nodeName"] = kNodeName;
    Json::Value c(Json::objectValue);
    c["name"] = "main";
    c["image"] = "busybox";
    c["command"].append("sleep");
    c["command"].append("1000");
    p["spec"]["containers"].append(c);
    p["status"]["phase"] = "Pending";
    return p;
}

ControllerEnv::ControllerEnv() : timers_(SystemClock().now_us()) {
    http_ = std::make_unique<FakeTransport>(timers_);
    kube_ = std::make_unique<KubeClient>(*http_, "https://api.test:6443", 1000);
    cfg_.api.server = "https://api.test:6443";
    cfg_.cluster_name = "unit";
    cfg_.slurm_node = "n1";
    cfg_.node_address = "127.0.0.1";
    cfg_.lease_duration_s = 10;
    cfg_.lease_renew_s = 1;  // the shortest the config allows: renewals every second
    cfg_.node_check_s = 0;
    cfg_.allowed_namespaces = {"*"};  // pods of any namespace, unless a test narrows it
    // The controllers with the agent's identity: a node's own certificate (its
    // CSR against a signer) is the component tests' (tests/component).
    cfg_.node_identity = "agent";
    char tmpl[] = "/tmp/sk-ctl-XXXXXX";
    char *d = mkdtemp(tmpl);
    dir_ = d ? d : "/tmp";
    cfg_.state_dir = dir_;
    cfg_.shim_state_dir = dir_ + "/shim";
    store_ = std::make_unique<JobStore>(dir_);
    (void)store_->init();
    ctx_.timers = &timers_;
    ctx_.kube = kube_.get();
    ctx_.cfg = &cfg_;
    ctx_.clock = &timers_;
    ctx_.store = store_.get();
    ctx_.host.cluster = cfg_.cluster_name;
    ctx_.host.node_address = cfg_.node_address;
    ctx_.host.job.slurm_node = "n1";
}

ControllerEnv::~ControllerEnv() {
    close();
    std::error_code ec;
    if (dir_.rfind("/tmp/sk-ctl-", 0) == 0) std::filesystem::remove_all(dir_, ec);
}

void ControllerEnv::serve_node_and_lease() {
    http_->on("POST", "/api/v1/nodes", [this](const FakeRequest &r) {
        node_creates_++;
        std::string uid =
            node_creates_ == 1 ? kNodeUid : "node-uid-" + std::to_string(node_creates_);
        last_node_ = with_meta(r.json(), uid, std::to_string(100 + node_creates_));
        return FakeAnswer::ok(last_node_);
    });
    http_->on("GET", kNodePath, [this](const FakeRequest &) {
        if (last_node_.isNull()) return FakeAnswer::error(404, "NotFound");
        return FakeAnswer::ok(last_node_);
    });
    http_->on("POST", kLeasesPath, [this](const FakeRequest &r) {
        lease_creates_++;
        return FakeAnswer::ok(
            with_meta(r.json(), "lease-uid-" + std::to_string(lease_creates_), "200"));
    });
    http_->on("PUT", kLeasePath, [](const FakeRequest &r) {
        Json::Value l = r.json();
        long rv = std::strtol(l["metadata"]["resourceVersion"].asCString(), nullptr, 10);
        return FakeAnswer::ok(with_meta(l, "", std::to_string(rv + 1)));
    });
}

FakeAnswer pod_list(const std::vector<Json::Value> &pods, const std::string &rv) {
    Json::Value list(Json::objectValue);
    list["kind"] = "PodList";
    list["metadata"]["resourceVersion"] = rv;
    list["items"] = Json::Value(Json::arrayValue);
    for (const auto &p : pods)
        list["items"].append(p);
    return FakeAnswer::ok(list);
}

void ControllerEnv::serve_pods(const std::vector<Json::Value> &pods, const std::string &list_rv) {
    for (const auto &p : pods)
        serve_pod(p);
    http_->on("GET", kPodsPath, {pod_list(pods, list_rv)});
}

void ControllerEnv::serve_pod(const Json::Value &p) {
    const std::string ns = p["metadata"]["namespace"].asString();
    const std::string name = p["metadata"]["name"].asString();
    const std::string key = ns + "/" + name;
    pods_[key] = p;
    http_->on("PATCH", KubeClient::pod(ns, name) + "/status", [this, key](const FakeRequest &r) {
        auto &fails = patch_failures_[key];
        if (!fails.empty()) {
            FakeAnswer a = fails.front();
            fails.erase(fails.begin());
            return a;
        }
        Json::Value &pod = pods_[key];
        const Json::Value st = r.json()["status"];
        for (const auto &f : st.getMemberNames()) {
            if (f.rfind("$setElementOrder/", 0) == 0) continue;
            if (st[f].isNull())
                pod["status"].removeMember(f);
            else
                pod["status"][f] = st[f];
        }
        long rv = std::strtol(pod["metadata"]["resourceVersion"].asCString(), nullptr, 10);
        pod["metadata"]["resourceVersion"] = std::to_string(rv + 1);
        return FakeAnswer::ok(pod);
    });
}

void ControllerEnv::fail_pod_patches(const std::string &name, std::vector<FakeAnswer> first) {
    patch_failures_["default/" + name] = std::move(first);
}

Json::Value ControllerEnv::served_pod(const std::string &name) const {
    auto it = pods_.find("default/" + name);
    return it == pods_.end() ? Json::Value() : it->second;
}

JobRecord ControllerEnv::record() const {
    JobRecord r;
    r.job.job_id = 42;
    r.job.slurm_node = "n1";
    r.job.user = "alice";
    r.job.uid = getuid();
    r.job.gid = getgid();
    r.job.cluster = "unit";
    r.node_name = kNodeName;
    return r;
}

std::shared_ptr<VirtualNode> ControllerEnv::start_node(std::function<void(Status)> ready) {
    node = std::make_shared<VirtualNode>(ctx_, record());
    node->start([ready = std::move(ready)](const Status &st) {
        if (ready) ready(st);
    });
    return node;
}

FakeRuntime *ControllerEnv::attach_fake_runtime(int shim_pid) {
    auto rt = std::make_unique<FakeRuntime>(
        [this](std::function<void()> fn) { timers_.defer(std::move(fn)); },
        [this] { return timers_.now_s(); });
    FakeRuntime *p = rt.get();
    node->set_runtime(std::move(rt), shim_pid);
    return p;
}

bool ControllerEnv::run_until(const std::function<bool()> &pred, uint64_t timeout_ms) {
    const uint64_t end = timers_.now_ms() + timeout_ms;
    for (;;) {
        timers_.run_due();
        if (pred()) return true;
        auto next = timers_.next_due();
        if (!next || *next > end) break;
        timers_.advance_to(*next);
    }
    // As long as the test asked to wait, as a real loop would have.
    timers_.advance_to(end);
    timers_.run_due();
    return pred();
}

void ControllerEnv::run_for(uint64_t ms) {
    run_until([] { return false; }, ms);
}

int ControllerEnv::close() {
    if (closed_) return 0;
    closed_ = true;
    if (node) node->stop();
    node.reset();
    cancel_leftover_deletes(ctx_);
    timers_.cancel_deferred();
    http_.reset();
    // What is left armed is a timer whose owner outlived the node: a leak.
    return timers_.next_due() ? -1 : 0;
}

}  // namespace sk::agent::test
