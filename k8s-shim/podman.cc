#include "k8s-shim/podman.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <json/json.h>

#include "common/backoff.h"
#include "common/daemons/image_ref.h"
#include "common/daemons/log_paths.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/strings.h"
#include "k8s-shim/pod_plan.h"
#include "k8s-shim/spawn.h"

namespace sk::shim {

std::string podman_dir(const std::string &state_dir) {
    return state_dir + "/podman";
}

bool store_lists(const std::string &view, const std::string &image) {
    if (view.empty() || image.find('@') != std::string::npos) return false;
    auto text = read_file(view + "/overlay-images/images.json", size_t{64} << 20);
    // Names are of [A-Za-z0-9._:/@-] (image_ref_error): quoted as they are.
    return text && text->find("\"" + image_store_name(image) + "\"") != std::string::npos;
}

std::vector<std::string> podman_store_options(const PodmanSettings &s, const std::string &view,
                                              const std::string &mount_program) {
    if (view.empty() || s.storage_driver != "overlay") return {};
    return {"--storage-opt", "overlay.imagestore=" + view, "--storage-opt",
            "overlay.mount_program=" + mount_program};
}

std::vector<std::string> podman_command(const PodmanSettings &s, const std::string &dir,
                                        const std::string &run_dir,
                                        const std::vector<std::string> &store_options) {
    std::vector<std::string> v = {
        s.binary,      "--root",           dir + "/storage",   "--runroot",        run_dir,
        "--tmpdir",    dir + "/tmp",       "--storage-driver", s.storage_driver,   "--runtime",
        s.oci_runtime, "--cgroup-manager", "cgroupfs",         "--events-backend", "file"};
    v.insert(v.end(), store_options.begin(), store_options.end());
    v.insert(v.end(), s.options.begin(), s.options.end());
    return v;
}

std::vector<std::pair<std::string, std::string>> podman_environment(const std::string &dir,
                                                                    const std::string &path) {
    return {{"PATH", path},
            {"HOME", dir + "/home"},
            {"XDG_RUNTIME_DIR", dir + "/xdg"},
            {"XDG_CONFIG_HOME", dir + "/home/.config"},
            {"XDG_DATA_HOME", dir + "/home/.local/share"},
            {"TMPDIR", dir + "/tmp"}};
}

namespace {

// mkdir 0700 (an existing one is fine), then: a directory, ours, closed to
// the others, not a symlink.
Status private_dir(const std::string &p) {
    if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
        return fail(Error::Io, "mkdir " + p + ": " + strerror(errno));
    struct stat st;
    if (lstat(p.c_str(), &st) != 0) return fail(Error::Io, "lstat " + p + ": " + strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0)
        return fail(Error::Refused, p + " is not a private directory of the job's user (another "
                                        "user's, a symlink, or open to others): the podman "
                                        "runtime cannot use it; remove it");
    return {};
}

}  // namespace

Status make_podman_dirs(const std::string &dir, const std::string &run_dir) {
    for (const char *sub : {"", "/home", "/xdg", "/tmp", "/home/.config"})
        if (auto st = private_dir(dir + sub); !st) return st;
    if (auto st = private_dir(run_dir.substr(0, run_dir.rfind('/'))); !st) return st;
    return private_dir(run_dir);
}

bool KnownImages::usable(const std::string &image, const std::string &credential) const {
    auto it = pulled_with_.find(image);
    return it != pulled_with_.end() && (it->second.count("") || it->second.count(credential));
}

void KnownImages::add(const std::string &image, const std::string &credential) {
    pulled_with_[image].insert(credential);
}

std::string pull_auth_path(const std::string &pod_dir) {
    return pod_dir + "/pull-auth.json";
}

std::string podman_container_name(const std::string &container, const std::string &pod,
                                  const std::string &ns, const std::string &uid) {
    return "k8s_" + container + "_" + pod + "_" + ns + "_" + uid;
}

bool podman_env_by_value(const std::string &name) {
    for (const char *p : {"CONTAINERS_", "PODMAN_", "XDG_", "LD_", "BUILDAH_", "STORAGE_"})
        if (name.rfind(p, 0) == 0) return true;
    return name == "PATH" || name == "HOME" || name == "TMPDIR" || name == "REGISTRY_AUTH_FILE" ||
           name == "DOCKER_CONFIG" || name == "NOTIFY_SOCKET";
}

std::vector<std::pair<std::string, std::string>> podman_process_env(const ContainerPlan &c) {
    auto env = c.image_run->tool_env;
    for (const auto &e : c.env)
        if (!podman_env_by_value(e.name)) env.emplace_back(e.name, e.value);
    return env;
}

std::vector<std::string> podman_exists_argv(const ImageRun &r) {
    auto v = r.podman;
    v.insert(v.end(), {"image", "exists", r.image});
    return v;
}

std::vector<std::string> podman_pull_argv(const ImageRun &r) {
    auto v = r.podman;
    v.insert(v.end(), {"pull", "--quiet"});
    if (r.insecure) v.emplace_back("--tls-verify=false");
    if (!r.authfile.empty()) v.insert(v.end(), {"--authfile", r.authfile});
    v.push_back(r.image);
    return v;
}

std::vector<std::string> podman_run_argv(const ContainerPlan &c, const std::string &helper) {
    const ImageRun &r = *c.image_run;
    std::vector<std::string> v = {helper, kPodmanMain, r.name, std::to_string(r.podman.size()),
                                  "--"};
    v.insert(v.end(), r.podman.begin(), r.podman.end());
    // --replace: an instance killed at its grace's end left its container
    // behind; --pull=never: the shim pulled (or refused) already.
    v.insert(v.end(), {"run", "--name", r.name, "--replace", "--rm", "--pull=never",
                       "--userns=keep-id", "--network=host", "--log-driver=none"});
    v.insert(v.end(), r.run_options.begin(), r.run_options.end());
    for (const auto &e : c.env)
        v.insert(v.end(), {"--env", podman_env_by_value(e.name) ? e.name + "=" + e.value : e.name});
    if (!c.working_dir.empty()) v.insert(v.end(), {"--workdir", c.working_dir});
    // spec.tty: podman's stdio is the shim's terminal; the container gets its own.
    if (c.tty) v.emplace_back("--tty");
    if (c.tty && c.stdin_open) v.emplace_back("--interactive");
    for (const auto &b : c.binds)
        v.insert(v.end(), {"--volume", b.source + ":" + b.target + (b.read_only ? ":ro" : "")});
    if (!r.pidfile.empty()) v.insert(v.end(), {"--pidfile", r.pidfile});
    if (!r.termination_log.empty())
        v.insert(v.end(), {"--volume", r.termination_log + ":" + r.termination_message_path});
    if (!r.cdi_devices.empty()) {
        for (const auto &d : r.cdi_devices)
            v.insert(v.end(), {"--device", d});
    } else {
        for (int i : c.gpu_indices) {
            std::string dev = r.gpu_device;
            size_t at = dev.find("{index}");
            if (at != std::string::npos) dev.replace(at, 7, std::to_string(i));
            v.insert(v.end(), {"--device", dev + ":/dev/nvidia" + std::to_string(i)});
        }
        if (!c.gpu_indices.empty())
            for (const auto &d : r.gpu_control_devices) {
                struct stat st;
                if (stat(d.c_str(), &st) == 0) v.insert(v.end(), {"--device", d});
            }
    }
    if (r.has_command) {
        Json::Value ep(Json::arrayValue);
        for (const auto &w : r.command)
            ep.append(w);
        Json::StreamWriterBuilder b;
        b["indentation"] = "";
        b["emitUTF8"] = true;
        v.push_back("--entrypoint=" + Json::writeString(b, ep));
    }
    v.push_back(r.image);
    v.insert(v.end(), r.args.begin(), r.args.end());
    return v;
}

std::vector<std::string> podman_exec_argv(const ImageRun &r, const std::vector<std::string> &cmd,
                                          bool interactive, bool tty) {
    auto v = r.podman;
    v.emplace_back("exec");
    if (interactive) v.emplace_back("--interactive");
    if (tty) v.emplace_back("--tty");
    v.push_back(r.name);
    v.insert(v.end(), cmd.begin(), cmd.end());
    return v;
}

std::vector<std::string> podman_rm_argv(const ImageRun &r) {
    auto v = r.podman;
    v.insert(v.end(), {"rm", "--force", "--ignore", "--time", "0", r.name});
    return v;
}

std::vector<std::string> podman_reset_argv(const std::vector<std::string> &podman) {
    auto v = podman;
    v.insert(v.end(), {"system", "reset", "--force"});
    return v;
}

std::string read_termination_message(const std::string &path) {
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return "";
    struct stat st;
    std::string out;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) out.assign(buf, static_cast<size_t>(n));
    }
    close(fd);
    return out;
}

int64_t pull_backoff_ms(int failures) {
    static const Backoff kPull(10000, 300000, Backoff::no_jitter);
    return static_cast<int64_t>(kPull.nominal_ms(failures < 1 ? 1 : unsigned(failures)));
}

// ---------------------------------------------------------------- wrapper --

namespace {

pid_t spawn_argv(char **argv, bool quiet, const sigset_t &old) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    setpgid(0, 0);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    if (quiet) {
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
    }
    execvp(argv[0], argv);
    dprintf(2, "cannot start '%s': %s\n", argv[0], strerror(errno));
    _exit(128);
}

}  // namespace

int podman_main(int argc, char **argv) {
    // argv: prog --podman-main NAME N -- ARGV...
    if (argc < 6 || strcmp(argv[4], "--") != 0) {
        dprintf(2, "usage: slurm-k8s-shim --podman-main NAME N -- PODMAN-ARGV...\n");
        return 128;
    }
    std::string name = argv[2];
    char *end = nullptr;
    long n = strtol(argv[3], &end, 10);
    char **cmd = argv + 5;
    int words = argc - 5;
    if (*end != '\0' || n < 1 || n >= words) {
        dprintf(2, "slurm-k8s-shim --podman-main: bad word count '%s'\n", argv[3]);
        return 128;
    }
    sigset_t set, old;
    sigemptyset(&set);
    for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
        sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, &old);
    pid_t main_pid = spawn_argv(cmd, false, old);
    if (main_pid < 0) {
        dprintf(2, "cannot start '%s': %s\n", cmd[0], strerror(errno));
        return 128;
    }
    std::vector<std::string> kill_words(cmd, cmd + n);
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&set, &si);
        if (sig < 0) continue;  // EINTR
        if (sig != SIGCHLD) {
            // The container gets it through its runtime; `podman run` and the
            // wrapper's own group never do (a SIGTERM would make podman exit 0).
            std::vector<std::string> k = kill_words;
            k.insert(k.end(), {"kill", "--signal", std::to_string(sig), name});
            std::vector<char *> kv;
            kv.reserve(k.size() + 1);
            for (auto &w : k)
                kv.push_back(w.data());
            kv.push_back(nullptr);
            (void)spawn_argv(kv.data(), true, old);
            continue;
        }
        int status = 0;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            if (pid != main_pid) continue;
            if (WIFEXITED(status)) return WEXITSTATUS(status);
            return 128 + WTERMSIG(status);
        }
    }
}

namespace {
constexpr uint64_t kPodmanResetMs = 20'000;
}  // namespace

bool PodmanReset::start(std::function<void()> done) {
    if (started_ || state_dir_.empty()) return false;
    struct stat st;
    if (lstat((podman_dir(state_dir_) + "/storage").c_str(), &st) != 0) return false;  // unused
    started_ = true;
    done_ = std::move(done);
    return spawn();
}

bool PodmanReset::spawn() {
    const std::string dir = podman_dir(state_dir_);
    SpawnOptions o;
    o.args = podman_reset_argv(podman_command(podman_, dir, run_dir_));
    o.env.emplace();
    for (const auto &[name, value] : podman_environment(dir, PlanContext().base_path))
        o.env->push_back(name + "=" + value);
    o.cwd = state_dir_;
    o.detached = true;
    err_ = Pipe(loop_);
    o.err = &err_;
    output_.clear();
    exited_ = false;
    int rc = proc_.spawn(loop_, o, [this](int64_t status, int sig) {
        proc_.close();
        timer_.stop();
        exited_ = true;
        status_ = sig ? 128 + sig : status;
        ended();
    });
    if (rc != 0) {
        err_.close();
        LOG_WARN("podman system reset of %s: %s", dir.c_str(), uv_strerror(rc));
        return false;
    }
    err_.read_start([this](ssize_t n, const char *data) {
        if (n > 0 && output_.size() < 4096) output_.append(data, static_cast<size_t>(n));
        if (n < 0) {
            err_.close();
            ended();
        }
    });
    timer_ = Timer(loop_);
    timer_.start(kPodmanResetMs, [this] {
        LOG_WARN("podman system reset still runs after %llu ms: killed",
                 static_cast<unsigned long long>(kPodmanResetMs));
        signal_group(proc_.pid(), SIGKILL);
    });
    return true;
}

void PodmanReset::ended() {
    if (!exited_ || err_) return;
    const std::string dir = podman_dir(state_dir_);
    struct stat st;
    bool left = lstat((dir + "/storage").c_str(), &st) == 0;
    // The plugin's SIGTERM to the shim's process group (stop_shim) also hits
    // a child forked just before, until it leaves the group (setsid): such
    // a reset never ran. Once more, now that the signal came.
    if (left && status_ == 128 + SIGTERM && ++tries_ < 3) {
        LOG_INFO("podman system reset ended by SIGTERM before it ran: again");
        if (spawn()) return;
    }
    if (!left) (void)remove_tree(run_dir_);  // what the reset left of it: ours
    if (status_ == 0 && !left)
        LOG_INFO("podman state of the job removed (%s, %s)", dir.c_str(), run_dir_.c_str());
    else
        LOG_WARN("podman system reset of %s failed (status %lld%s): %s", dir.c_str(),
                 static_cast<long long>(status_), left ? ", storage left" : "",
                 std::string(trim(output_)).c_str());
    if (done_) done_();
}

}  // namespace sk::shim
