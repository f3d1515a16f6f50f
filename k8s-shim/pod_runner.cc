#include "k8s-shim/pod_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "common/fs.h"
#include "common/log.h"
#include "common/procfs.h"
#include "k8s-shim/container.h"

namespace sk::shim {

namespace {

Status make_dirs(const std::string &path, mode_t mode) {
    std::string cur;
    for (size_t i = 0; i <= path.size(); i++) {
        if (i == path.size() || (path[i] == '/' && i > 0)) {
            cur = path.substr(0, i);
            if (mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
                return fail(Error::Io, "mkdir " + cur + ": " + strerror(errno));
        }
    }
    return {};
}

bool should_restart(RestartPolicy p, const Termination &t, bool probe_failed) {
    switch (p) {
        case RestartPolicy::Always:
            return true;
        case RestartPolicy::OnFailure:
            return t.exit_code != 0 || probe_failed;
        case RestartPolicy::Never:
            return false;
    }
    return false;
}

std::string real_path(const std::string &p) {
    char *r = realpath(p.c_str(), nullptr);
    if (!r) return "";
    std::string out(r);
    free(r);
    return out;
}

// A node path (hostPath, or a claim's PersistentVolume) as the job's user
// finds it when the pod starts: of its hostPath type, as a kubelet checks it
// (DirectoryOrCreate and FileOrCreate made, as the user), and, symbolic
// links resolved, still under its root, so that a link in the shared file
// system does not take the pod elsewhere. Refused, saying what, otherwise.
Status check_host_volume(const VolumePlan &v) {
    const proto::HostVolume &h = v.host;
    const std::string what = "volume " + v.name + ": node path " + h.path;
    struct stat st;
    if (stat(h.path.c_str(), &st) != 0) {
        if (errno != ENOENT)
            return fail(Error::Refused,
                        what + " cannot be reached as the job's user: " + strerror(errno));
        if (h.type == "DirectoryOrCreate") {
            if (auto made = make_dirs(h.path, 0755); !made)
                return fail(Error::Refused, what + " cannot be made: " + made.message());
        } else if (h.type == "FileOrCreate") {
            auto slash = h.path.rfind('/');
            if (slash > 0)
                if (auto made = make_dirs(h.path.substr(0, slash), 0755); !made)
                    return fail(Error::Refused, what + " cannot be made: " + made.message());
            int fd =
                open(h.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd < 0 && errno != EEXIST)
                return fail(Error::Refused, what + " cannot be made: " + strerror(errno));
            if (fd >= 0) close(fd);
        } else {
            return fail(Error::Refused,
                        what + " does not exist" +
                            (h.type.empty() ? "" : " (hostPath type " + h.type + ")"));
        }
        if (stat(h.path.c_str(), &st) != 0)
            return fail(Error::Refused, what + ": " + strerror(errno));
    }
    const std::map<std::string, std::pair<bool, const char *>> kinds = {
        {"Directory", {S_ISDIR(st.st_mode), "a directory"}},
        {"DirectoryOrCreate", {S_ISDIR(st.st_mode), "a directory"}},
        {"File", {S_ISREG(st.st_mode), "a file"}},
        {"FileOrCreate", {S_ISREG(st.st_mode), "a file"}},
        {"Socket", {S_ISSOCK(st.st_mode), "a socket"}},
        {"CharDevice", {S_ISCHR(st.st_mode), "a character device"}},
        {"BlockDevice", {S_ISBLK(st.st_mode), "a block device"}},
    };
    auto k = kinds.find(h.type);
    if (k != kinds.end() && !k->second.first)
        return fail(Error::Refused, "hostPath type check failed: " + h.path + " is not " +
                                        k->second.second + " (volume " + v.name + ")");
    std::string real = real_path(h.path), root = real_path(h.root);
    if (real.empty() || root.empty() || !path_within(real, root))
        return fail(Error::Refused, what + " leads to " + (real.empty() ? "(unresolvable)" : real) +
                                        ", outside " + h.root +
                                        " (a symbolic link); this node lets pods mount node paths "
                                        "only under its volume_roots");
    return {};
}

}  // namespace

PodRunner::PodRunner(RunnerEnv env, PodPlan plan) : env_(std::move(env)), plan_(std::move(plan)) {
    run_.init.resize(plan_.init_containers.size());
    run_.app.resize(plan_.containers.size());
    ContainerHost *host = this;  // what the containers know of their pod
    for (size_t i = 0; i < plan_.init_containers.size(); i++)
        init_.push_back(
            std::make_unique<Container>(host, &plan_.init_containers[i], &run_.init[i]));
    for (size_t i = 0; i < plan_.containers.size(); i++)
        app_.push_back(std::make_unique<Container>(host, &plan_.containers[i], &run_.app[i]));
}

PodRunner::~PodRunner() = default;

bool PodRunner::idle() const {
    if (!finished_) return false;
    for (auto *list : {&init_, &app_})
        for (auto &c : *list) {
            if (c->running || !c->hooks.empty() || c->proc || c->in || c->out || c->err)
                return false;
            for (auto &p : c->probes)
                if (!p->checks.empty()) return false;
            if (c->post_start_run || c->pre_stop_run) return false;
            for (auto &h : c->ended_hooks)
                if (!h->checks.empty()) return false;
        }
    return true;
}

// Volumes: a directory each under the pod directory, exported as
// SLURM_K8S_VOLUME_<NAME>, which each container's exec helper binds at its
// mountPaths in a mount namespace of the container's own
// (k8s-shim/mount_ns.h), on the scratch directory made here. A subPath
// missing in its volume is made, a directory, as a kubelet makes it.
Status PodRunner::prepare_volumes() {
    for (const auto &v : plan_.volumes) {
        if (v.kind == VolumeKind::Host) {
            if (auto st = check_host_volume(v); !st) return st;
            continue;
        }
        std::string dir = volume_dir(env_.pod_dir, v.name);
        if (auto st = make_dirs(dir, 0750); !st) return st;
        for (const auto &[rel, data] : v.files) {
            std::string path = dir + "/" + rel;
            auto slash = path.rfind('/');
            if (auto st = make_dirs(path.substr(0, slash), 0750); !st) return st;
            // Read-only, as a kubelet mounts these volumes (pod_security.cc).
            if (auto st = write_file_atomic(path, data, 0440, Durability::Cached); !st) return st;
        }
    }
    bool mounts = false;
    for (const auto *list : {&plan_.init_containers, &plan_.containers})
        for (const auto &c : *list) {
            if (!c.hidden_devices.empty()) mounts = true;
            for (const auto &b : c.binds) {
                mounts = true;
                struct stat st;
                if (b.make_missing && lstat(b.source.c_str(), &st) != 0 && errno == ENOENT)
                    if (auto made = make_dirs(b.source, 0750); !made) return made;
            }
        }
    // A subPath of a node path, made above if missing, stays under the
    // volume's root too, links resolved (the kubelet's subPath rule).
    for (const auto &[cname, list] : plan_.mounts)
        for (const auto &m : list) {
            if (m.sub_path.empty()) continue;
            for (const auto &v : plan_.volumes) {
                if (v.name != m.volume || v.kind != VolumeKind::Host) continue;
                std::string src = (v.host.path == "/" ? "" : v.host.path) + "/" + m.sub_path;
                std::string real = real_path(src), root = real_path(v.host.root);
                if (real.empty() || root.empty() || !path_within(real, root))
                    return fail(Error::Refused, "container " + cname + ": subPath " + m.sub_path +
                                                    " of volume " + v.name + " leads outside " +
                                                    v.host.root + " (a symbolic link)");
            }
        }
    if (mounts)
        if (auto st = make_dirs(mount_scratch_dir(env_.pod_dir), 0700); !st) return st;
    return {};
}

Status PodRunner::update_files(const proto::PodFiles &files) {
    auto files_volume = [this](const std::string &name) -> VolumePlan * {
        for (auto &v : plan_.volumes)
            if (v.name == name && v.kind == VolumeKind::Files) return &v;
        return nullptr;
    };
    for (const auto &entry : files) {
        const VolumePlan *v = files_volume(entry.first);
        if (!v)
            return fail(Error::InvalidArgument,
                        "pod " + plan_.key() + " has no files volume " + entry.first);
        for (const auto &file : entry.second)
            if (!v->files.count(file.first))
                return fail(Error::InvalidArgument, "volume " + entry.first + " of pod " +
                                                        plan_.key() + " has no file " + file.first);
    }
    for (const auto &entry : files) {
        VolumePlan *v = files_volume(entry.first);
        std::string dir = volume_dir(env_.pod_dir, entry.first);
        for (const auto &[rel, data] : entry.second) {
            if (auto st = write_file_atomic(dir + "/" + rel, data, 0440, Durability::Cached); !st)
                return st;
            v->files[rel] = data;
        }
    }
    return {};
}

Status PodRunner::start() {
    run_.start_ms = Clock::wall_ms();
    if (auto st = make_dirs(env_.pod_dir, 0750); !st) return st;
    if (auto st = prepare_volumes(); !st) return st;
    if (!plan_.pull_auth.empty())
        if (auto st = write_file_atomic(pull_auth_path(env_.pod_dir), plan_.pull_auth, 0600,
                                        Durability::Cached);
            !st)
            return st;
    if (plan_.active_deadline_s > 0) {
        deadline_ = Timer(env_.clock.loop);
        deadline_.start(static_cast<uint64_t>(plan_.active_deadline_s) * 1000,
                        [this] { deadline_exceeded(); });
    }
    if (!init_.empty()) {
        next_init_ = 0;
        (void)init_[0]->start();
    } else {
        start_app_containers();
    }
    changed();
    return {};
}

// As a kubelet: the pod is Failed at once (DeadlineExceeded), its
// containers stopped with the pod's grace period.
void PodRunner::deadline_exceeded() {
    if (finished_ || run_.stopping) return;
    const std::string msg = "Pod was active on the node longer than the specified deadline";
    LOG_INFO("[pod %s] active for %llds: its activeDeadlineSeconds passed", plan_.key().c_str(),
             static_cast<long long>(plan_.active_deadline_s));
    run_.deadline_exceeded = true;
    run_.reason = "DeadlineExceeded";
    run_.message = msg;
    add_event("Warning", "DeadlineExceeded", msg, "");
    kill(plan_.grace_s, "DeadlineExceeded");
}

void PodRunner::start_app_containers() {
    for (auto &c : app_)
        (void)c->start();
}

void PodRunner::container_started(Container *) {
    changed();
}

// The init sequence goes past a sidecar once it started (its startupProbe
// passed, or its postStart, or it runs): the next init container, or the
// app containers, start while it runs.
void PodRunner::advance_init() {
    while (!run_.stopping && next_init_ < init_.size()) {
        Container *c = init_[next_init_].get();
        if (!c->plan->sidecar || !c->run->started || c->run->init_passed) return;
        c->run->init_passed = true;
        LOG_INFO("%s sidecar started: the pod's initialization goes on", c->id_prefix().c_str());
        if (++next_init_ < init_.size())
            (void)init_[next_init_]->start();
        else
            start_app_containers();
    }
}

bool PodRunner::app_containers_done() const {
    for (const auto &c : app_)
        if (c->running || c->run->state != CState::Terminated) return false;
    return !app_.empty();
}

// The sidecars stop after the app containers, the last first (as a
// kubelet), each once the ones after it exited; within what is left of the
// grace period when the pod is stopping, the pod's grace when its app
// containers completed by themselves.
void PodRunner::stop_sidecars() {
    for (auto it = init_.rbegin(); it != init_.rend(); ++it) {
        Container *c = it->get();
        if (!c->plan->sidecar) continue;
        if (c->running) {
            if (c->killing) return;  // wait for it
            int64_t left = plan_.grace_s * 1000;
            if (stop_deadline_ms_)
                left = std::max<int64_t>(0, stop_deadline_ms_ - Clock::wall_ms());
            c->stop(left);
            return;
        }
        c->cancel_restart();
        settle_waiting(c);
    }
}

// A container waiting in back-off ends in its last termination.
void PodRunner::settle_waiting(Container *c) {
    if (c->run->state != CState::Waiting || !c->run->last) return;
    c->run->state = CState::Terminated;
    c->run->terminated = c->run->last;
    c->run->last.reset();
    c->run->waiting_reason.clear();
    c->run->waiting_message.clear();
}

void PodRunner::container_exited(Container *c) {
    const Termination &t = *c->run->terminated;
    bool probe_failed = !c->kill_reason.empty();
    if (run_.stopping || sidecars_ending_) {
        if (app_containers_done() || !c->plan->sidecar) stop_sidecars();
        check_finished();
        changed();
        return;
    }
    if (c->plan->sidecar) {
        // Restarted whatever the pod's policy, with back-off.
        changed();
        c->restart_after(c->backoff.on_exit(env_.clock.spec_now()));
        changed();
        return;
    }
    if (c->plan->init) {
        if (t.exit_code == 0) {
            changed();
            if (++next_init_ < init_.size())
                (void)init_[next_init_]->start();
            else
                start_app_containers();
            changed();
            return;
        }
        if (plan_.restart_policy == RestartPolicy::Never) {
            changed();
            if (has_sidecars()) {  // the pod failed: its sidecars stop
                sidecars_ending_ = true;
                stop_sidecars();
            }
            check_finished();
            return;
        }
    } else if (!should_restart(plan_.restart_policy, t, probe_failed)) {
        changed();
        // The app containers are done for good: the sidecars stop now.
        if (app_containers_done() && has_sidecars()) {
            sidecars_ending_ = true;
            stop_sidecars();
        }
        check_finished();
        return;
    }
    changed();  // report the termination before the back-off (as the kubelet)
    int64_t delay = c->backoff.on_exit(env_.clock.spec_now());
    c->restart_after(delay);
    changed();
}

void PodRunner::kill(int64_t grace_s, const std::string &reason) {
    if (finished_) return;
    if (!run_.stopping)
        LOG_INFO("[pod %s] stopping (%s, grace %llds)", plan_.key().c_str(), reason.c_str(),
                 static_cast<long long>(grace_s));
    run_.stopping = true;
    stop_deadline_ms_ = Clock::wall_ms() + grace_s * 1000;
    for (auto *list : {&init_, &app_}) {
        for (auto &c : *list) {
            if (c->plan->sidecar) continue;  // after the app containers (stop_sidecars)
            c->stop(grace_s * 1000);
            settle_waiting(c.get());
        }
    }
    bool apps_running = false;
    for (auto &c : app_)
        apps_running = apps_running || c->running;
    for (auto &c : init_)
        apps_running = apps_running || (c->running && !c->plan->sidecar);
    if (!apps_running) stop_sidecars();
    check_finished();
    changed();
}

bool PodRunner::has_sidecars() const {
    for (const auto &c : init_)
        if (c->plan->sidecar) return true;
    return false;
}

void PodRunner::pause(bool paused, const std::string &message) {
    if (finished_ || run_.paused == paused) return;
    run_.paused = paused;
    run_.paused_message = paused ? message : "";
    for (auto *list : {&init_, &app_})
        for (auto &c : *list)
            c->pause(paused);
    changed();
}

void PodRunner::check_finished() {
    if (finished_) return;
    for (auto *list : {&init_, &app_})
        for (auto &c : *list)
            if (c->running) return;
    if (!run_.stopping && !pod_finished(plan_, run_)) return;
    finished_ = true;
    LOG_INFO("[pod %s] finished: %s", plan_.key().c_str(), pod_phase(plan_, run_).c_str());
    changed();
    if (env_.on_finished) env_.on_finished();
}

void PodRunner::add_event(const std::string &type, const std::string &reason,
                          const std::string &message, const std::string &container) {
    // Bounded: a flapping probe between two notifications keeps the newest.
    if (events_.size() >= 32) events_.removeIndex(0, nullptr);
    Json::Value e(Json::objectValue);
    e["type"] = type;
    e["reason"] = reason;
    e["message"] = message;
    if (!container.empty()) e["container"] = container;
    events_.append(e);
    changed();
}

Json::Value PodRunner::take_events() {
    Json::Value out = events_;
    events_ = Json::Value(Json::arrayValue);
    return out;
}

void PodRunner::changed() {
    if (!advancing_) {  // advance_init starts containers, which report changes
        advancing_ = true;
        advance_init();
        advancing_ = false;
    }
    if (env_.on_change) env_.on_change();
}

Json::Value PodRunner::status() {
    last_status_ = build_pod_status(plan_, run_, last_status_, Clock::wall_ms());
    return last_status_;
}

Result<Container *> PodRunner::running_container(const std::string &container,
                                                 const char *verb) const {
    for (auto *list : {&init_, &app_})
        for (const auto &c : *list) {
            if (c->plan->name != container) continue;
            if (run_.stopping || finished_)
                return fail(Error::Invalid, std::string("cannot ") + verb + " container " +
                                                container + " of pod " + plan_.key() +
                                                ": the pod is terminating");
            if (!c->running || c->pending_exit)
                return fail(Error::Invalid, "container " + container + " of pod " + plan_.key() +
                                                " is not running");
            return c.get();
        }
    return fail(Error::NotFound, "pod " + plan_.key() + " has no container " + container);
}

Result<Container *> PodRunner::attach_container(const std::string &container) {
    return running_container(container, "attach to");
}

Result<SpawnSpec> PodRunner::exec_spec(const std::string &container,
                                       const std::vector<std::string> &argv, bool interactive,
                                       bool tty) const {
    auto c = running_container(container, "exec in");
    if (!c) return c.failure();
    const ContainerPlan &plan = *(*c)->plan;
    return container_command(argv, plan, env_.pod_dir, env_.supervisor, (*c)->pid, interactive,
                             tty);
}

// Asked on every status change for each exec session of the pod: no spec is built.
bool PodRunner::container_running(const std::string &container) const {
    return running_container(container, "exec in").ok();
}

std::vector<PodRunner::RunningContainer> PodRunner::running_containers() const {
    std::vector<RunningContainer> out;
    for (auto *list : {&init_, &app_})
        for (const auto &c : *list)
            if (c->running && c->pid > 0 && !c->pending_exit)
                out.push_back(
                    {c->plan->name, c->pid, c->run->started_ms, c->plan->image_run.has_value()});
    return out;
}

Json::Value PodRunner::process_record() const {
    Json::Value v(Json::objectValue);
    for (auto *list : {&init_, &app_})
        for (const auto &c : *list) {
            if (!c->running || c->pid == 0) continue;
            Json::Value p(Json::objectValue);
            p["pid"] = c->pid;
            p["start_ticks"] = Json::UInt64(c->start_ticks);
            p["restart_count"] = c->run->restart_count;
            v[c->plan->name] = p;
        }
    // The container's helpers, each under its own supervisor: preStop hooks
    // and exec probe checks still running, as "<container>:preStop:<pid>" and
    // "<container>:probe:<pid>" (':' is in no container name), so that a dead
    // shim's are stopped with its containers (Shim::load_previous_pods,
    // agent/controllers/lost_shim.cc read every member alike). Unreaped children of the
    // shim: their pids cannot have been reused.
    auto helper = [&v](const std::string &name, int pid) {
        unsigned long long ticks = proc_start_ticks(pid);
        if (pid <= 1 || ticks == 0) return;
        Json::Value p(Json::objectValue);
        p["pid"] = pid;
        p["start_ticks"] = Json::UInt64(ticks);
        v[name + ":" + std::to_string(pid)] = p;
    };
    for (auto *list : {&init_, &app_})
        for (const auto &c : *list) {
            for (const auto &h : c->hooks)
                helper(c->plan->name + ":preStop", h.pid());
            std::vector<int> hook_pids;
            for (const auto *h : {c->post_start_run.get(), c->pre_stop_run.get()})
                if (h) h->exec_pids(&hook_pids);
            for (const auto &h : c->ended_hooks)
                h->exec_pids(&hook_pids);
            for (int pid : hook_pids)
                helper(c->plan->name + ":hook", pid);
            std::vector<int> probe_pids;
            for (const auto &pr : c->probes)
                pr->exec_pids(&probe_pids);
            for (int pid : probe_pids)
                helper(c->plan->name + ":probe", pid);
        }
    return v;
}

}  // namespace sk::shim
