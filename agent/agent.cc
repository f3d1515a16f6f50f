#include "agent/agent.h"

#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "agent/fake_runtime.h"
#include "agent/peer_auth.h"
#include "agent/shim_runtime.h"
#include "common/log.h"
#include "common/strings.h"

namespace sk::agent {

bool job_state_is_alive(const std::string &out) {
    std::string s(trim(out));
    if (s.empty()) return true;  // exit 0 and no output: the command says "alive"
    for (const char *st : {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED",
                           "RESIZING", "PENDING", "REQUEUED", "SIGNALING", "STAGE_OUT"})
        if (s == st) return true;
    return false;
}

bool CommandJobChecker::alive(uint32_t job_id) {
    std::string cmd;
    for (size_t i = 0; i < tmpl_.size(); i++) {
        if (tmpl_.compare(i, 5, "{job}") == 0) {
            cmd += std::to_string(job_id);
            i += 4;
        } else {
            cmd += tmpl_[i];
        }
    }
    cmd += " 2>/dev/null";
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return true;  // cannot tell: never delete on doubt
    std::string out;
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    int rc = pclose(p);
    if (rc == -1) return true;
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) return false;
    return job_state_is_alive(out);
}

Agent::Agent(uv_loop_t *loop, const AgentConfig &cfg, KubeClient &kube, const Clock &clock,
             JobAliveChecker &checker, NodeSpecInput host)
    : loop_(loop), cfg_(cfg), kube_(kube), clock_(clock), checker_(checker), store_(cfg.state_dir),
      gc_timer_(loop) {
    ctx_.loop = loop;
    ctx_.kube = &kube;
    ctx_.cfg = &cfg;
    ctx_.clock = &clock;
    ctx_.store = &store_;
    ctx_.host = std::move(host);
    admin_uids_ = cfg.admin_uids;
    if (admin_uids_.empty()) {
        admin_uids_.push_back(0);
        if (struct passwd *pw = getpwnam(cfg.slurm_user.c_str())) admin_uids_.push_back(pw->pw_uid);
    }
}

Agent::~Agent() { stop(); }

Status Agent::start() {
    if (auto st = store_.init(); !st) return st;
    std::vector<std::string> bad;
    for (auto &rec : store_.load_all(&bad)) {
        if (rec.draining || !checker_.alive(rec.job.job_id)) {
            LOG_INFO("[node %s] job %u is gone: cleaning up", rec.node_name.c_str(), rec.job.job_id);
            auto vn = add_node(rec, {});
            std::string key = job_key(rec.job.job_id, rec.job.slurm_node);
            vn->deregister(0, "JobEnded", [this, key](uint32_t) { nodes_.erase(key); });
            continue;
        }
        LOG_INFO("[node %s] re-adopting job %u", rec.node_name.c_str(), rec.job.job_id);
        add_node(rec, {});
    }
    for (const auto &b : bad) LOG_WARN("state: ignoring %s", b.c_str());
    std::string dir = cfg_.socket_path.substr(0, cfg_.socket_path.rfind('/'));
    if (!dir.empty()) mkdir(dir.c_str(), 0755);
    server_ = std::make_unique<SocketServer>(
        loop_, cfg_.socket_path, static_cast<unsigned>(cfg_.socket_mode), cfg_.max_connections,
        [this](const std::shared_ptr<Connection> &c, const proto::Request &r) { handle(c, r); });
    if (auto st = server_->start(); !st) return st;
    gc_timer_.start(2000, [this] { gc(); }, cfg_.gc_interval_s * 1000);
    return {};
}

void Agent::stop() {
    if (server_) server_->stop();
    server_.reset();
    gc_timer_.stop();
    for (auto &[k, vn] : nodes_) vn->stop();
    nodes_.clear();
}

std::shared_ptr<VirtualNode> Agent::add_node(JobRecord rec, std::function<void(Status)> ready) {
    std::string key = job_key(rec.job.job_id, rec.job.slurm_node);
    auto vn = std::make_shared<VirtualNode>(ctx_, rec);
    nodes_[key] = vn;
    if (cfg_.runtime == "fake")
        vn->set_runtime(std::make_unique<FakeRuntime>(
            [this](std::function<void()> fn) { defer(loop_, std::move(fn)); },
            [this] { return clock_.now_s(); }));
    vn->start(std::move(ready));
    return vn;
}

void Agent::handle(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    if (auto st = authorize_op(req.op, c->peer(), admin_uids_); !st) {
        LOG_WARN("socket: refused '%s' from uid %u pid %d: %s", req.op.c_str(), c->peer().uid,
                 c->peer().pid, st.message().c_str());
        c->reply(proto::error_reply(req.id, st.failure()));
        return;
    }
    if (req.op == "register") return op_register(c, req);
    if (req.op == "deregister") return op_deregister(c, req);
    if (req.op == "status") return op_status(c, req);
    if (req.op == "list") return op_list(c, req);
    if (req.op == "attach") return op_attach(c, req);
}

void Agent::op_register(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto r = proto::register_from_json(req.body);
    if (!r) return c->reply(proto::error_reply(req.id, r.failure()));
    for (const auto &[k, v] : r->labels)
        if (starts_with(k, kLabelPrefix))
            return c->reply(proto::error_reply(
                req.id, fail(Error::InvalidArgument, "label '" + k + "': the prefix " +
                                                         kLabelPrefix + " is reserved")));
    std::string key = job_key(r->job_id, r->slurm_node);
    auto name = expand_node_name(cfg_.node_name_template, r->slurm_node, r->job_id);
    if (!name) return c->reply(proto::error_reply(req.id, name.failure()));
    auto existing = nodes_.find(key);
    if (existing != nodes_.end()) {  // idempotent: the prolog may retry
        proto::Reply rep;
        rep.id = req.id;
        rep.body = proto::to_json(proto::RegisterReply{existing->second->record().node_name});
        return c->reply(rep);
    }
    if (nodes_.size() >= cfg_.max_jobs)
        return c->reply(proto::error_reply(
            req.id, fail(Error::TooLarge, "this agent already serves max_jobs=" +
                                              std::to_string(cfg_.max_jobs) + " jobs")));
    JobRecord rec;
    rec.job = *r;
    rec.node_name = *name;
    rec.registered_at = clock_.now_s();
    if (auto st = store_.save(rec); !st) return c->reply(proto::error_reply(req.id, st.failure()));
    uint64_t id = req.id;
    std::weak_ptr<Connection> wc = c;
    std::string node_name = *name;
    uint32_t job_id = r->job_id;
    std::string slurm_node = r->slurm_node;
    add_node(rec, [this, wc, id, node_name, key, job_id, slurm_node](Status st) {
        auto conn = wc.lock();
        if (!st && st.error() != Error::Transient) {
            LOG_ERROR("[node %s] registration failed: %s", node_name.c_str(), st.message().c_str());
            // Forget it (deferred: we are inside the node's callback).
            defer(loop_, [this, key, job_id, slurm_node] {
                auto it = nodes_.find(key);
                if (it == nodes_.end()) return;
                it->second->stop();
                nodes_.erase(it);
                (void)store_.remove(job_id, slurm_node);
            });
            if (conn) conn->reply(proto::error_reply(id, st.failure()));
            return;
        }
        if (!conn) return;
        proto::Reply rep;
        rep.id = id;
        rep.body = proto::to_json(proto::RegisterReply{node_name});
        conn->reply(rep);
    });
}

void Agent::op_deregister(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto r = proto::deregister_from_json(req.body);
    if (!r) return c->reply(proto::error_reply(req.id, r.failure()));
    std::string key = job_key(r->job_id, r->slurm_node);
    auto it = nodes_.find(key);
    if (it == nodes_.end()) {  // nothing registered: already clean, say so
        proto::Reply rep;
        rep.id = req.id;
        rep.body = proto::to_json(proto::DeregisterReply{0});
        return c->reply(rep);
    }
    uint64_t id = req.id;
    std::weak_ptr<Connection> wc = c;
    it->second->deregister(r->grace_s, r->reason, [this, wc, id, key](uint32_t n) {
        defer(loop_, [this, key] { nodes_.erase(key); });
        if (auto conn = wc.lock()) {
            proto::Reply rep;
            rep.id = id;
            rep.body = proto::to_json(proto::DeregisterReply{n});
            conn->reply(rep);
        }
    });
}

void Agent::op_status(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto k = proto::job_key_from_json(req.body, "status");
    if (!k) return c->reply(proto::error_reply(req.id, k.failure()));
    auto it = nodes_.find(job_key(k->job_id, k->slurm_node));
    if (it == nodes_.end())
        return c->reply(proto::error_reply(
            req.id, fail(Error::NotFound, "job " + std::to_string(k->job_id) + " on " +
                                              k->slurm_node + " is not registered")));
    proto::Reply rep;
    rep.id = req.id;
    rep.body = proto::to_json(it->second->state());
    c->reply(rep);
}

void Agent::op_list(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    proto::Reply rep;
    rep.id = req.id;
    rep.body["nodes"] = Json::Value(Json::arrayValue);
    for (const auto &[k, vn] : nodes_) rep.body["nodes"].append(proto::to_json(vn->state()));
    c->reply(rep);
}

void Agent::op_attach(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto a = proto::attach_from_json(req.body);
    if (!a) return c->reply(proto::error_reply(req.id, a.failure()));
    auto it = nodes_.find(job_key(a->job_id, a->slurm_node));
    if (it == nodes_.end())
        return c->reply(proto::error_reply(
            req.id, fail(Error::NotFound, "job " + std::to_string(a->job_id) +
                                              " is not registered on " + a->slurm_node)));
    VirtualNode &vn = *it->second;
    ShimAuth mode = cfg_.shim_auth == "uid" ? ShimAuth::Uid : ShimAuth::Cgroup;
    std::string cg = mode == ShimAuth::Cgroup ? read_proc_cgroup(c->peer().pid) : "";
    if (auto st = authorize_attach(c->peer(), a->job_id, vn.record().job.uid, mode, cg); !st) {
        LOG_WARN("%s refused attach from uid %u pid %d: %s", vn.prefix().c_str(), c->peer().uid,
                 c->peer().pid, st.message().c_str());
        return c->reply(proto::error_reply(req.id, st.failure()));
    }
    if (cfg_.runtime == "fake")
        return c->reply(proto::error_reply(
            req.id, fail(Error::Unavailable, "this agent runs with runtime=fake")));
    std::string dir = cfg_.shim_state_dir + "/job_" + std::to_string(a->job_id) + "_" + a->slurm_node;
    mkdir(cfg_.shim_state_dir.c_str(), 0755);
    if (mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) {
        if (chown(dir.c_str(), vn.record().job.uid, vn.record().job.gid) != 0)
            LOG_VERBOSE("%s cannot chown %s: %s", vn.prefix().c_str(), dir.c_str(), strerror(errno));
    }
    proto::Reply rep;
    rep.id = req.id;
    rep.body = proto::to_json(proto::AttachReply{vn.record().node_name, vn.record().job.gpus, dir});
    c->reply(rep);
    LOG_INFO("%s shim attached (pid %d)", vn.prefix().c_str(), c->peer().pid);
    vn.set_runtime(std::make_unique<ShimRuntime>(c, vn.prefix()));
}

// Nodes of this agent's Slurm node whose jobs are gone (agent down at the
// epilog, state lost) are deleted with their Lease.
void Agent::gc() {
    std::string sel = std::string(kLabelPrefix) + "slurm-node=" + ctx_.host.job.slurm_node + "," +
                      kLabelPrefix + "cluster=" + cfg_.cluster_name;
    kube_.get("/api/v1/nodes?labelSelector=" + url_escape(sel), [this](Result<Json::Value> r) {
        if (!r) {
            LOG_VERBOSE("gc: node list failed: %s", r.message().c_str());
            return;
        }
        for (const auto &n : (*r)["items"]) {
            std::string name = n["metadata"]["name"].asString();
            const Json::Value &l = n["metadata"]["labels"];
            auto job = parse_uint(l[std::string(kLabelPrefix) + "job-id"].asString(), "job-id",
                                  UINT32_MAX);
            if (!job) continue;
            std::string key = job_key(static_cast<uint32_t>(*job),
                                      l[std::string(kLabelPrefix) + "slurm-node"].asString());
            if (nodes_.count(key) || checker_.alive(static_cast<uint32_t>(*job))) continue;
            LOG_INFO("[node %s] gc: job %llu is gone: deleting the Node and its Lease", name.c_str(),
                     static_cast<unsigned long long>(*job));
            kube_.del(KubeClient::lease(name), Json::Value(), [](Result<Json::Value>) {});
            kube_.del(KubeClient::node(name), Json::Value(), [name](Result<Json::Value> d) {
                if (!d && d.error() != Error::NotFound)
                    LOG_WARN("[node %s] gc: delete failed: %s", name.c_str(), d.message().c_str());
            });
        }
    });
}

}  // namespace sk::agent
