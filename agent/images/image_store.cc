#include "agent/images/image_store.h"

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "agent/core/agent_config.h"
#include "common/daemons/image_ref.h"
#include "common/daemons/json.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/strings.h"
#include "uv/command_runner.h"

namespace sk::agent {

namespace {

// A pull of a 20 GB image over a slow link still ends within this.
constexpr uint64_t kPullTimeoutMs = uint64_t{3600} * 1000;
constexpr uint64_t kPublishTimeoutMs = uint64_t{600} * 1000;
constexpr size_t kMaxListingBytes = size_t{8} << 20;

}  // namespace

Result<ImageStoreSettings> image_store_settings(const AgentConfig &cfg) {
    ImageStoreSettings s;
    s.dir = cfg.image_store;
    struct passwd pw, *res = nullptr;
    std::vector<char> buf(16384);
    if (getpwnam_r(cfg.image_store_user.c_str(), &pw, buf.data(), buf.size(), &res) != 0 || !res)
        return fail(Error::NotFound, "image_store_user '" + cfg.image_store_user +
                                         "' does not exist: make it (useradd --system "
                                         "--no-create-home " +
                                         cfg.image_store_user +
                                         ") or set image_store= to turn the image store off");
    if (pw.pw_uid == 0)
        return fail(Error::InvalidArgument,
                    "image_store_user '" + cfg.image_store_user +
                        "' is root: the image store's pulls unpack images from registries and "
                        "must run as an unprivileged user of their own");
    s.uid = pw.pw_uid;
    s.gid = pw.pw_gid;
    s.size = cfg.image_store_size;
    s.insecure_registries = cfg.image_store_insecure_registries;
    s.pulls = cfg.image_store_pulls;
    s.mount_program = cfg.image_store_mount_program;
    s.podman = cfg.podman;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return fail(Error::Io, std::string("readlink /proc/self/exe: ") + strerror(errno));
    s.self_exe.assign(exe, static_cast<size_t>(n));
    return s;
}

std::vector<std::string> store_podman_argv(const ImageStoreSettings &s) {
    return {s.podman,
            "--root",
            s.dir + "/storage",
            "--runroot",
            s.dir + "/run/podman",
            "--tmpdir",
            s.dir + "/tmp",
            "--storage-driver",
            "overlay",
            "--storage-opt",
            "overlay.mount_program=" + s.mount_program,
            "--storage-opt",
            "overlay.force_mask=shared",
            "--storage-opt",
            "overlay.ignore_chown_errors=true",
            "--cgroup-manager",
            "cgroupfs",
            "--events-backend",
            "file"};
}

std::vector<std::string> store_podman_env(const ImageStoreSettings &s) {
    return {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME=" + s.dir + "/home",
            "XDG_RUNTIME_DIR=" + s.dir + "/run/xdg",
            "XDG_CONFIG_HOME=" + s.dir + "/home/.config",
            "XDG_DATA_HOME=" + s.dir + "/home/.local/share",
            "TMPDIR=" + s.dir + "/tmp"};
}

std::vector<std::string> store_pull_argv(const ImageStoreSettings &s, const std::string &image) {
    auto v = store_podman_argv(s);
    v.insert(v.end(), {"pull", "--quiet"});
    const std::string reg = image_registry(image);
    if (std::find(s.insecure_registries.begin(), s.insecure_registries.end(), reg) !=
        s.insecure_registries.end())
        v.emplace_back("--tls-verify=false");
    v.push_back(image);
    return v;
}

std::vector<std::string> image_gc_victims(const StoreListing &l,
                                          const std::set<std::string> &in_use,
                                          const std::map<std::string, int64_t> &last_used,
                                          uint64_t limit) {
    if (limit == 0 || l.bytes <= limit || l.images.empty()) return {};
    struct Candidate {
        int64_t used;
        std::string id;
    };
    std::vector<Candidate> c;
    for (const auto &i : l.images) {
        bool used = false;
        for (const auto &n : i.names)
            used = used || in_use.count(n);
        for (const auto &d : i.digests)
            for (const auto &u : in_use)  // "repo@sha256:..." names a digest
                used = used ||
                       (u.size() > d.size() && u.compare(u.size() - d.size(), d.size(), d) == 0 &&
                        u[u.size() - d.size() - 1] == '@');
        if (used) continue;
        auto it = last_used.find(i.id);
        c.push_back({std::max(it == last_used.end() ? 0 : it->second, i.created_s), i.id});
    }
    std::sort(c.begin(), c.end(), [](const Candidate &a, const Candidate &b) {
        return a.used != b.used ? a.used < b.used : a.id < b.id;
    });
    const uint64_t low = limit / 10 * 9;
    const uint64_t share = l.bytes / l.images.size();
    uint64_t bytes = l.bytes;
    std::vector<std::string> out;
    for (const auto &v : c) {
        if (bytes <= low) break;
        out.push_back(v.id);
        bytes = bytes > share ? bytes - share : 0;
    }
    return out;
}

ImageStore::ImageStore(uv_loop_t *loop, ImageStoreSettings s) : loop_(loop), s_(std::move(s)) {}

// The agent's end stops its pulls (a pull of a registry that never answers
// would outlive it; one cut short is begun again by the next asker) and
// rootless podman's pause process of the store's user, which holds its
// user namespace between commands: nothing of the store outlives the agent.
ImageStore::~ImageStore() {
    *alive_ = false;
    try {
        for (auto &[image, p] : pulls_)
            if (p.kill) p.kill();
        stop_pause_process();
    } catch (...) {  // nothing of it may escape a destructor
    }
}

void ImageStore::stop_pause_process() const {
    // podman keeps it in its --tmpdir (store_podman_argv).
    auto text = read_file(s_.dir + "/tmp/pause.pid", 32);
    if (!text) return;
    auto pid = parse_uint(trim(*text), "pause.pid", 4194304);
    struct stat st;
    if (!pid || *pid < 2 || stat(("/proc/" + std::to_string(*pid)).c_str(), &st) != 0 ||
        st.st_uid != s_.uid)
        return;  // gone, or no longer the store user's process
    if (kill(static_cast<pid_t>(*pid), SIGKILL) == 0)
        LOG_VERBOSE("image store: podman's pause process %llu stopped",
                    static_cast<unsigned long long>(*pid));
}

Status ImageStore::start() {
    // STORE itself is root's, so nobody but root replaces what is below it;
    // everything below is the store user's own. Missing parents are made
    // as root's, 0755.
    for (size_t at = 1; (at = s_.dir.find('/', at)) != std::string::npos; at++)
        mkdir(s_.dir.substr(0, at).c_str(), 0755);
    if (mkdir(s_.dir.c_str(), 0755) != 0 && errno != EEXIST)
        return fail(Error::Io, "mkdir " + s_.dir + ": " + strerror(errno));
    struct stat st;
    if (lstat(s_.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
        (st.st_mode & 022) != 0 || (st.st_mode & 005) != 005)
        return fail(Error::Refused, "image_store " + s_.dir +
                                        " must be a directory of root's that only root may "
                                        "write (mode 0755)");
    // The jobs' users reach the view through every directory above it
    // (systemd's StateDirectory=, /var/lib/slurm-k8s, is 0700: not there).
    for (std::string p = s_.dir; p.size() > 1;) {
        p.resize(std::max<size_t>(p.rfind('/'), 1));
        if (stat(p.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0)
            return fail(Error::Refused, "image_store " + s_.dir +
                                            ": the jobs' users cannot reach it "
                                            "through " +
                                            p +
                                            " (not searchable by others): choose a "
                                            "place they reach, e.g. /var/cache/slurm-k8s/images");
    }
    for (const char *sub : {"storage", "view", "home", "tmp", "run"}) {
        std::string p = s_.dir + "/" + sub;
        if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
            return fail(Error::Io, "mkdir " + p + ": " + strerror(errno));
        if (lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            return fail(Error::Refused, p + " is not a directory: remove it");
        if ((st.st_uid != s_.uid || st.st_gid != s_.gid) && lchown(p.c_str(), s_.uid, s_.gid) != 0)
            return fail(Error::Io, "chown " + p + ": " + strerror(errno));
        mode_t mode = std::string(sub) == "storage" || std::string(sub) == "view" ? 0755 : 0700;
        if ((st.st_mode & 07777) != mode && chmod(p.c_str(), mode) != 0)
            return fail(Error::Io, "chmod " + p + ": " + strerror(errno));
    }
    publish({}, [](const Status &published) {
        if (!published) LOG_WARN("image store: %s", published.message().c_str());
    });
    return {};
}

std::function<void()> ImageStore::run_as_store(
    std::vector<std::string> argv,
    const std::function<void(int64_t, const std::string &, const std::string &)> &done) {
    RunAs as;
    as.uid = s_.uid;
    as.gid = s_.gid;
    as.env = store_podman_env(s_);
    as.cwd = s_.dir + "/home";
    as.max_output = kMaxListingBytes;
    const bool pull = argv.size() > 1 && argv[0] == s_.podman;
    return run_program_as_async(
        loop_, std::move(argv), as, pull ? kPullTimeoutMs : kPublishTimeoutMs,
        [alive = std::weak_ptr<bool>(alive_), done](const CommandResult &r) {
            if (alive.expired()) return;
            int64_t status = r.ran ? r.exit_code : -1;
            done(status, r.output, r.ran ? r.errors : r.error + "\n" + r.errors);
        });
}

void ImageStore::publish(const std::vector<std::string> &exclude,
                         const std::function<void(const Status &)> &done) {
    std::vector<std::string> argv = {s_.self_exe, kImageStorePublish, s_.dir};
    argv.insert(argv.end(), exclude.begin(), exclude.end());
    run_as_store(std::move(argv),
                 [this, done](int64_t status, const std::string &out, const std::string &err) {
                     if (status != 0)
                         return done(fail(Error::Io, "publishing the image store's view failed: " +
                                                         std::string(pull_error(err))));
                     auto v = json::parse(out);
                     if (!v) return done(fail(Error::Parse, "image store listing: " + v.message()));
                     auto l = store_listing_from_json(*v);
                     if (!l) return done(l.failure());
                     listing_ = std::move(*l);
                     done(Status());
                 });
}

uint64_t ImageStore::pull(uid_t uid, const std::string &image, Done done) {
    const uint64_t ticket = next_ticket_++;
    if (auto why = image_ref_error(image); !why.empty()) {
        done(fail(Error::InvalidArgument, why));
        return ticket;
    }
    auto it = pulls_.find(image);
    if (it != pulls_.end()) {
        it->second.waiters[ticket] = std::move(done);
        return ticket;
    }
    size_t mine = 0;
    for (const auto &[img, p] : pulls_)
        mine += p.uid == uid;
    if (mine >= kMaxQueuedPerUser || pulls_.size() >= kMaxQueued) {
        done(fail(Error::Unavailable, "the node's image store has too many pulls under way (" +
                                          std::to_string(mine) + " of this user's, " +
                                          std::to_string(pulls_.size()) +
                                          " in all); try again later"));
        return ticket;
    }
    Pull &p = pulls_[image];
    p.image = image;
    p.uid = uid;
    p.waiters[ticket] = std::move(done);
    queue_.push_back(image);
    start_next();
    return ticket;
}

void ImageStore::cancel(uint64_t ticket) {
    for (auto it = pulls_.begin(); it != pulls_.end(); ++it) {
        if (!it->second.waiters.erase(ticket) || !it->second.waiters.empty()) continue;
        auto q = std::find(queue_.begin(), queue_.end(), it->first);
        if (q != queue_.end()) {
            queue_.erase(q);
            pulls_.erase(it);
        } else if (it->second.kill) {
            LOG_INFO("image store: nobody waits for %s any more: its pull is stopped",
                     it->first.c_str());
            it->second.kill();  // pull_ended then reports to nobody
        }
        return;
    }
}

void ImageStore::start_next() {
    while (running_ < s_.pulls && !queue_.empty()) {
        std::string image = std::move(queue_.front());
        queue_.pop_front();
        running_++;
        LOG_INFO("image store: pulling %s", image.c_str());
        pulls_[image].kill = run_as_store(
            store_pull_argv(s_, image),
            [this, image](int64_t status, const std::string &, const std::string &err) {
                running_--;
                if (status != 0) {
                    pull_ended(image, fail(Error::Unavailable, pull_error(err)));
                    return;
                }
                publish({}, [this, image](const Status &st) {
                    pull_ended(image, st);
                    collect();
                });
            });
    }
}

void ImageStore::pull_ended(const std::string &image, const Status &st) {
    auto it = pulls_.find(image);
    if (it == pulls_.end()) return;
    auto waiters = std::move(it->second.waiters);
    pulls_.erase(it);
    if (st) {
        const std::string name = image_store_name(image);
        const int64_t now = static_cast<int64_t>(time(nullptr));
        for (const auto &i : listing_.images)
            if (std::find(i.names.begin(), i.names.end(), name) != i.names.end())
                last_used_[i.id] = now;
        LOG_INFO("image store: %s pulled (store %llu MiB)", image.c_str(),
                 static_cast<unsigned long long>(listing_.bytes >> 20));
    } else {
        LOG_WARN("image store: pull of %s failed: %s", image.c_str(), st.message().c_str());
    }
    for (auto &[ticket, w] : waiters)
        w(st);
    start_next();
}

void ImageStore::tick(int64_t now_s) {
    const std::set<std::string> names = in_use_ ? in_use_() : std::set<std::string>();
    for (const auto &i : listing_.images)
        for (const auto &n : i.names)
            if (names.count(n)) last_used_[i.id] = now_s;
    collect();
}

// One image at a time: left out of the view, removed from the store, the
// view published again (which measures the store), until under the low mark
// or nothing is left to remove.
void ImageStore::collect() {
    if (collecting_) return;
    if (s_.size == 0 || listing_.bytes <= s_.size) return;
    auto victims = image_gc_victims(listing_, in_use_ ? in_use_() : std::set<std::string>(),
                                    last_used_, s_.size);
    if (victims.empty()) return;
    collecting_ = true;
    const std::string id = victims.front();
    LOG_INFO(
        "image store: %llu MiB over the bound of %llu MiB: removing image %s, the least "
        "recently used",
        static_cast<unsigned long long>(listing_.bytes >> 20),
        static_cast<unsigned long long>(s_.size >> 20), id.substr(0, 12).c_str());
    publish({id}, [this, id](const Status &left_out) {
        if (!left_out) {
            collecting_ = false;
            LOG_WARN("image store: %s", left_out.message().c_str());
            return;
        }
        auto argv = store_podman_argv(s_);
        argv.insert(argv.end(), {"rmi", id});
        run_as_store(std::move(argv),
                     [this, id](int64_t status, const std::string &, const std::string &err) {
                         if (status != 0)
                             LOG_WARN("image store: podman rmi %s failed: %s",
                                      id.substr(0, 12).c_str(), pull_error(err).c_str());
                         last_used_.erase(id);
                         publish({}, [this, status](const Status &published) {
                             collecting_ = false;
                             if (!published) {
                                 LOG_WARN("image store: %s", published.message().c_str());
                                 return;
                             }
                             if (status == 0) collect();
                         });
                     });
    });
}

}  // namespace sk::agent
