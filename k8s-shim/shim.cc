#include "k8s-shim/shim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/cgroup/cgroup_files.h"
#include "common/daemons/json.h"
#include "common/daemons/log_paths.h"
#include "common/daemons/shim_protocol.h"
#include "common/daemons/supervisor.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/strings.h"
#include "k8s-shim/cdi.h"
#include "k8s-shim/pod_prepare.h"
#include "k8s-shim/pod_stats.h"
#include "k8s-shim/spawn.h"

namespace sk::shim {

namespace {

constexpr int kMaxReconnectMs = 30'000;
constexpr uint64_t kReapMs = 1000;  // finished runners freed within a second or so
// Entries the disk use walks of one pod_stats reply look at together (each
// pod's own walk stops at 10000): a few tens of milliseconds on the loop.
constexpr size_t kDiskWalkEntriesPerReply = 50000;

// The supplementary groups this process (the job's user) has: a pod's
// supplementalGroups and fsGroup are honoured when they are among them.
std::vector<uint32_t> job_groups() {
    int n = getgroups(0, nullptr);
    if (n <= 0) return {};
    std::vector<gid_t> g(static_cast<size_t>(n));
    n = getgroups(n, g.data());
    if (n < 0) return {};
    return std::vector<uint32_t>(g.begin(), g.begin() + n);
}

// The shim's own state files, in a directory the job's user can write: read
// like any hostile file (no symlink, bounded by what one message can carry).
Result<Json::Value> read_json(const std::string &path) {
    auto text = read_file(path, proto::kMaxShimMessageBytes);
    if (!text) return text.failure();
    return json::parse(*text);
}

}  // namespace

Shim::Shim(uv_loop_t *loop, ShimOptions opt, RuntimeTemplates templates)
    : loop_(loop),
      opt_(std::move(opt)),
      templates_(std::move(templates)),
      reconnect_timer_(loop),
      reap_timer_(loop),
      sessions_(loop, *this, opt_.supervisor, opt_.socket_path) {
    clock_.loop = loop;
    clock_.scale = opt_.time_scale;
    clock_.origin = uv_now(loop);
}

Shim::~Shim() = default;

Status Shim::start() {
    // The plugin's stop (spank/shim_process.h stop_shim): the pods end now,
    // the job's podman state goes, then the shim exits.
    term_ = Signal(loop_);
    if (term_.start(SIGTERM, [this](int) { terminate(); }) == 0) term_.unref();
    connect();
    reap_timer_.start(
        kReapMs, [this] { reap(); }, kReapMs);
    reap_timer_.unref();
    return {};
}

void Shim::connect() {
    conn_ = Pipe(loop_);
    conn_.connect(opt_.socket_path, [this](int status) { on_connected(status); });
}

void Shim::on_connected(int status) {
    if (status < 0) {
        lost_connection(std::string("cannot connect to the agent at ") + opt_.socket_path + ": " +
                        uv_strerror(status));
        return;
    }
    lines_ = proto::LineBuffer(proto::kMaxShimMessageBytes);
    conn_.read_start([this](ssize_t n, const char *data) { on_read(n, data); });
    proto::AttachRequest a;
    a.job_id = opt_.job_id;
    a.slurm_node = opt_.slurm_node;
    proto::Request req;
    req.id = attach_id_ = next_id_++;
    req.op = "attach";
    req.body = proto::to_json(a);
    send_line(proto::encode(req));
}

void Shim::on_read(ssize_t n, const char *data) {
    if (n < 0) {
        lost_connection(n == UV_EOF ? "the agent closed the connection"
                                    : std::string("read: ") + uv_strerror(static_cast<int>(n)));
        return;
    }
    // An oversized line is dropped and the link stays: reconnecting would
    // only bring the same message back (the agent resends its pods on
    // attach) and cut every other pod of the job off meanwhile.
    if (auto st = lines_.feed(data, static_cast<size_t>(n)); !st)
        LOG_ERROR("dropped a message from the agent: %s", st.message().c_str());
    while (auto line = lines_.next()) {
        on_line(*line);
        if (!conn_) return;
    }
}

void Shim::on_line(const std::string &line) {
    // A reply (to attach or to a pod_status notification) has "ok"; a request has "op".
    auto v = json::parse(line);
    if (!v) {
        lost_connection("bad message from the agent: " + v.message());
        return;
    }
    if (v->isMember("ok")) {
        auto r = proto::decode_reply(line, proto::kMaxShimMessageBytes);
        if (!r) return lost_connection("bad reply from the agent: " + r.message());
        if (r->id == 0 &&
            !r->ok)  // about the connection (common/daemons/protocol.h): it is closing
            return lost_connection("agent: " + r->message);
        if (r->id == attach_id_) {
            on_attached(*r);
        } else if (auto it = agent_calls_.find(r->id); it != agent_calls_.end()) {
            auto done = std::move(it->second);
            agent_calls_.erase(it);
            done(r->ok ? Status() : Status(fail(r->error, r->message)));
        } else if (!r->ok)
            LOG_WARN("agent refused a notification: %s", r->message.c_str());
        return;
    }
    auto req = proto::decode_request(line, proto::kMaxShimMessageBytes);
    if (!req) {
        LOG_WARN("bad request from the agent: %s", req.message().c_str());
        return;
    }
    if (!attached_) {
        send_reply(
            proto::error_reply(req->id, fail(Error::Unavailable, "the shim is not attached yet")));
        return;
    }
    bool deferred = false;
    proto::Reply reply = handle(*req, &deferred);
    if (!deferred) send_reply(reply);
}

void Shim::on_attached(const proto::Reply &r) {
    if (!r.ok) {
        LOG_ERROR("the agent refused to attach job %u on %s: %s", opt_.job_id,
                  opt_.slurm_node.c_str(), r.message.c_str());
        exit_code_ = 1;
        if (ever_attached_ && !pods_.empty()) {
            // The agent forgot the job (it ended while the agent was down):
            // nothing will ever stop these pods but us. Stop them, then exit.
            LOG_WARN("[node %s] the job is no longer registered: stopping all pods",
                     node_name_.c_str());
            shutting_down_ = true;
            shutdown_replied_ = false;
            for (auto &[uid, p] : pods_)
                if (p.runner)
                    p.runner->kill(p.runner->plan().grace_s,
                                   std::string(proto::to_string(proto::StopReason::JobEnded)));
            maybe_finish_shutdown();
            return;
        }
        uv_stop(loop_);
        return;
    }
    auto a = proto::attach_reply_from_json(r.body);
    if (!a) {
        LOG_ERROR("bad attach reply: %s", a.message().c_str());
        exit_code_ = 1;
        uv_stop(loop_);
        return;
    }
    attached_ = true;
    reconnect_delay_ms_ = 500;
    if (ever_attached_) {
        LOG_INFO("[node %s] re-attached to the agent", node_name_.c_str());
        for (auto &[uid, p] : pods_) {
            p.last_sent = Json::Value();
            notify(p);
        }
        return;
    }
    ever_attached_ = true;
    node_name_ = a->node_name;
    state_dir_ = a->state_dir;
    gpus_ = GpuAllocator(a->gpus);
    pod_cgroups_ = a->pod_cgroups;
    if (!a->image_store.empty()) {
        store_options_ =
            podman_store_options(templates_.podman(), a->image_store, a->image_store_mount_program);
        store_view_ = a->image_store;
        if (store_options_.empty())
            LOG_WARN(
                "[node %s] the node's image store is not used: podman_storage_driver is %s, "
                "not overlay",
                a->node_name.c_str(), templates_.podman().storage_driver.c_str());
    }
    if (const char *c = getenv("SLURM_K8S_GPUS_CONFINED"); c && std::string(c) == "1") {
        cuda_pool_ = a->gpus;
        std::sort(cuda_pool_.begin(), cuda_pool_.end());
    }
    LOG_INFO("[node %s] attached: GPUs [%s], state in %s", node_name_.c_str(),
             format_index_list(a->gpus).c_str(), state_dir_.c_str());
    mkdir(state_dir_.c_str(), 0750);
    mkdir((state_dir_ + "/pods").c_str(), 0750);
    if (auto g = read_json(state_dir_ + "/gpus.json"); g) {
        if (auto st = gpus_.restore(*g); !st) LOG_WARN("gpus.json: %s", st.message().c_str());
    }
    load_previous_pods();
    warm_podman();
}

void Shim::warm_podman() {
    if (store_options_.empty() || !templates_.uses_podman()) return;
    const std::string dir = podman_dir(state_dir_);
    const std::string run = podman_run_dir(getuid(), opt_.job_id, opt_.slurm_node);
    if (auto st = make_podman_dirs(dir, run); !st) {
        LOG_WARN("[node %s] %s", node_name_.c_str(), st.message().c_str());
        return;
    }
    SpawnSpec spec;
    spec.argv = podman_command(templates_.podman(), dir, run, store_options_);
    spec.argv.insert(spec.argv.end(), {"images", "--quiet"});
    for (const auto &[name, value] : podman_environment(dir, PlanContext().base_path))
        spec.env.push_back({name, value});
    spec.cwd = state_dir_;
    int rc = spawn_process(
        loop_, warmup_, spec,
        [this](int64_t status, int sig) {
            warmup_.close();
            if (status == 0 && sig == 0) podman_warm_ = true;
            LOG_VERBOSE("[node %s] podman's storage made (status %lld)", node_name_.c_str(),
                        static_cast<long long>(sig ? 128 + sig : status));
        },
        nullptr, nullptr);
    if (rc != 0) LOG_WARN("[node %s] cannot start podman: %s", node_name_.c_str(), uv_strerror(rc));
}

bool Shim::send_line(const std::string &line) {
    // The agent would drop a line over the link's bound (common/daemons/shim_protocol.h).
    if (line.size() > proto::kMaxShimMessageBytes + 1) {
        LOG_ERROR("a message of %zu bytes to the agent exceeds the limit of %zu: not sent",
                  line.size() - 1, proto::kMaxShimMessageBytes);
        return false;
    }
    (void)conn_.write(line);  // no connection: dropped
    return true;
}

void Shim::send_reply(const proto::Reply &r) {
    if (send_line(proto::encode(r))) return;
    send_line(proto::encode(proto::error_reply(
        r.id, fail(Error::TooLarge, "the reply exceeds the agent link's limit of " +
                                        std::to_string(proto::kMaxShimMessageBytes) + " bytes"))));
}

void Shim::lost_connection(const std::string &why) {
    attached_ = false;
    conn_.close();
    auto calls = std::move(agent_calls_);
    agent_calls_.clear();
    for (auto &[id, done] : calls)
        done(fail(Error::Unavailable, "the connection to the agent was lost: " + why));
    if (!ever_attached_) {
        LOG_ERROR("%s; is slurm-k8s-agent running on this node?", why.c_str());
        exit_code_ = 1;
        uv_stop(loop_);
        return;
    }
    if (shutting_down_ && shutdown_replied_) return;
    LOG_WARN("%s; pods keep running, reconnecting in %d ms", why.c_str(), reconnect_delay_ms_);
    schedule_reconnect();
}

void Shim::schedule_reconnect() {
    reconnect_timer_.start(static_cast<uint64_t>(reconnect_delay_ms_), [this] { connect(); });
    reconnect_delay_ms_ = std::min(reconnect_delay_ms_ * 2, kMaxReconnectMs);
}

proto::Reply Shim::handle(const proto::Request &req, bool *deferred) {
    if (auto op = proto::shim_op_from_string(req.op, "op"); op) {
        switch (*op) {
            case proto::ShimOp::PodRun:
                return pod_run(req);
            case proto::ShimOp::PodKill:
                return pod_kill(req);
            case proto::ShimOp::PodList:
                return pod_list(req);
            case proto::ShimOp::Shutdown:
                return shutdown(req, deferred);
            case proto::ShimOp::ExecStart:
                return exec_start(req, deferred);
            case proto::ShimOp::PodStats:
                return pod_stats(req);
            case proto::ShimOp::AttachStart:
                return attach_start(req, deferred);
            case proto::ShimOp::PodsPause:
                return pods_pause(req);
            case proto::ShimOp::PodFiles:
                return pod_files(req);
            case proto::ShimOp::PodSandbox:
                return pod_sandbox(req, deferred);
            case proto::ShimOp::PodStatus:  // the shim's own notification
            case proto::ShimOp::ExecAttach:
            case proto::ShimOp::ImagePull:
            case proto::ShimOp::ImagePullCancel:
                break;
        }
    }
    return proto::error_reply(
        req.id, fail(Error::InvalidArgument, "unknown operation '" + req.op + "' for a shim"));
}

std::string Shim::pod_dir(const std::string &uid) const {
    return state_dir_ + "/pods/" + uid;
}

void Shim::refuse(ShimPod &p, const std::string &reason, const std::string &message) {
    LOG_WARN("[pod %s/%s] refused: %s", p.ns.c_str(), p.name.c_str(), message.c_str());
    p.fixed_status = refused_pod_status(reason, message, Clock::wall_ms());
    p.finished = true;
    save_pod_state(p);
    notify(p);
}

proto::Reply Shim::pod_run(const proto::Request &req) {
    proto::Reply reply;
    reply.id = req.id;
    auto m = proto::pod_run_from_json(req.body);
    if (!m) return proto::error_reply(req.id, m.failure());
    const std::string &uid = m->uid;
    if (sandboxes_) sandboxes_->release(uid);  // the agent holds its namespaces now
    if (pods_.count(uid)) return reply;        // idempotent by uid: never run a pod twice
    if (shutting_down_)
        return proto::error_reply(req.id, fail(Error::Unavailable, "the shim is shutting down"));
    ShimPod &p = pods_[uid];
    p.uid = uid;
    p.ns = m->ns;
    p.name = m->name;

    std::string dir = pod_dir(uid);
    mkdir(dir.c_str(), 0750);
    if (auto st =
            write_file_atomic(dir + "/pod.json", json::write(req.body), 0600, Durability::Cached);
        !st)
        LOG_WARN("[pod %s/%s] %s", p.ns.c_str(), p.name.c_str(), st.message().c_str());

    PodSetup setup;
    setup.plan.uid = getuid();
    setup.plan.gid = getgid();
    setup.plan.groups = job_groups();
    setup.plan.node_name = node_name_;
    setup.plan.pod_dir = dir;
    setup.plan.templates = &templates_;
    setup.plan.podman_dir = podman_dir(state_dir_);
    setup.plan.podman_run_dir = podman_run_dir(getuid(), opt_.job_id, opt_.slurm_node);
    setup.plan.podman_store_options = store_options_;
    setup.cuda_pool = cuda_pool_;
    setup.gpu_device = templates_.podman().gpu_device;
    setup.cdi_dirs = cdi_spec_dirs();
    if (pod_cgroups_) setup.cgroup_socket = opt_.socket_path;
    setup.job_id = opt_.job_id;
    GpuLease lease;
    lease.take = [this, &uid](int needed) {
        auto idx = gpus_.allocate(uid, needed);
        if (idx) save_gpus();
        return idx;
    };
    lease.give_back = [this, &uid] {
        gpus_.release(uid);
        save_gpus();
    };
    std::string why;
    auto prepared = prepare_pod(*m, setup, lease, &why);
    if (!prepared) {
        refuse(p, why, prepared.message());
        return proto::error_reply(req.id, prepared.failure());
    }
    const std::vector<int> idx = prepared->gpus;

    RunnerEnv env;
    env.clock = clock_;
    env.log_max_bytes = opt_.log_max_bytes;
    env.pod_dir = dir;
    env.supervisor = opt_.supervisor;
    ShimPod *pe = &p;
    env.on_change = [this, pe] { notify(*pe); };
    env.on_finished = [this, pe] { pod_finished(*pe); };
    env.on_processes = [this, pe] { save_pod_state(*pe); };
    env.images = &known_images_;
    if (!store_options_.empty()) env.store_view = store_view_;
    env.podman_warm = &podman_warm_;
    if (!store_options_.empty())
        env.store_pull = [this](const std::string &image,
                                std::function<void(const Status &)> done) {
            return store_pull(image, std::move(done));
        };
    p.runner = std::make_unique<PodRunner>(std::move(env), std::move(prepared->plan));
    for (const auto &n : prepared->notes)
        p.runner->add_event(n.type, n.reason, n.message, n.container);
    LOG_INFO("[pod %s/%s] starting (uid %s, GPUs [%s])", p.ns.c_str(), p.name.c_str(), uid.c_str(),
             format_index_list(idx).c_str());
    if (paused_) p.runner->pause(true, pause_message_);  // held until the resume
    if (auto st = p.runner->start(); !st) {
        p.runner.reset();
        gpus_.release(uid);
        save_gpus();
        if (st.error() == Error::Refused)
            refuse(p, "PodRefused", st.message());
        else
            refuse(p, "PodSetupFailed", "cannot prepare the pod directory: " + st.message());
        return proto::error_reply(req.id, st.failure());
    }
    save_pod_state(p);
    return reply;
}

// Memory and disk stay bounded over a long job: a finished pod's runner is
// freed (its final status is kept for pod_list and re-attach), and a pod the
// agent reports gone from the API (pod_kill reason Deleted or Orphaned: its
// uid never comes back) is forgotten once finished, its directory (logs,
// state) removed, as the kubelet does for a deleted pod.
void Shim::reap() {
    sessions_.reap();
    std::vector<std::string> gone;
    for (auto &[uid, p] : pods_) {
        if (p.runner && p.runner->idle()) release(p);
        if (!p.runner && p.forget && p.finished) gone.push_back(uid);
    }
    for (const auto &uid : gone)
        forget(uid);
}

void Shim::release(ShimPod &p) {
    p.fixed_status = p.runner->status();
    p.runner.reset();             // its handles close with it
    p.last_sent = Json::Value();  // re-attach resends fixed_status in full
}

void Shim::forget(const std::string &uid) {
    if (auto st = remove_tree(pod_dir(uid)); !st)
        LOG_WARN("[pod %s] %s", uid.c_str(), st.message().c_str());
    pods_.erase(uid);
}

proto::Reply Shim::pod_kill(const proto::Request &req) {
    proto::Reply reply;
    reply.id = req.id;
    auto m = proto::pod_kill_from_json(req.body);
    if (!m) return proto::error_reply(req.id, m.failure());
    if (sandboxes_) sandboxes_->release(m->uid);
    auto it = pods_.find(m->uid);
    if (it != pods_.end() &&
        (m->reason == proto::StopReason::Deleted || m->reason == proto::StopReason::Orphaned))
        it->second.forget = true;
    if (it == pods_.end() || !it->second.runner) return reply;  // unknown or never ran: ok
    kill_execs(m->uid, "the pod is stopping", true);
    it->second.runner->kill(m->grace_s, std::string(proto::to_string(m->reason)));
    return reply;
}

// The Slurm job was suspended or resumed (common/daemons/shim_protocol.h PodsPause):
// every pod follows, and pods that arrive while it lasts are held.
proto::Reply Shim::pods_pause(const proto::Request &req) {
    proto::Reply reply;
    reply.id = req.id;
    auto m = proto::pods_pause_from_json(req.body);
    if (!m) return proto::error_reply(req.id, m.failure());
    if (paused_ != m->pause)
        LOG_INFO("%s", m->pause ? "the job is suspended: stopping every pod's processes"
                                : "the job resumed: continuing every pod's processes");
    paused_ = m->pause;
    pause_message_ = m->pause ? m->message : "";
    for (auto &[uid, p] : pods_)
        if (p.runner) p.runner->pause(m->pause, pause_message_);
    return reply;
}

// A running pod's volume files renewed (common/daemons/shim_protocol.h PodFilesUpdate).
proto::Reply Shim::pod_files(const proto::Request &req) {
    proto::Reply reply;
    reply.id = req.id;
    auto m = proto::pod_files_update_from_json(req.body);
    if (!m) return proto::error_reply(req.id, m.failure());
    auto it = pods_.find(m->uid);
    if (it == pods_.end() || !it->second.runner)
        return proto::error_reply(req.id,
                                  fail(Error::NotFound, "no running pod with uid " + m->uid));
    if (auto st = it->second.runner->update_files(m->files); !st)
        return proto::error_reply(req.id, st.failure());
    return reply;
}

Result<ShimPod *> Shim::session_pod(const std::string &session, const std::string &uid) {
    if (shutting_down_) return fail(Error::Unavailable, "the shim is shutting down");
    if (sessions_.has(session))
        return fail(Error::AlreadyExists, "exec session " + session + " exists");
    // Its processes are stopped: a session would hang, or run beside them.
    if (paused_)
        return fail(Error::Unavailable,
                    "the pod's Slurm job is suspended: exec and attach work again after "
                    "scontrol resume");
    auto it = pods_.find(uid);
    if (it == pods_.end()) return fail(Error::NotFound, "no pod with uid " + uid + " on this node");
    if (!it->second.runner)
        return fail(Error::NotFound,
                    "pod " + it->second.ns + "/" + it->second.name + " is not running");
    return &it->second;
}

proto::Reply Shim::pod_sandbox(const proto::Request &req, bool *deferred) {
    auto m = proto::pod_sandbox_from_json(req.body);
    if (!m) return proto::error_reply(req.id, m.failure());
    if (shutting_down_)
        return proto::error_reply(req.id, fail(Error::Unavailable, "the shim is shutting down"));
    // A pod with an image container of the podman runtime stays on the
    // node's network: podman's exec (exec probes, hooks, kubectl exec) runs
    // runc exec, which joins the container's own user namespace first and
    // may then not join a network namespace that namespace does not own.
    for (const auto &image : m->images)
        if (const RuntimeTemplate *t = templates_.match(image); t && t->podman) {
            proto::Reply r;
            r.id = req.id;
            r.body = proto::to_json(proto::PodSandboxReply{
                0, "its image " + image +
                       " runs through podman, whose exec cannot join a pod's own network yet"});
            return r;
        }
    if (!sandboxes_) sandboxes_ = std::make_unique<Sandboxes>(loop_, opt_.supervisor);
    const uint64_t id = req.id;
    *deferred = true;
    sandboxes_->make(m->uid, m->hostname, [this, id](int pid, const std::string &why) {
        if (pid <= 0) {
            LOG_WARN("[node %s] a pod's network namespace: %s", node_name_.c_str(), why.c_str());
            return send_reply(proto::error_reply(
                id, fail(Error::Refused, "the pod's network namespace: " + why)));
        }
        proto::Reply r;
        r.id = id;
        r.body = proto::to_json(proto::PodSandboxReply{pid, ""});
        send_reply(r);
    });
    return {};
}

proto::Reply Shim::exec_start(const proto::Request &req, bool *deferred) {
    auto m = proto::exec_start_from_json(req.body);
    if (!m) return proto::error_reply(req.id, m.failure());
    auto pod = session_pod(m->session, m->uid);
    if (!pod) return proto::error_reply(req.id, pod.failure());
    ShimPod &p = **pod;
    auto spec = p.runner->exec_spec(m->container, m->command, m->in, m->tty);
    if (!spec) return proto::error_reply(req.id, spec.failure());
    if (auto st = sessions_.admit(m->uid); !st) return proto::error_reply(req.id, st.failure());
    LOG_INFO("[pod %s/%s] exec session %s in %s: '%s'%s", p.ns.c_str(), p.name.c_str(),
             m->session.c_str(), m->container.c_str(), m->command[0].c_str(),
             m->tty ? " (tty)" : "");
    if (auto st = sessions_.start_exec(req.id, std::move(*m), std::move(*spec)); !st)
        return proto::error_reply(req.id, st.failure());
    *deferred = true;
    return {};
}

proto::Reply Shim::attach_start(const proto::Request &req, bool *deferred) {
    auto m = proto::attach_start_from_json(req.body);
    if (!m) return proto::error_reply(req.id, m.failure());
    auto pod = session_pod(m->session, m->uid);
    if (!pod) return proto::error_reply(req.id, pod.failure());
    ShimPod &p = **pod;
    auto c = p.runner->attach_container(m->container);
    if (!c) return proto::error_reply(req.id, c.failure());
    // A terminal only for a container that has one (spec.tty), as a kubelet.
    if (m->tty && !(*c)->plan->tty)
        return proto::error_reply(
            req.id, fail(Error::Invalid, "the container has no terminal (spec.tty is false)"));
    if (m->in && !(*c)->plan->stdin_open)
        return proto::error_reply(
            req.id,
            fail(Error::Invalid, "the container does not take stdin (spec.stdin is false)"));
    if (auto st = sessions_.admit(m->uid); !st) return proto::error_reply(req.id, st.failure());
    LOG_INFO("[pod %s/%s] attach session %s to %s%s", p.ns.c_str(), p.name.c_str(),
             m->session.c_str(), m->container.c_str(), m->in ? " (stdin)" : "");
    sessions_.start_attach(req.id, std::move(*m));
    *deferred = true;
    return {};
}

void Shim::exec_changed(const std::string &uid) {
    if (auto pit = pods_.find(uid); pit != pods_.end() && pit->second.runner)
        save_pod_state(pit->second);
}

Result<Container *> Shim::attach_container(const std::string &uid, const std::string &container) {
    auto pit = pods_.find(uid);
    if (pit == pods_.end() || !pit->second.runner)
        return fail(Error::NotFound, "pod " + uid + " is not running");
    return pit->second.runner->attach_container(container);
}

void Shim::kill_execs(const std::string &uid, const std::string &why, bool all) {
    if (all) return sessions_.kill_execs(uid, why);
    sessions_.kill_execs(uid, why, [this, &uid](const std::string &container) {
        auto pit = pods_.find(uid);
        return pit != pods_.end() && pit->second.runner &&
               pit->second.runner->container_running(container);
    });
}

proto::Reply Shim::pod_list(const proto::Request &req) {
    if (auto m = proto::pod_list_request_from_json(req.body); !m)
        return proto::error_reply(req.id, m.failure());
    proto::PodListReply list;
    for (auto &[uid, p] : pods_) {
        proto::PodStatus e;
        e.uid = uid;
        e.ns = p.ns;
        e.name = p.name;
        e.status = p.runner ? p.runner->status() : p.fixed_status;
        list.pods.push_back(std::move(e));
    }
    proto::Reply reply;
    reply.id = req.id;
    reply.body = proto::to_json(list);
    return reply;
}

// The pod's directory (ephemeral-storage) and each container's log
// directory in it, in one walk as the job's user (dir_disk_use: no link
// followed, bounded); the walks of one reply share `budget` entries, and a
// pod past it gets no disk figures.
void Shim::measure_disk(const std::string &uid, ShimPod *p, proto::PodStatsEntry *e,
                        size_t *budget) {
    if (*budget == 0) return;
    DiskWalkLimits limits;
    limits.max_entries = std::min(limits.max_entries, *budget);
    auto du = dir_disk_use(pod_log_dir(state_dir_, uid), limits);
    if (!du) return;
    *budget -= std::min(*budget, du->entries);
    if (du->capped && !p->disk_walk_capped) {
        p->disk_walk_capped = true;
        LOG_WARN(
            "[pod %s/%s] disk use: stopped after %zu entries or %d levels: its "
            "ephemeral-storage and logs figures are what was counted",
            p->ns.c_str(), p->name.c_str(), du->entries, limits.max_depth);
    }
    e->ephemeral = du->total;
    for (auto &c : e->containers) {
        auto it = du->by_child.find(c.name);
        c.logs = it != du->by_child.end() ? it->second : proto::DiskUse{};
    }
}

// One scan of /proc for all pods (k8s-shim/pod_stats.h says what counts),
// on the loop: a few milliseconds per thousand processes of the host.
proto::Reply Shim::pod_stats(const proto::Request &req) {
    if (auto m = proto::pod_stats_request_from_json(req.body); !m)
        return proto::error_reply(req.id, m.failure());
    ProcessTable table = read_process_table();
    std::string self_cgroup;
    if (pod_cgroups_)
        if (auto t = read_process_cgroups()) self_cgroup = *t;
    proto::PodStatsReply out;
    size_t disk_budget = kDiskWalkEntriesPerReply;
    uint64_t cpu_ns = 0, memory = 0;
    for (auto &[uid, p] : pods_) {
        if (!p.runner || out.pods.size() >= proto::kMaxStatsPods) continue;
        proto::PodStatsEntry e;
        e.uid = uid;
        e.ns = p.ns;
        e.name = p.name;
        e.start_ms = std::max<int64_t>(p.runner->run().start_ms, 0);
        for (const auto &c : p.runner->running_containers()) {
            if (e.containers.size() >= proto::kMaxStatsContainers || c.started_ms <= 0) break;
            TreeUsage u = c.image ? image_container_usage(table, c.pid) : tree_usage(table, c.pid);
            if (u.processes == 0) continue;  // exited since the runner last heard of it
            proto::ContainerStats s{c.name, c.started_ms, ticks_to_ns(u.cpu_ticks),
                                    pages_to_bytes(u.rss_pages)};
            cpu_ns += s.cpu_ns;
            memory += s.memory_bytes;
            e.containers.push_back(std::move(s));
        }
        measure_disk(uid, &p, &e, &disk_budget);
        if (!self_cgroup.empty()) {
            PodCgroupUsage cg = read_pod_cgroup_usage(self_cgroup, opt_.job_id, uid);
            e.cgroup_cpu_ns = cg.cpu_ns;
            e.cgroup_memory_bytes = cg.working_set_bytes;
        }
        out.pods.push_back(std::move(e));
    }
    if (auto job = read_job_cgroup_usage(opt_.job_id)) {
        out.node = {proto::StatsSource::Cgroup, job->cpu_ns, job->working_set_bytes};
    } else {
        out.node = {proto::StatsSource::Pods, cpu_ns, memory};
    }
    proto::Reply reply;
    reply.id = req.id;
    reply.body = proto::to_json(out);
    return reply;
}

proto::Reply Shim::shutdown(const proto::Request &req, bool *deferred) {
    auto m = proto::shutdown_from_json(req.body);
    if (!m) return proto::error_reply(req.id, m.failure());
    std::string reason(proto::to_string(m->reason));
    LOG_INFO("[node %s] shutdown (%s): stopping all pods within %us", node_name_.c_str(),
             reason.c_str(), m->grace_s);
    shutting_down_ = true;
    shutdown_req_id_ = req.id;
    *deferred = true;
    for (auto &[uid, p] : pods_) {
        kill_execs(uid, "the node shuts down", true);
        if (p.runner) p.runner->kill(m->grace_s, reason);
    }
    maybe_finish_shutdown();
    return {};
}

void Shim::terminate() {
    // A shutdown in progress ends now too (a shorter grace shortens a stop).
    LOG_INFO("[node %s] SIGTERM: stopping all pods now", node_name_.c_str());
    shutting_down_ = true;
    for (auto &[uid, p] : pods_) {
        kill_execs(uid, "the shim is stopped", true);
        if (p.runner) p.runner->kill(0, "Shutdown");
    }
    maybe_finish_shutdown();
}

void Shim::maybe_finish_shutdown() {
    if (!shutting_down_ || shutdown_replied_) return;
    for (auto &[uid, p] : pods_)
        if (p.runner && !p.runner->finished()) return;
    // The job's podman storage goes before the reply: the plugin ends what
    // is left of the job soon after it (k8s-shim/podman.h).
    if (podman_reset_ && podman_reset_->running()) return;
    if (!podman_reset_ && templates_.uses_podman()) {
        podman_reset_ =
            std::make_unique<PodmanReset>(loop_, templates_.podman(), state_dir_,
                                          podman_run_dir(getuid(), opt_.job_id, opt_.slurm_node));
        if (podman_reset_->start([this] { maybe_finish_shutdown(); })) return;
    }
    proto::Reply r;
    r.id = shutdown_req_id_;
    if (shutdown_req_id_) send_reply(r);  // 0: our own decision, nobody asked
    shutdown_replied_ = true;
    LOG_INFO("[node %s] all pods stopped, exiting", node_name_.c_str());
    // Let the reply flush, then stop: closing the connection after the write
    // queue drains.
    auto stop = [this](int) {
        conn_.close();
        uv_stop(loop_);
    };
    // Not connected (yet): nothing to flush.
    if (!conn_ || conn_.shutdown(stop) != 0) stop(0);
}

void Shim::notify(ShimPod &p) {
    kill_execs(p.uid, "", false);  // sessions into a container that stopped
    Json::Value status = p.runner ? p.runner->status() : p.fixed_status;
    bool events = p.runner && p.runner->has_events();
    if (status == p.last_sent && !events) return;
    // Recorded before it is reported: what the agent saw is what a shim that
    // follows a crashed one finds (saved after the send, a crash between the
    // two left an older status behind: a container the agent saw running
    // reported lost as never started).
    if (p.runner) save_pod_state(p);
    if (!attached_) return;  // resent in full after re-attaching; events wait in the runner
    p.last_sent = status;
    proto::PodStatus m;
    m.uid = p.uid;
    m.ns = p.ns;
    m.name = p.name;
    m.status = status;
    // Always present (maybe empty): tells the agent that this runtime reports
    // its own BackOff/Unhealthy/Killing events.
    m.events.emplace();
    if (p.runner) {
        for (const auto &e : p.runner->take_events()) {
            auto ev = proto::pod_event_from_json(e);
            if (ev)
                m.events->push_back(std::move(*ev));
            else
                LOG_WARN("[pod %s/%s] event not sent: %s", p.ns.c_str(), p.name.c_str(),
                         ev.message().c_str());
        }
    }
    send_request(proto::ShimOp::PodStatus, proto::to_json(m));
}

std::function<void()> Shim::store_pull(const std::string &image,
                                       std::function<void(const Status &)> done) {
    if (!attached_) {
        auto cancelled = std::make_shared<bool>(false);
        defer(loop_, [done, cancelled] {
            if (!*cancelled)
                done(fail(Error::Unavailable, "the shim is not attached to the agent"));
        });
        return [cancelled] { *cancelled = true; };
    }
    proto::ImagePull m;
    m.image = image;
    const uint64_t id = send_request(proto::ShimOp::ImagePull, proto::to_json(m));
    agent_calls_[id] = std::move(done);
    return [this, id] {
        if (!agent_calls_.erase(id)) return;  // answered already
        proto::ImagePullCancel c;
        c.id = id;
        send_request(proto::ShimOp::ImagePullCancel, proto::to_json(c));
    };
}

uint64_t Shim::send_request(proto::ShimOp op, Json::Value body) {
    proto::Request req;
    req.id = next_id_++;
    req.op = std::string(proto::to_string(op));
    req.body = std::move(body);
    send_line(proto::encode(req));
    return req.id;
}

void Shim::pod_finished(ShimPod &p) {
    p.finished = true;
    gpus_.release(p.uid);
    save_gpus();
    save_pod_state(p);
    maybe_finish_shutdown();
}

void Shim::save_gpus() {
    if (state_dir_.empty()) return;
    if (auto st = write_file_atomic(state_dir_ + "/gpus.json", json::write(gpus_.to_json()), 0640,
                                    Durability::Cached);
        !st)
        LOG_WARN("[node %s] %s", node_name_.c_str(), st.message().c_str());
}

void Shim::save_pod_state(ShimPod &p) {
    Json::Value s(Json::objectValue);
    s["finished"] = p.finished;
    s["processes"] = p.runner ? p.runner->process_record() : Json::Value(Json::objectValue);
    // Exec sessions' supervisors, stopped with the containers when this shim dies.
    sessions_.exec_records(p.uid, &s["processes"]);
    s["status"] = p.runner ? p.runner->status() : p.fixed_status;
    (void)write_file_atomic(pod_dir(p.uid) + "/state.json", json::write(s), 0640,
                            Durability::Cached);
}

// Pods of a previous shim of this job: finished ones are remembered (pod_run
// stays idempotent); running ones are lost: their verified containers are
// stopped whole (RecordedContainers::stop, common/daemons/supervisor.h: each
// supervisor kills every process of its container, a daemon that left the
// group included, then the groups are killed; the kill passes end in the
// background, the loop never waits for them) and the pod is reported Failed.
void Shim::load_previous_pods() {
    DIR *d = opendir((state_dir_ + "/pods").c_str());
    if (!d) return;
    RecordedContainers containers;
    std::vector<std::pair<std::string, int>> lost;  // uid, its containers stopped
    while (struct dirent *e = readdir(d)) {
        std::string uid = e->d_name;
        if (uid == "." || uid == "..") continue;
        auto st = read_json(pod_dir(uid) + "/state.json");
        auto body = read_json(pod_dir(uid) + "/pod.json");
        if (!st || !body) continue;
        ShimPod &p = pods_[uid];
        p.uid = uid;
        p.ns = (*body)["pod"]["metadata"]["namespace"].asString();
        p.name = (*body)["pod"]["metadata"]["name"].asString();
        p.finished = true;
        p.fixed_status = (*st)["status"];
        if ((*st)["finished"].asBool()) continue;
        int found = 0;
        const Json::Value &procs = (*st)["processes"];
        for (const auto &name :
             procs.isObject() ? procs.getMemberNames() : Json::Value::Members{}) {
            const Json::Value &pr = procs[name];
            int pid = pr["pid"].isIntegral() ? pr["pid"].asInt() : 0;
            uint64_t ticks = pr["start_ticks"].isIntegral() ? pr["start_ticks"].asUInt64() : 0;
            if (containers.add(pid, ticks)) found++;
        }
        lost.emplace_back(uid, found);
    }
    closedir(d);
    // Signalled before any is reported: the agent may run their successors.
    if (!containers.stop(nullptr, kSupervisorSweepMs))
        LOG_ERROR("cannot stop the containers of the previous shim: fork: %s", strerror(errno));
    for (const auto &[uid, found] : lost) {
        ShimPod &p = pods_[uid];
        p.fixed_status = restarted_pod_status(p.fixed_status, found > 0, Clock::wall_ms());
        LOG_WARN("[pod %s/%s] lost with the previous shim (%d containers stopped)", p.ns.c_str(),
                 p.name.c_str(), found);
        gpus_.release(uid);
        save_pod_state(p);
        notify(p);
    }
    save_gpus();
}

}  // namespace sk::shim
