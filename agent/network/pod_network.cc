#include "agent/network/pod_network.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "agent/core/shared_mount.h"
#include "common/daemons/json.h"
#include "common/fs.h"
#include "common/log.h"
#include "uv/command_runner.h"
#include "uv/handles.h"

namespace sk::agent {

namespace {

constexpr size_t kMaxResultBytes = 64 << 10;

std::string sys(const std::string &what) {
    return what + ": " + strerror(errno);
}

// A pod uid as it names a directory here: what the API server makes (a
// UUID), nothing else.
bool uid_ok(const std::string &uid) {
    if (uid.empty() || uid.size() > 64) return false;
    for (char c : uid)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return false;
    return true;
}

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) close(fd);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
};

// The Uid line of /proc/<pid>/status (read through the held directory):
// real, effective, saved and filesystem ids all `uid`.
bool all_ids_are(int proc_dir, uint32_t uid) {
    Fd f(openat(proc_dir, "status", O_RDONLY | O_CLOEXEC));
    if (f.fd < 0) return false;
    char buf[4096];
    ssize_t n = read(f.fd, buf, sizeof buf - 1);
    if (n <= 0) return false;
    buf[n] = '\0';
    const char *line = strstr(buf, "\nUid:");
    if (!line) return false;
    const char *p = line + 5;
    for (int i = 0; i < 4; i++) {
        char *end = nullptr;
        errno = 0;
        unsigned long id = strtoul(p, &end, 10);
        if (end == p || errno != 0 || id != uid) return false;
        p = end;
    }
    return true;
}

// The bridge's gateway address for a range (its first host address).
std::string gateway_of(const std::string &subnet) {
    struct in_addr a {};
    if (inet_pton(AF_INET, subnet.substr(0, subnet.find('/')).c_str(), &a) != 1) return "";
    a.s_addr = htonl(ntohl(a.s_addr) + 1);
    char buf[INET_ADDRSTRLEN];
    return inet_ntop(AF_INET, &a, buf, sizeof buf) ? buf : "";
}

// Runs `ip` with `args` (no shell), its stdout in *out (bounded); whether it
// exited 0. Only at the agent's start, before any pod: a short wait.
bool run_ip(std::vector<std::string> args, std::string *out) {
    args.insert(args.begin(), "ip");
    std::vector<char *> argv;
    argv.reserve(args.size() + 1);
    for (auto &a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, "ip", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    char buf[4096];
    ssize_t n;
    while (rc == 0 && (n = read(fds[0], buf, sizeof buf)) > 0)
        if (out && out->size() < (1 << 20)) out->append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int st = 0;
    if (rc != 0 || waitpid(pid, &st, 0) != pid) return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// A bridge left with another range's address (pod_cidr changed while no
// pod is attached): removed, so that the bridge plugin makes it again with
// the new gateway (it refuses a bridge whose address differs).
void reset_stale_bridge(const std::string &bridge, const std::string &subnet) {
    std::string out;
    if (!run_ip({"-j", "-4", "addr", "show", "dev", bridge}, &out)) return;  // none
    auto v = json::parse(out);
    if (!v || !v->isArray() || v->empty()) return;
    const std::string gw = gateway_of(subnet);
    const int prefix = static_cast<int>(strtol(subnet.c_str() + subnet.find('/') + 1, nullptr, 10));
    for (const auto &a : (*v)[0]["addr_info"]) {
        if (!a["local"].isString()) continue;
        std::string have = a["local"].asString() + "/" + std::to_string(a["prefixlen"].asInt());
        if (a["local"].asString() == gw && a["prefixlen"].asInt() == prefix) continue;
        LOG_INFO("pod network: bridge %s has %s, not %s/%d (pod_cidr %s): making it again",
                 bridge.c_str(), have.c_str(), gw.c_str(), prefix, subnet.c_str());
        if (!run_ip({"link", "del", bridge}, nullptr))
            LOG_WARN("pod network: ip link del %s failed", bridge.c_str());
        return;
    }
}

}  // namespace

std::string hold_namespaces(int pid, uint32_t uid, const std::string &dir,
                            const std::vector<unsigned long> &held, unsigned long *net_ino) {
    if (pid < 2) return "no sandbox process";
    Fd proc(open(("/proc/" + std::to_string(pid)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (proc.fd < 0) return sys("the sandbox process " + std::to_string(pid));
    if (!all_ids_are(proc.fd, uid))
        return "the sandbox process " + std::to_string(pid) + " is not the job's user's";
    Fd net(openat(proc.fd, "ns/net", O_RDONLY | O_CLOEXEC));
    Fd uts(openat(proc.fd, "ns/uts", O_RDONLY | O_CLOEXEC));
    if (net.fd < 0 || uts.fd < 0) return sys("the sandbox's namespaces");
    // Still the same process (its /proc directory answers): a pid reused
    // after the checks would fail here.
    if (!all_ids_are(proc.fd, uid)) return "the sandbox process went away";
    Fd user(ioctl(net.fd, NS_GET_USERNS));
    Fd uts_user(ioctl(uts.fd, NS_GET_USERNS));
    if (user.fd < 0 || uts_user.fd < 0) return sys("the owner of the sandbox's namespaces");
    uid_t owner = 0;
    if (ioctl(user.fd, NS_GET_OWNER_UID, &owner) != 0) return sys("NS_GET_OWNER_UID");
    struct stat a {
    }, b{}, self{};
    if (fstat(user.fd, &a) != 0 || fstat(uts_user.fd, &b) != 0) return sys("fstat");
    if (owner != uid || a.st_ino != b.st_ino)
        return "the sandbox's namespaces are not in a user namespace of the job's user";
    struct stat ns {};
    if (fstat(net.fd, &ns) != 0 || stat("/proc/self/ns/net", &self) != 0) return sys("fstat");
    if (ns.st_ino == self.st_ino) return "the sandbox is in the host's network namespace";
    for (unsigned long ino : held)
        if (ino == ns.st_ino) return "the sandbox's network namespace is another pod's";
    if (mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) return sys("mkdir " + dir);
    for (const auto &[name, fd] : {std::pair<const char *, int>{"net", net.fd}, {"uts", uts.fd}}) {
        std::string target = dir + "/" + name;
        Fd t(open(target.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444));
        if (t.fd < 0) return sys("creating " + target);
        std::string source = "/proc/self/fd/" + std::to_string(fd);
        if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
            return sys("holding the namespace at " + target);
    }
    *net_ino = ns.st_ino;
    return "";
}

void release_namespaces(const std::string &dir) {
    for (const char *name : {"net", "uts"}) {
        std::string p = dir + "/" + name;
        // Unmounted until nothing is mounted there (a mount repeated by a
        // crash in between), then removed.
        for (int i = 0; i < 8 && umount2(p.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0; i++) {
        }
        unlink(p.c_str());
    }
    unlink((dir + "/result.json").c_str());
    rmdir(dir.c_str());
}

struct CniPodNetworks::Pod {
    enum class State { Adding, Attached, Removing } state = State::Adding;
    PodNetworkRequest req;
    PodAddress addr;
    Json::Value result;  // the chain's, passed back to the DEL
    unsigned long net_ino = 0;
    std::vector<std::function<void(Result<PodAddress>)>> waiting;  // attach callers
    std::vector<std::function<void()>> removed;                    // detach callers
    bool remove_wanted = false;
};

CniPodNetworks::CniPodNetworks(uv_loop_t *loop, PodNetworkSettings s)
    : loop_(loop), s_(std::move(s)) {}

CniPodNetworks::~CniPodNetworks() {
    // The shared bind of start() goes with the last pod held below it (an
    // agent that stops with pods attached keeps it for its successor).
    if (pods_.empty() && is_mount_point(s_.dir) &&
        umount2(s_.dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0)
        LOG_WARN("cannot unmount %s: %s", s_.dir.c_str(), strerror(errno));
}

Status CniPodNetworks::start() {
    if (auto why = subnet_error(s_.cni.subnet); !why.empty())
        return fail(Error::InvalidArgument, "pod_cidr: " + why);
    if (!interface_name_ok(s_.cni.bridge))
        return fail(Error::InvalidArgument,
                    "pod_network_bridge '" + s_.cni.bridge +
                        "' is not an interface name (1 to 15 letters, digits, '_', '-', '.')");
    if (access((s_.cni.plugin_dir + "/bridge").c_str(), X_OK) != 0 ||
        access((s_.cni.plugin_dir + "/host-local").c_str(), X_OK) != 0)
        return fail(Error::NotFound, "cni_plugin_dir " + s_.cni.plugin_dir +
                                         " has no bridge and host-local plugins: install "
                                         "containernetworking-plugins");
    for (const std::string &d : {s_.dir, s_.cni.ipam_dir}) {
        for (size_t at = d.find('/', 1); at != std::string::npos; at = d.find('/', at + 1))
            mkdir(d.substr(0, at).c_str(), 0755);
        if (mkdir(d.c_str(), 0711) != 0 && errno != EEXIST)
            return fail(Error::Io, sys("mkdir " + d));
        struct stat st {};
        if (lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
            (st.st_mode & 022) != 0)
            return fail(Error::Refused, d + " must be a directory of root's that nobody else may "
                                            "write (pod_network_dir)");
    }
    // Shared: the namespaces held below show in mount namespaces copied
    // from the node's before (a job's own).
    if (auto st = share_dir(s_.dir); !st) return st;
    DIR *dir = opendir(s_.dir.c_str());
    if (!dir) return fail(Error::Io, sys("opendir " + s_.dir));
    while (struct dirent *e = readdir(dir)) {
        std::string uid = e->d_name;
        if (!uid_ok(uid)) continue;
        auto text = read_file(pod_dir(uid) + "/result.json", kMaxResultBytes);
        auto saved = text ? json::parse(*text) : Result<Json::Value>(text.failure());
        Pod p;
        p.state = Pod::State::Attached;
        p.addr.net_ns = pod_dir(uid) + "/net";
        p.addr.uts_ns = pod_dir(uid) + "/uts";
        if (saved && saved->isObject()) {
            p.result = (*saved)["result"];
            p.addr.job_tag = (*saved)["job_tag"].asString();
            p.req.job_tag = p.addr.job_tag;
            p.req.pod_name = (*saved)["pod"].asString();
            for (const auto &h : (*saved)["host_ports"])
                p.req.host_ports.push_back({static_cast<uint16_t>(h["host_port"].asUInt()),
                                            static_cast<uint16_t>(h["container_port"].asUInt()),
                                            h["protocol"].asString(), h["host_ip"].asString()});
            if (auto ip = cni_result_ip(p.result)) p.addr.ip = *ip;
        }
        struct stat st {};
        if (stat(p.addr.net_ns.c_str(), &st) == 0) p.net_ino = st.st_ino;
        p.req.pod_uid = uid;
        LOG_INFO("pod network: %s (%s) attached before the restart", uid.c_str(),
                 p.addr.ip.empty() ? "no address" : p.addr.ip.c_str());
        pods_.emplace(uid, std::move(p));
    }
    closedir(dir);
    if (pods_.empty()) reset_stale_bridge(s_.cni.bridge, s_.cni.subnet);
    return {};
}

void CniPodNetworks::attach(const PodNetworkRequest &r,
                            std::function<void(Result<PodAddress>)> done) {
    const std::string uid = r.pod_uid;
    if (!uid_ok(uid))
        return defer(loop_, [done] { done(fail(Error::InvalidArgument, "bad pod uid")); });
    auto it = pods_.find(uid);
    if (it != pods_.end()) {
        Pod &p = it->second;
        if (p.state == Pod::State::Attached) {
            PodAddress a = p.addr;
            return defer(loop_, [done, a] { done(a); });
        }
        if (p.state == Pod::State::Adding) return p.waiting.push_back(std::move(done));
        return defer(loop_, [done] {
            done(fail(Error::Transient, "the pod's earlier network is being removed"));
        });
    }
    std::vector<unsigned long> held;
    for (const auto &[k, p] : pods_)
        if (p.net_ino) held.push_back(p.net_ino);
    Pod p;
    p.req = r;
    p.waiting.push_back(std::move(done));
    std::string why = hold_namespaces(r.sandbox_pid, r.uid, pod_dir(uid), held, &p.net_ino);
    if (!why.empty()) {
        release_namespaces(pod_dir(uid));
        auto waiting = std::move(p.waiting);
        return defer(loop_, [waiting, why] {
            for (const auto &d : waiting)
                d(fail(Error::Refused, why));
        });
    }
    p.addr.net_ns = pod_dir(uid) + "/net";
    p.addr.uts_ns = pod_dir(uid) + "/uts";
    p.addr.job_tag = r.job_tag;
    pods_.emplace(uid, std::move(p));
    run_chain(uid, true, 0, Json::Value(),
              [this, uid](Result<Json::Value> res) { attached_now(uid, std::move(res)); });
}

void CniPodNetworks::attached_now(const std::string &uid, Result<Json::Value> r) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    Pod &p = it->second;
    Result<std::string> ip = r ? cni_result_ip(*r) : Result<std::string>(r.failure());
    Status saved;
    if (ip) {
        p.result = *r;
        p.addr.ip = *ip;
        Json::Value keep(Json::objectValue);
        keep["result"] = *r;
        keep["job_tag"] = p.req.job_tag;
        keep["pod"] = p.req.pod_name;
        keep["host_ports"] = Json::Value(Json::arrayValue);
        for (const auto &h : p.req.host_ports) {
            Json::Value e(Json::objectValue);
            e["host_port"] = Json::UInt(h.host_port);
            e["container_port"] = Json::UInt(h.container_port);
            e["protocol"] = h.protocol;
            e["host_ip"] = h.host_ip;
            keep["host_ports"].append(e);
        }
        saved = write_file_atomic(pod_dir(uid) + "/result.json", json::write(keep), 0600);
    }
    auto waiting = std::move(p.waiting);
    p.waiting.clear();
    if (!ip || !saved) {
        Failure f = !ip ? ip.failure() : saved.failure();
        LOG_WARN("pod network: %s: %s", p.req.pod_name.c_str(), f.message.c_str());
        p.state = Pod::State::Attached;  // removed as one that is (a partial ADD undone)
        p.remove_wanted = false;
        remove_now(uid);
        for (const auto &d : waiting)
            d(f);
        return;
    }
    p.state = Pod::State::Attached;
    LOG_INFO("pod network: %s is %s", p.req.pod_name.c_str(), p.addr.ip.c_str());
    PodAddress a = p.addr;
    bool remove = p.remove_wanted;
    for (const auto &d : waiting)
        d(a);
    if (remove) remove_now(uid);
}

void CniPodNetworks::detach(const std::string &pod_uid, std::function<void()> done) {
    auto it = pods_.find(pod_uid);
    if (it == pods_.end()) {
        if (done) defer(loop_, std::move(done));
        return;
    }
    Pod &p = it->second;
    if (done) p.removed.push_back(std::move(done));
    if (p.state == Pod::State::Adding)
        p.remove_wanted = true;
    else if (p.state == Pod::State::Attached)
        remove_now(pod_uid);
}

void CniPodNetworks::remove_now(const std::string &uid) {
    Pod &p = pods_.at(uid);
    p.state = Pod::State::Removing;
    run_chain(uid, false, 0, p.result,
              [this, uid](const Result<Json::Value> &) { finish_removal(uid); });
}

void CniPodNetworks::finish_removal(const std::string &uid) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return;
    release_namespaces(pod_dir(uid));
    auto removed = std::move(it->second.removed);
    LOG_INFO("pod network: %s removed",
             it->second.req.pod_name.empty() ? uid.c_str() : it->second.req.pod_name.c_str());
    pods_.erase(it);
    for (const auto &d : removed)
        d();
}

void CniPodNetworks::run_chain(const std::string &uid, bool add, size_t i, Json::Value prev,
                               const std::function<void(Result<Json::Value>)> &done) {
    auto it = pods_.find(uid);
    if (it == pods_.end()) return done(fail(Error::NotFound, "the pod's network is gone"));
    const Pod &p = it->second;
    auto plugins = cni_plugins(s_.cni, !p.req.host_ports.empty());
    if (i >= plugins.size()) return done(std::move(prev));
    // DEL: the plugins backwards, each given the ADD's result.
    const Json::Value &plugin = plugins[add ? i : plugins.size() - 1 - i];
    std::string type = plugin["type"].asString();
    std::string ns = p.req.pod_name.substr(0, p.req.pod_name.find('/'));
    std::string name = p.req.pod_name.find('/') == std::string::npos
                           ? p.req.pod_name
                           : p.req.pod_name.substr(p.req.pod_name.find('/') + 1);
    run_program_with_input(
        loop_, {s_.cni.plugin_dir + "/" + type},
        cni_env(s_.cni, add ? "ADD" : "DEL", uid, p.addr.net_ns, ns, name),
        cni_stdin(plugin, prev, p.req.host_ports), s_.plugin_timeout_ms,
        [this, uid, add, i, prev, type, done](const CommandResult &r) {
            // A DEL prints nothing when it succeeds.
            Result<Json::Value> res = !r.ran ? Result<Json::Value>(fail(Error::Io, r.error))
                                      : !add && r.exit_code == 0
                                          ? Result<Json::Value>(Json::Value())
                                          : cni_result(r.exit_code, r.output, r.errors);
            if (!res) {
                Failure f{res.error(), "the CNI plugin " + type + (add ? " (ADD)" : " (DEL)") +
                                           ": " + res.message()};
                if (add) {
                    // Undo what the plugins before it did: the removal runs
                    // the whole chain's DEL (each plugin's DEL is idempotent).
                    return done(f);
                }
                LOG_WARN("pod network: %s: %s", uid.c_str(), f.message.c_str());
            }
            // ADD: the next plugin builds on this one's result; DEL: each gets
            // the ADD's result.
            run_chain(uid, add, i + 1, add ? *res : prev, done);
        });
}

const PodAddress *CniPodNetworks::find(const std::string &pod_uid) const {
    auto it = pods_.find(pod_uid);
    if (it == pods_.end() || it->second.state != Pod::State::Attached) return nullptr;
    return &it->second.addr;
}

std::vector<std::string> CniPodNetworks::attached() const {
    std::vector<std::string> v;
    for (const auto &[uid, p] : pods_)
        if (p.state == Pod::State::Attached) v.push_back(uid);
    return v;
}

}  // namespace sk::agent
