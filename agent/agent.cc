#include <config.h>  // PACKAGE_VERSION (agent/core/agent_config.h is the agent's own)

#include "agent/agent.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "agent/controllers/drain.h"
#include "agent/controllers/env_resolver.h"
#include "agent/controllers/node_builder.h"
#include "agent/core/peer_auth.h"
#include "agent/core/slurm_time.h"
#include "agent/shim_runtime.h"
#include "common/cgroup/cgroup_files.h"
#include "common/cgroup/pod_cgroup.h"
#include "common/daemons/log_paths.h"
#include "common/daemons/supervisor.h"
#include "common/fs.h"
#include "common/k8s_names.h"
#include "common/log.h"
#include "common/procfs.h"
#include "common/rfc3339.h"
#include "common/strings.h"
#include "uv/command_runner.h"
#include "uv/handles.h"

namespace sk::agent {

// squeue -j ID prints one line per job it matches: for the id of a job
// array (the id one of its tasks carries) or of a het job's leader, every
// task or component. Alive when any of them holds its allocation (never
// delete on doubt: a virtual node whose own task ended is collected once
// none of them runs). A job waiting to run again (PENDING, REQUEUED,
// REQUEUE_HOLD: requeued by scontrol, or by Slurm after a node failure
// with --requeue) holds no node: the prolog registers a job only once it
// has its allocation, so a virtual node of a job that waits is a leftover
// (the job comes back, if it does, through a new prolog and a new Node).
bool job_state_is_alive(const std::string &out) {
    std::string s(trim(out));
    if (s.empty()) return true;  // exit 0 and no output: the command says "alive"
    for (const auto &line : split(s, '\n'))
        for (const char *st : {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED",
                               "RESIZING", "SIGNALING", "STAGE_OUT"})
            if (trim(line) == st) return true;
    return false;
}

namespace {

// The admin socket's directory: made mode 0700, or one already there checked
// (a directory, not a link, the agent's own) and set to 0700, so that only
// the agent's user (root) can connect to what is in it.
Status prepare_admin_dir(const std::string &dir) {
    auto sys = [](const std::string &what) {
        return fail(Error::Io, what + ": " + std::strerror(errno));
    };
    if (dir.empty()) return {};
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return sys("cannot make the admin socket directory " + dir);
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return sys("admin socket directory " + dir + " (a directory, not a link)");
    struct stat st;
    Status out;
    if (fstat(fd, &st) != 0)
        out = sys("fstat " + dir);
    else if (st.st_uid != geteuid())
        out = fail(Error::Forbidden, "admin socket directory " + dir + " belongs to uid " +
                                         std::to_string(st.st_uid) + ", not to the agent's uid " +
                                         std::to_string(geteuid()) + ": remove it");
    else if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) != 0)
        out = sys("chmod 0700 " + dir);
    close(fd);
    return out;
}

// The per-job shim dir (pod logs, pod state) goes when the job has ended on
// this node: at the epilog's deregister, after the extern step stopped the
// shim. Its contents belong to the job's user, who may have put anything
// there (symlinks too), so `rm -rf` runs as the dir's owner, never as root;
// root then removes only the emptied directory (its parent is root's).
}  // namespace

JobState job_state_of(const CommandResult &r) {
    if (!r.ran) return JobState::Unknown;
    if (r.exit_code == 0) {
        if (!job_state_is_alive(r.output)) return JobState::Gone;
        bool suspended = false, running = false;
        for (const auto &line : split(std::string(trim(r.output)), '\n')) {
            std::string st(trim(line));
            if (st == "SUSPENDED")
                suspended = true;
            else if (job_state_is_alive(st) && !st.empty())
                running = true;
        }
        return suspended && !running ? JobState::Suspended : JobState::Alive;
    }
    if (r.errors.find("Invalid job id") != std::string::npos) return JobState::Gone;
    if (r.exit_code >= 1 && r.exit_code <= 125 && trim(r.errors).empty()) return JobState::Gone;
    return JobState::Unknown;
}

std::string end_reason_of(const std::string &state_output) {
    static const std::pair<const char *, const char *> kReasons[] = {
        {"COMPLETED", "JobCompleted"}, {"FAILED", "JobFailed"},     {"OUT_OF_MEMORY", "JobFailed"},
        {"CANCELLED", "JobCancelled"}, {"TIMEOUT", "TimeLimit"},    {"NODE_FAIL", "NodeFail"},
        {"PREEMPTED", "Preempted"},    {"BOOT_FAIL", "JobEnded"},   {"DEADLINE", "JobEnded"},
        {"PENDING", "Requeued"},       {"REQUEUED", "Requeued"},    {"REQUEUE_HOLD", "Requeued"},
        {"REQUEUE_FED", "Requeued"},   {"SPECIAL_EXIT", "Requeued"}};
    for (const auto &line : split(std::string(trim(state_output)), '\n')) {
        std::string st(trim(line));
        // squeue may add who cancelled it ("CANCELLED by 0") in other formats.
        if (auto sp = st.find(' '); sp != std::string::npos) st.resize(sp);
        for (const auto &[state, reason] : kReasons)
            if (st == state) return reason;
    }
    return "JobEnded";
}

void CommandSlurmJobs::state(uint32_t job_id, std::function<void(JobState)> cb) {
    query(job_id, [cb](JobState s, const std::string &) { cb(s); });
}

void CommandSlurmJobs::end_state(uint32_t job_id, std::function<void(JobState, std::string)> cb) {
    query(job_id, [cb](JobState s, const std::string &output) {
        cb(s, s == JobState::Gone ? end_reason_of(output) : "");
    });
}

void CommandSlurmJobs::query(uint32_t job_id,
                             const std::function<void(JobState, const std::string &)> &cb) {
    std::string cmd = expand_job_command(alive_tmpl_, job_id);
    commands_.run(cmd, [cb, cmd, job_id, doubtful = doubtful_](const CommandResult &r) {
        JobState s = job_state_of(r);
        // Cannot tell: never delete on doubt. Said once per
        // job until Slurm answers again (the job state check
        // asks every 10 s while slurmctld is down).
        if (s != JobState::Unknown) {
            if (doubtful->erase(job_id))
                LOG_INFO("job %u: job_alive_command answers again", job_id);
        } else {
            bool first = doubtful->insert(job_id).second;
            std::string why =
                !r.ran ? r.error
                       : "exit " + std::to_string(r.exit_code) + ": " + std::string(trim(r.errors));
            SK_LOG(first ? ::sk::log::Level::Warning : ::sk::log::Level::Verbose,
                   "job_alive_command '%s' could not tell (%s): assuming the "
                   "job is alive%s",
                   cmd.c_str(), why.c_str(), first ? " (said again only once it answers)" : "");
        }
        cb(s, r.output);
    });
}

void CommandSlurmJobs::end_time(uint32_t job_id, std::function<void(int64_t)> cb) {
    if (end_tmpl_.empty()) return defer(loop_, [cb] { cb(0); });
    std::string cmd = expand_job_command(end_tmpl_, job_id);
    commands_.run(cmd, [cb, cmd, job_id](const CommandResult &r) {
        if (!r.ran || r.exit_code != 0) {
            LOG_VERBOSE("job %u: job_end_command '%s' failed (%s, exit %d)", job_id, cmd.c_str(),
                        r.error.c_str(), r.exit_code);
            return cb(0);
        }
        int64_t t = parse_slurm_time(r.output);
        if (t < 0) {
            LOG_WARN(
                "job %u: job_end_command '%s' printed '%s', not a Slurm time; no cordon "
                "ahead of the end",
                job_id, cmd.c_str(), std::string(trim(r.output)).c_str());
            return cb(0);
        }
        cb(t);
    });
}

Agent::Agent(uv_loop_t *loop, const AgentConfig &cfg, KubeClient &kube, const Clock &clock,
             SlurmJobs &slurm, NodeSpecInput host)
    : loop_(loop),
      cfg_(cfg),
      kube_(kube),
      clock_(clock),
      slurm_(slurm),
      store_(cfg.state_dir),
      timers_(loop),
      identities_(ctx_),
      collector_(ctx_, kube, slurm, store_, loop,
                 [this](const std::string &key) { return nodes_.count(key) != 0; }),
      cgroups_(cfg),
      gc_timer_(loop),
      pods_timer_(loop) {
    ctx_.timers = &timers_;
    ctx_.kube = &kube;
    ctx_.cfg = &cfg;
    ctx_.clock = &clock;
    ctx_.store = &store_;
    store_.set_background_sync(
        [loop](const std::string &path) { run_in_pool(loop, [path] { sync_to_disk(path); }); });
    ctx_.host = std::move(host);
    ctx_.events = &events_;
    ctx_.slurm = &slurm_;
    ctx_.mounts = &tmpfs_;
    admin_uids_ = cfg.admin_uids;
    if (admin_uids_.empty()) {
        admin_uids_.push_back(0);
        if (struct passwd *pw = getpwnam(cfg.slurm_user.c_str())) admin_uids_.push_back(pw->pw_uid);
    }
}

Agent::~Agent() {
    stop();
}

Status Agent::start() {
    if (auto st = store_.init(); !st) return st;
    if (!cfg_.image_store.empty() && !runtime_factory_) {
        auto s = image_store_settings(cfg_);
        if (!s) return s.failure();
        if (access(s->mount_program.c_str(), X_OK) != 0)
            return fail(Error::NotFound,
                        "image_store_mount_program " + s->mount_program +
                            " cannot be run: install fuse-overlayfs (the jobs' podman reads the "
                            "image store through it) or set image_store= to turn the store off");
        images_ = std::make_unique<ImageStore>(loop_, std::move(*s));
        images_->set_in_use([this] {
            std::set<std::string> names;
            for (const auto &[k, vn] : nodes_)
                vn->images_in_use(&names);
            return names;
        });
        if (auto st = images_->start(); !st) return st;
        LOG_INFO("image store %s (user %s, bound %llu MiB)", cfg_.image_store.c_str(),
                 cfg_.image_store_user.c_str(),
                 static_cast<unsigned long long>(cfg_.image_store_size >> 20));
    }
    if (cfg_.pod_network == "cni" && !runtime_factory_) {
        PodNetworkSettings ns;
        ns.cni.plugin_dir = cfg_.cni_plugin_dir;
        ns.cni.bridge = cfg_.pod_network_bridge;
        ns.cni.subnet = cfg_.pod_cidr;
        ns.cni.masquerade = cfg_.pod_network_masquerade;
        ns.cni.mtu = static_cast<unsigned>(cfg_.pod_network_mtu);
        ns.cni.ipam_dir = cfg_.pod_network_dir + "/ipam";
        ns.dir = cfg_.pod_network_dir + "/pods";
        networks_ = std::make_unique<CniPodNetworks>(loop_, std::move(ns));
        if (auto st = networks_->start(); !st) return st;
        ctx_.networks = networks_.get();
        LOG_INFO("pod network: %s on bridge %s (%zu pods attached)", cfg_.pod_cidr.c_str(),
                 cfg_.pod_network_bridge.c_str(), networks_->attached().size());
        routes_ = std::make_unique<PodRoutes>(loop_);
        routes_->start([this] { list_route_nodes(); });
    }
    std::vector<std::string> bad;
    for (auto &rec : store_.load_all(&bad)) {
        std::string key = job_key(rec.job.job_id, rec.job.slurm_node);
        if (rec.draining) {
            LOG_INFO("[node %s] job %u was ending: finishing its cleanup", rec.node_name.c_str(),
                     rec.job.job_id);
            auto vn = add_node(rec, {});
            vn->deregister(0, "JobEnded", [this, key](uint32_t) { forget_node(key); });
            continue;
        }
        // Re-adopt at once (pods keep being served), then ask Slurm off the
        // loop whether the job still runs; a gone job is cleaned up then.
        LOG_INFO("[node %s] re-adopting job %u", rec.node_name.c_str(), rec.job.job_id);
        collect_if_gone(add_node(rec, {}), "it ended while the agent was down");
    }
    for (const auto &b : bad)
        LOG_WARN("state: ignoring %s", b.c_str());
    if (keeps_identities()) {
        std::set<std::string> held;
        for (const auto &[k, vn] : nodes_)
            held.insert(vn->record().node_name);
        identities_.keep_kept_files(cfg_.slurm_node, held);
        if (identities_.size())
            LOG_INFO("keeping %zu node identities for the next jobs on their slots",
                     identities_.size());
    }
    std::string dir = cfg_.socket_path.substr(0, cfg_.socket_path.rfind('/'));
    if (!dir.empty()) mkdir(dir.c_str(), 0755);
    if (auto st =
            prepare_admin_dir(cfg_.admin_socket_path.substr(0, cfg_.admin_socket_path.rfind('/')));
        !st)
        return st;
    SocketLimits limits;
    limits.max_connections = cfg_.max_connections;
    limits.max_per_uid = cfg_.max_connections_per_uid;
    limits.admin_connections = cfg_.admin_connections;
    limits.idle_timeout_ms = cfg_.socket_idle_timeout_s * 1000;
    // The same requests, from root and the SlurmUser only, on a socket no
    // other user can reach: a flood of the agent socket never delays them.
    // It listens first: whoever finds the agent socket open finds it too.
    SocketLimits admin_limits = limits;
    admin_limits.admin_only = true;
    admin_server_ = std::make_unique<SocketServer>(
        loop_, cfg_.admin_socket_path, 0600, admin_limits,
        [this](const PeerCred &peer) { return standing(peer); },
        [this](const std::shared_ptr<Connection> &c, const proto::Request &r) { handle(c, r); });
    if (auto st = admin_server_->start(); !st) return st;
    server_ = std::make_unique<SocketServer>(
        loop_, cfg_.socket_path, static_cast<unsigned>(cfg_.socket_mode), limits,
        [this](const PeerCred &peer) { return standing(peer); },
        [this](const std::shared_ptr<Connection> &c, const proto::Request &r) { handle(c, r); });
    if (auto st = server_->start(); !st) return st;
    gc_timer_.start(
        2000, [this] { gc(); }, cfg_.gc_interval_s * 1000);
    pods_timer_.start(
        1000, [this] { report_pods(); }, 2000);
    return {};
}

void Agent::collect_if_gone(const std::shared_ptr<VirtualNode> &vn, const char *why) {
    std::string key = job_key(vn->record().job.job_id, vn->record().job.slurm_node);
    std::weak_ptr<VirtualNode> weak = vn;
    slurm_.end_state(
        vn->record().job.job_id, [this, key, weak, why](JobState s, const std::string &reason) {
            auto node = weak.lock();
            if (s != JobState::Gone || !node) return;  // never on Unknown
            auto it = nodes_.find(key);
            // Deregistered (and maybe registered again) or ending meanwhile:
            // that end does the cleanup.
            if (it == nodes_.end() || it->second != node || node->draining()) return;
            const proto::RegisterRequest &job = node->record().job;
            LOG_WARN("%s job %u is gone in Slurm but still registered (%s): deregistering it",
                     node->prefix().c_str(), job.job_id, why);
            std::string dir = shim_state_dir_for(cfg_, job.job_id, job.slurm_node);
            node->deregister(
                0, reason,
                [this, key, dir, job_id = job.job_id, slurm_node = job.slurm_node](uint32_t) {
                    forget_node(key);
                    remove_job_dirs(loop_, dir, job_id, slurm_node);
                });
        });
}

void Agent::forget_node(const std::string &key) {
    defer(loop_, [this, key] { release_node(key); });
}

bool Agent::keeps_identities() const {
    return node_names_per_slot(cfg_) && cfg_.node_identity == "bootstrap";
}

void Agent::release_node(const std::string &key) {
    auto it = nodes_.find(key);
    if (it == nodes_.end()) return;
    std::shared_ptr<VirtualNode> vn = it->second;
    nodes_.erase(it);
    vn->stop();
    if (vn->record().slot >= 0 && keeps_identities()) identities_.keep(vn->record().node_name);
}

uint32_t Agent::free_slot(const std::string &slurm_node) const {
    std::set<int32_t> held;
    for (const auto &[k, vn] : nodes_)
        if (vn->record().job.slurm_node == slurm_node) held.insert(vn->record().slot);
    uint32_t s = 0;
    while (held.count(static_cast<int32_t>(s)))
        s++;
    return s;
}

void Agent::report_pods() {
    if (!obs_ || !obs_->pods) return;
    std::map<std::string, int64_t> by_phase;
    for (const auto &[k, vn] : nodes_)
        vn->count_phases(&by_phase);
    obs_->pods(by_phase);
}

void Agent::stop() {
    if (streams_) streams_->set_resolver(nullptr);
    streams_ = nullptr;
    if (server_) server_->stop();
    server_.reset();
    if (admin_server_) admin_server_->stop();
    admin_server_.reset();
    gc_timer_.stop();
    pods_timer_.stop();
    routes_stopped_ = true;
    routes_timer_.stop();
    if (routes_watch_) ctx_.agent_api().cancel(routes_watch_);
    routes_watch_ = 0;
    for (auto &[k, vn] : nodes_)
        vn->stop();
    nodes_.clear();
    identities_.stop();
    cancel_leftover_deletes(ctx_);
}

std::shared_ptr<VirtualNode> Agent::add_node(JobRecord rec, std::function<void(Status)> ready) {
    std::string key = job_key(rec.job.job_id, rec.job.slurm_node);
    std::shared_ptr<void> endpoint;
    if (endpoints_) {
        auto e = endpoints_->open(rec.node_name,
                                  shim_state_dir_for(cfg_, rec.job.job_id, rec.job.slurm_node));
        if (e) {
            rec.kubelet_port = e->port;
            endpoint = e->endpoint;
        } else {  // its Node names the shared port, which serves no stats
            LOG_ERROR("[node %s] %s", rec.node_name.c_str(), e.message().c_str());
        }
    }
    // A slot's kept identity: the node renews it from here.
    if (rec.slot >= 0) identities_.take(rec.node_name);
    auto vn = std::make_shared<VirtualNode>(ctx_, std::move(rec));
    vn->hold_endpoint(std::move(endpoint));
    nodes_[key] = vn;
    if (runtime_factory_) vn->set_runtime(runtime_factory_(loop_, clock_));
    vn->start(std::move(ready));
    return vn;
}

std::vector<NodeRuntimeRef> Agent::node_runtimes() {
    std::vector<NodeRuntimeRef> out;
    for (auto &[key, vn] : nodes_)
        out.push_back(
            {vn->record().node_name, vn->record().registered_at, vn->runtime(),
             shim_state_dir_for(cfg_, vn->record().job.job_id, vn->record().job.slurm_node)});
    return out;
}

PeerStanding Agent::standing(const PeerCred &peer) const {
    PeerStanding s;
    s.admin = is_admin(peer, admin_uids_);
    for (const auto &[k, vn] : nodes_)
        if (vn->record().job.uid == peer.uid) s.jobs++;  // each job's shim has its slot
    return s;
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
    if (req.op == "cgroup_enter") return op_cgroup_enter(c, req);
    if (req.op == "exec_attach") {
        if (streams_) return streams_->attach(c, req);
        c->reply(proto::error_reply(req.id,
                                    fail(Error::NotFound, "this agent serves no exec sessions")));
        return c->close();
    }
}

void Agent::set_stream_sessions(StreamSessions *s) {
    streams_ = s;
    if (s)
        s->set_resolver(
            [this](const std::string &ns, const std::string &pod) { return exec_target(ns, pod); });
}

Result<ExecTarget> Agent::exec_target(const std::string &ns, const std::string &pod) {
    for (const auto &[key, vn] : nodes_) {
        const Json::Value *p = vn->running_pod(ns, pod);
        if (!p) continue;
        ExecTarget t;
        t.pod_uid = (*p)["metadata"]["uid"].asString();
        t.job_uid = vn->record().job.uid;
        if (const PodAddress *a = networks_ ? networks_->find(t.pod_uid) : nullptr)
            t.pod_ip = a->ip;
        for (const auto &c : (*p)["spec"]["containers"])
            for (const auto &port : c.isObject() ? c["ports"] : Json::Value())
                if (port.isObject() && port["containerPort"].isIntegral() &&
                    port["containerPort"].asInt64() >= 1 &&
                    port["containerPort"].asInt64() <= 65535 &&
                    port.get("protocol", "TCP").asString() == "TCP")
                    t.ports.push_back(static_cast<uint16_t>(port["containerPort"].asInt()));
        std::weak_ptr<VirtualNode> weak = vn;
        t.start = [weak](const proto::ExecStart &m, const PodRuntime::Done &done) {
            auto node = weak.lock();
            PodRuntime *rt = node ? node->runtime() : nullptr;
            if (!rt) return done(fail(Error::Unavailable, "the job's shim is not attached"));
            rt->exec_start(m, done);
        };
        t.attach = [weak](const proto::AttachStart &m, const PodRuntime::Done &done) {
            auto node = weak.lock();
            PodRuntime *rt = node ? node->runtime() : nullptr;
            if (!rt) return done(fail(Error::Unavailable, "the job's shim is not attached"));
            rt->attach_start(m, done);
        };
        return t;
    }
    return fail(Error::NotFound,
                "pod \"" + pod + "\" in namespace \"" + ns + "\" is not running on this node");
}

proto::RegisterReply Agent::register_reply(const JobRecord &rec) const {
    proto::RegisterReply r;
    r.node_name = rec.node_name;
    r.namespaces = effective_namespaces(rec.job, cfg_.allowed_namespaces);
    r.has_namespaces = true;
    return r;
}

void Agent::op_register(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto r = proto::register_from_json(req.body);
    if (!r) return c->reply(proto::error_reply(req.id, r.failure()));
    for (const auto &[k, v] : r->labels)
        if (starts_with(k, kLabelPrefix))
            return c->reply(proto::error_reply(
                req.id, fail(Error::InvalidArgument,
                             "label '" + k + "': the prefix " + kLabelPrefix + " is reserved")));
    if (nodes_act_as_nodes(cfg_))
        for (const auto &[k, v] : r->labels)
            if (!k8s::node_may_set_label(k))
                return c->reply(proto::error_reply(
                    req.id, fail(Error::InvalidArgument,
                                 "label '" + k +
                                     "': a node may not set labels under kubernetes.io or k8s.io "
                                     "(the API server's NodeRestriction refuses them); choose "
                                     "another prefix")));
    std::string key = job_key(r->job_id, r->slurm_node);
    auto existing = nodes_.find(key);
    if (existing != nodes_.end()) {  // idempotent: the prolog may retry
        proto::Reply rep;
        rep.id = req.id;
        rep.body = proto::to_json(register_reply(existing->second->record()));
        return c->reply(rep);
    }
    if (nodes_.size() >= cfg_.max_jobs)
        return c->reply(proto::error_reply(
            req.id, fail(Error::TooLarge, "this agent already serves max_jobs=" +
                                              std::to_string(cfg_.max_jobs) + " jobs")));
    uint32_t slot = node_names_per_slot(cfg_) ? free_slot(r->slurm_node) : 0;
    auto name = expand_node_name(cfg_.node_name_template, r->slurm_node, r->job_id, slot);
    if (!name) return c->reply(proto::error_reply(req.id, name.failure()));
    JobRecord rec;
    rec.job = *r;
    rec.node_name = *name;
    if (node_names_per_slot(cfg_)) rec.slot = static_cast<int32_t>(slot);
    rec.registered_at = clock_.now_s();
    if (auto st = store_.save(rec); !st) return c->reply(proto::error_reply(req.id, st.failure()));
    // The reply waits neither for the API server nor for the disk: the
    // prolog must return quickly (its time is added to every job's start).
    // The record is saved (an agent restart finds it; JobStore::save says
    // why the fsync may follow), so the Node is created (and retried) in the
    // background. Readiness is what `status` and --k8s-wait report.
    proto::Reply rep;
    rep.id = req.id;
    rep.body = proto::to_json(register_reply(rec));
    c->reply(rep);
    std::string node_name = *name;
    uint32_t job_id = r->job_id;
    std::string slurm_node = r->slurm_node;
    add_node(rec, [this, node_name, key, job_id, slurm_node](const Status &st) {
        if (st || st.error() == Error::Transient) return;
        LOG_ERROR("[node %s] registration failed: %s", node_name.c_str(), st.message().c_str());
        // Forget it (deferred: we are inside the node's callback).
        defer(loop_, [this, key, job_id, slurm_node] {
            if (!nodes_.count(key)) return;
            release_node(key);
            (void)store_.remove(job_id, slurm_node);
        });
    });
}

void Agent::op_deregister(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto r = proto::deregister_from_json(req.body);
    if (!r) return c->reply(proto::error_reply(req.id, r.failure()));
    std::string key = job_key(r->job_id, r->slurm_node);
    auto it = nodes_.find(key);
    if (it == nodes_.end()) {  // nothing registered: already clean, say so
        remove_job_dirs(loop_, shim_state_dir_for(cfg_, r->job_id, r->slurm_node), r->job_id,
                        r->slurm_node);
        proto::Reply rep;
        rep.id = req.id;
        rep.body = proto::to_json(proto::DeregisterReply{0});
        return c->reply(rep);
    }
    uint64_t id = req.id;
    std::weak_ptr<Connection> wc = c;
    const std::string dir = shim_state_dir_for(cfg_, r->job_id, r->slurm_node);
    it->second->deregister(r->grace_s, r->reason, [this, wc, id, key, dir](uint32_t n) {
        forget_node(key);
        // Its pods stopped: the bind of its shim directory goes (the shim
        // removes the directory itself; garbage collection what it leaves).
        unshare_job_dir(dir);
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
    // Another user's job answers like an absent one: no information leaks.
    if (it == nodes_.end() ||
        (!is_admin(c->peer(), admin_uids_) && it->second->record().job.uid != c->peer().uid))
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
    rep.body["version"] = PACKAGE_VERSION;
    if (api_status_) rep.body["api"] = api_status_();
    rep.body["nodes"] = Json::Value(Json::arrayValue);
    const bool admin = is_admin(c->peer(), admin_uids_);
    for (const auto &[k, vn] : nodes_)
        if (admin || vn->record().job.uid == c->peer().uid)  // users see their own jobs
            rep.body["nodes"].append(proto::to_json(vn->state()));
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
    if (runtime_factory_)
        return c->reply(proto::error_reply(
            req.id, fail(Error::Unavailable, "this agent runs with runtime=" + cfg_.runtime)));
    std::string dir = shim_state_dir_for(cfg_, a->job_id, a->slurm_node);
    mkdir(cfg_.shim_state_dir.c_str(), 0755);
    if (mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) {
        if (chown(dir.c_str(), vn.record().job.uid, vn.record().job.gid) != 0)
            LOG_VERBOSE("%s cannot chown %s: %s", vn.prefix().c_str(), dir.c_str(),
                        strerror(errno));
    }
    if (auto st = share_job_dir(dir); !st)
        LOG_WARN(
            "%s %s: a memory volume mounted later may not reach the job's image "
            "containers",
            vn.prefix().c_str(), st.message().c_str());
    proto::Reply rep;
    rep.id = req.id;
    proto::AttachReply ar;
    ar.node_name = vn.record().node_name;
    ar.gpus = vn.record().job.gpus;
    ar.state_dir = dir;
    if (images_) {
        ar.image_store = images_->view_dir();
        ar.image_store_mount_program = images_->mount_program();
    }
    if (cfg_.pod_cgroups) {
        auto parents = cgroups_.parents(c->peer().pid, a->job_id);
        ar.pod_cgroups = parents.ok();
        if (!parents)
            LOG_WARN("%s pods get no cgroup of their own: %s", vn.prefix().c_str(),
                     parents.message().c_str());
    }
    rep.body = proto::to_json(ar);
    c->reply(rep);
    LOG_INFO("%s shim attached (pid %d%s)", vn.prefix().c_str(), c->peer().pid,
             ar.pod_cgroups ? ", pods in cgroups of their own" : "");
    c->set_link_bound(proto::kMaxShimMessageBytes);
    auto rt = std::make_unique<ShimRuntime>(c, vn.prefix());
    if (images_)
        rt->set_image_puller(
            [this, uid = vn.record().job.uid](const std::string &image,
                                              std::function<void(const Status &)> done) {
                return images_->pull(uid, image, std::move(done));
            },
            [this](uint64_t ticket) { images_->cancel(ticket); });
    vn.set_runtime(std::move(rt), c->peer().pid);
}

// A container's supervisor asks to enter its pod's cgroup before it starts the
// container's command (k8s-shim/supervise.h). It must be a direct child of
// the job's attached shim (only the shim starts supervisors; the pods' own
// processes descend from supervisors), named as a supervisor, of the job's
// uid, for a pod the shim was handed, with GPUs lent on this node.
void Agent::op_cgroup_enter(const std::shared_ptr<Connection> &c, const proto::Request &req) {
    auto refuse = [&](const Failure &f) {
        LOG_WARN("socket: refused cgroup_enter from uid %u pid %d: %s", c->peer().uid,
                 c->peer().pid, f.message.c_str());
        c->reply(proto::error_reply(req.id, f));
        c->close();
    };
    auto m = proto::cgroup_enter_from_json(req.body);
    if (!m) return refuse(m.failure());
    const PeerCred &peer = c->peer();
    ProcStat st;
    if (!read_proc_stat(peer.pid, &st))
        return refuse(fail(Error::Forbidden, "cannot read pid " + std::to_string(peer.pid)));
    VirtualNode *vn = nullptr;
    for (const auto &[k, node] : nodes_)
        if (node->shim_pid() > 0 && node->shim_pid() == st.ppid) vn = node.get();
    if (!vn || peer.uid != vn->record().job.uid)
        return refuse(fail(Error::Forbidden, "pid " + std::to_string(peer.pid) +
                                                 " is no child of an attached shim of its uid"));
    auto comm = read_proc_file(peer.pid, "comm", 64);
    if (!comm || std::string(trim(*comm)) != kSupervisorComm)
        return refuse(fail(Error::Forbidden,
                           "pid " + std::to_string(peer.pid) + " is not a container supervisor"));
    if (auto entered = cgroups_.enter(*vn, peer.pid, *m); !entered)
        return refuse(entered.failure());
    proto::Reply rep;
    rep.id = req.id;
    rep.body = Json::Value(Json::objectValue);
    c->reply(rep);
    c->close();
}

// Nodes of this agent's Slurm node whose jobs are gone (agent down at the
// epilog, state lost) are deleted with their Lease, and the pods bound to
// them (never listed by this agent) in the background, as a drain's
// leftover deletes: with no kubelet nobody else deletes them. A job still
// registered here whose deregister never came (the node's extern step and
// epilog lost: slurmd killed during the job's end) is deregistered once
// Slurm says it is gone (collect_if_gone).
void Agent::gc() {
    collector_.collect_files();
    if (cfg_.gc_failed_nodes) collector_.collect_failed_nodes();
    std::vector<std::shared_ptr<VirtualNode>> registered;
    for (const auto &[k, vn] : nodes_)
        if (!vn->draining()) registered.push_back(vn);
    for (const auto &vn : registered)
        cgroups_.sweep(*vn);
    for (const auto &vn : registered)
        collect_if_gone(vn,
                        "its deregister never came: the node's extern step and epilog were lost");
    collector_.collect_nodes();
    if (images_) images_->tick(static_cast<int64_t>(time(nullptr)));
    collect_networks();
}

// The site's virtual Nodes (slurm-k8s/cluster=<cluster_name>): listed, then
// watched from the list's resourceVersion; relisted after a 410 or a
// failure, with back-off.
void Agent::list_route_nodes() {
    if (routes_stopped_) return;
    std::string sel = std::string(kLabelPrefix) + "cluster=" + cfg_.cluster_name;
    ctx_.agent_api().get("/api/v1/nodes?labelSelector=" + url_escape(sel),
                         [this](Result<Json::Value> r) {
                             if (routes_stopped_) return;
                             if (!r) {
                                 uint64_t ms = routes_backoff_.next_ms(r.failure());
                                 LOG_WARN("pod routes: node list failed: %s; again in %llu ms",
                                          r.message().c_str(), static_cast<unsigned long long>(ms));
                                 routes_timer_.start(ms, [this] { list_route_nodes(); });
                                 return;
                             }
                             route_nodes_.clear();
                             for (const auto &n : (*r)["items"])
                                 route_nodes_[n["metadata"]["name"].asString()] = n;
                             routes_rv_ = (*r)["metadata"]["resourceVersion"].asString();
                             apply_routes();
                             watch_route_nodes();
                         });
}

void Agent::watch_route_nodes() {
    if (routes_stopped_) return;
    std::string sel = std::string(kLabelPrefix) + "cluster=" + cfg_.cluster_name;
    std::string path =
        "/api/v1/nodes?labelSelector=" + url_escape(sel) +
        "&watch=1&allowWatchBookmarks=true&resourceVersion=" + url_escape(routes_rv_);
    routes_watch_ = ctx_.agent_api().watch(
        path,
        [this](const WatchEvent &e) {
            routes_backoff_.reset();
            if (e.type == WatchType::Error) {
                routes_rv_.clear();
                return;
            }
            routes_rv_ = e.resource_version;
            if (e.type == WatchType::Bookmark) return;
            std::string name = e.object["metadata"]["name"].asString();
            if (e.type == WatchType::Deleted)
                route_nodes_.erase(name);
            else
                route_nodes_[name] = e.object;
            apply_routes();
        },
        [this](const Status &st) {
            routes_watch_ = 0;
            if (routes_stopped_) return;
            if (st && !routes_rv_.empty()) return watch_route_nodes();
            uint64_t ms = st ? 0 : routes_backoff_.next_ms(st.failure());
            routes_timer_.start(ms, [this] { list_route_nodes(); });
        });
}

void Agent::apply_routes() {
    Json::Value items(Json::arrayValue);
    for (const auto &[name, n] : route_nodes_)
        items.append(n);
    std::vector<std::string> conflicts;
    auto want = routes_from_nodes(items, cfg_.pod_cidr, cfg_.node_address, &conflicts);
    for (const auto &c : conflicts)
        LOG_WARN("pod routes: %s: set pod_cidr to a range of its own on each host", c.c_str());
    routes_->set(std::move(want));
}

void Agent::collect_networks() {
    if (!networks_) return;
    std::set<std::string> keep;
    for (const auto &[k, vn] : nodes_)
        if (!vn->networks_in_use(&keep)) return;  // not all known yet
    for (const auto &uid : networks_->attached())
        if (!keep.count(uid)) {
            LOG_INFO("pod network: %s belongs to no pod bound here: removing it", uid.c_str());
            networks_->detach(uid, {});
        }
}

}  // namespace sk::agent
