#include "common/cgroup/pod_cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/cgroup/bpf_devices.h"
#include "common/k8s_names.h"
#include "common/cgroup/slurm_cgroup.h"
#include "common/strings.h"

namespace sk {
namespace {

constexpr char kPrefix[] = "k8s_pod_";
constexpr char kContainerPrefix[] = "ctr_";

bool names_controller(const std::string &controllers, const std::string &c) {
    for (const auto &x : split(controllers, ','))
        if (x == c) return true;
    return false;
}

// Writes `text` to dir_fd/name in one write (no symlink followed).
Status write_at(int dir_fd, const std::string &dir, const char *name, const std::string &text) {
    int fd = openat(dir_fd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail(Error::Io, dir + "/" + name + ": " + strerror(errno));
    Status st;
    if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        st = fail(Error::Io, dir + "/" + name + ": writing '" + text + "': " + strerror(errno));
    close(fd);
    return st;
}

}  // namespace

std::string own_cgroup_tree(std::string_view proc_cgroup_text, uint32_t job_id) {
    for (const auto &l : slurm_job_cgroups(proc_cgroup_text, job_id)) {
        std::string_view top(l.path);
        if (!top.empty() && top[0] == '/') top.remove_prefix(1);
        top = top.substr(0, top.find('/'));
        if (!starts_with(top, "slurm_")) continue;
        std::string_view node = top.substr(6);
        if (node.empty() || node.size() > 64 || !std::all_of(node.begin(), node.end(), [](char c) {
                return isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
            }))
            continue;
        return std::string(kOwnCgroupTree) + "_" + std::string(node);
    }
    return kOwnCgroupTree;
}

std::vector<std::string> own_job_cgroup_dirs(std::string_view proc_cgroup_text, uint32_t job_id,
                                             const std::vector<std::string> &own,
                                             const std::string &cgroup_root) {
    std::vector<std::string> out;
    const std::string tree = own_cgroup_tree(proc_cgroup_text, job_id);
    for (const auto &l : parse_proc_cgroup(proc_cgroup_text)) {
        if (l.controllers.empty() || l.controllers.rfind("name=", 0) == 0) continue;
        if (std::none_of(own.begin(), own.end(),
                         [&](const std::string &c) { return names_controller(l.controllers, c); }))
            continue;
        std::string d =
            cgroup_root + "/" + l.controllers + "/" + tree + "/job_" + std::to_string(job_id);
        if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
    }
    return out;
}

Result<std::vector<PodCgroupParent>> pod_cgroup_parents(std::string_view shim_proc_cgroup,
                                                        uint32_t job_id,
                                                        const std::vector<std::string> &wanted,
                                                        const std::string &cgroup_root,
                                                        const std::vector<std::string> &own) {
    auto lines = parse_proc_cgroup(shim_proc_cgroup);
    std::vector<PodCgroupParent> out;
    if (unified_only(lines)) {
        for (const auto &l : slurm_job_cgroups(shim_proc_cgroup, job_id)) {
            std::string step = l.path + "/step_extern";
            for (const auto &u : lines)
                if (u.path == step || u.path.rfind(step + "/", 0) == 0) {
                    out.push_back({"", cgroup_root + step, false, true});
                    return out;
                }
        }
        return fail(Error::NotFound, "the shim is in no cgroup of job " + std::to_string(job_id) +
                                         "'s extern step (cgroup v2: proctrack/cgroup, "
                                         "task/cgroup and PrologFlags=Contain make one)");
    }
    for (const auto &l : lines) {
        if (l.controllers.empty()) continue;
        if (std::none_of(wanted.begin(), wanted.end(),
                         [&](const std::string &c) { return names_controller(l.controllers, c); }))
            continue;
        std::string job = slurm_job_dir(l.path, job_id);
        if (job.empty()) continue;
        std::string step = job + "/step_extern";
        if (l.path != step && l.path.rfind(step + "/", 0) != 0) continue;
        out.push_back({l.controllers, cgroup_root + "/" + l.controllers + step});
    }
    if (!out.empty()) {
        for (const auto &d : own_job_cgroup_dirs(shim_proc_cgroup, job_id, own, cgroup_root)) {
            std::string controllers = d.substr(cgroup_root.size() + 1);
            controllers.resize(controllers.find('/'));
            if (std::none_of(out.begin(), out.end(), [&](const PodCgroupParent &p) {
                    return p.controllers == controllers;
                }))
                out.push_back({controllers, d, true});
        }
    }
    if (out.empty())
        return fail(Error::NotFound, "the shim is in no " + join(wanted, "/") + " cgroup of job " +
                                         std::to_string(job_id) +
                                         "'s extern step (cgroup.conf ConstrainDevices=yes with "
                                         "task/cgroup and PrologFlags=Contain make one)");
    return out;
}

Result<std::string> pod_cgroup_name(std::string_view pod_uid) {
    if (pod_uid.empty() || pod_uid.size() > 64 ||
        !std::all_of(pod_uid.begin(), pod_uid.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
        }))
        return fail(Error::InvalidArgument, "pod uid '" + std::string(pod_uid.substr(0, 80)) +
                                                "' is not 1-64 characters of a-z, 0-9 and '-'");
    return std::string(kPrefix) + std::string(pod_uid);
}

Result<std::string> container_cgroup_name(std::string_view container) {
    if (!k8s::is_dns1123_label(container))
        return fail(
            Error::InvalidArgument,
            "container name '" + std::string(container.substr(0, 80)) + "' is no DNS label");
    return std::string(kContainerPrefix) + std::string(container);
}

int64_t pod_memory_limit(const std::vector<int64_t> &app_limits,
                         const std::vector<int64_t> &init_limits, int64_t fallback) {
    int64_t sum = 0, init = 0;
    for (int64_t l : app_limits) {
        if (l <= 0) return fallback;
        sum += l;
    }
    for (int64_t l : init_limits) {
        if (l <= 0) return fallback;
        init = std::max(init, l);
    }
    if (app_limits.empty()) return fallback;
    return std::max(sum, init);
}

int64_t cpu_quota_for(int64_t limit_milli, int64_t period_us) {
    if (limit_milli <= 0) return 0;
    return std::max<int64_t>(1000, limit_milli * period_us / 1000);
}

int64_t cpu_shares_for(int64_t request_milli) {
    return std::clamp<int64_t>(request_milli * 1024 / 1000, 2, 262144);
}

int64_t cpu_weight_for_shares(int64_t shares) {
    shares = std::clamp<int64_t>(shares, 2, 262144);
    return 1 + ((shares - 2) * 9999) / 262142;
}

namespace {

// Opens the own tree's job directory "<hierarchy>/<tree>/job_<id>" (tree:
// own_cgroup_tree), making the two levels below the hierarchy's root as
// needed; no component is followed if it is a symlink. -1 with errno on
// failure.
int open_own_parent(const std::string &dir) {
    auto job = dir.rfind('/');
    auto tree = job == std::string::npos || job == 0 ? std::string::npos : dir.rfind('/', job - 1);
    if (tree == std::string::npos ||
        dir.compare(tree + 1, strlen(kOwnCgroupTree), kOwnCgroupTree) != 0 ||
        dir.compare(job + 1, 4, "job_") != 0) {
        errno = EINVAL;
        return -1;
    }
    int fd = open(dir.substr(0, tree).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (const auto &part : split(dir.substr(tree + 1), '/')) {
        if (fd < 0) return -1;
        if (mkdirat(fd, part.c_str(), 0755) != 0 && errno != EEXIST) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        int next = openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        errno = e;
        fd = next;
    }
    return fd;
}

// The container's directory below the pod's (pod_fd, pod_dir): made if
// missing, its limits written where the hierarchy has them (v2: both), pid
// moved in.
Status enter_container(int pod_fd, const std::string &pod_dir, bool memory, bool cpu, bool v2,
                       const PodCgroupSettings &s, pid_t pid) {
    auto name = container_cgroup_name(s.container);
    if (!name) return name.failure();
    if (mkdirat(pod_fd, name->c_str(), 0755) != 0 && errno != EEXIST)
        return fail(Error::Io, pod_dir + "/" + *name + ": mkdir: " + strerror(errno));
    int fd = openat(pod_fd, name->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    std::string dir = pod_dir + "/" + *name;
    if (fd < 0) return fail(Error::Io, dir + ": " + strerror(errno));
    Status st;
    if (memory && s.container_memory_limit > 0)
        st = write_at(fd, dir, v2 ? "memory.max" : "memory.limit_in_bytes",
                      std::to_string(s.container_memory_limit));
    if (st && cpu && s.container_cpu_quota_us > 0) {
        if (v2) {
            st = write_at(
                fd, dir, "cpu.max",
                std::to_string(s.container_cpu_quota_us) + " " + std::to_string(s.cpu_period_us));
        } else {
            st = write_at(fd, dir, "cpu.cfs_period_us", std::to_string(s.cpu_period_us));
            if (st)
                st =
                    write_at(fd, dir, "cpu.cfs_quota_us", std::to_string(s.container_cpu_quota_us));
        }
    }
    if (st) st = write_at(fd, dir, "cgroup.procs", std::to_string(pid));
    close(fd);
    return st;
}

// cgroup v2: the pod's directory under step_extern (p.dir), see the header.
Status enter_unified(const PodCgroupParent &p, const std::string &name,
                     const PodCgroupSettings &settings, pid_t pid) {
    auto slash = p.dir.rfind('/');
    std::string job = p.dir.substr(0, slash);
    int jfd = open(job.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (jfd < 0) return fail(Error::Io, job + ": " + strerror(errno));
    int pfd = openat(jfd, p.dir.substr(slash + 1).c_str(),
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    if (pfd < 0) {
        close(jfd);
        return fail(Error::Io, p.dir + ": " + strerror(e));
    }
    // Slurm enables cpuset, cpu and memory below the job, not pids.
    Status st = write_at(jfd, job, "cgroup.subtree_control", "+pids");
    close(jfd);
    for (const char *c : {"+cpu", "+memory", "+pids"})
        if (st) st = write_at(pfd, p.dir, "cgroup.subtree_control", c);
    if (st && settings.pods_memory_limit > 0)
        st = write_at(pfd, p.dir, "memory.max",
                      std::to_string(settings.pods_memory_limit + kShimMemoryHeadroom));
    if (st && settings.pods_cpu_quota_us > 0)
        st = write_at(pfd, p.dir, "cpu.max",
                      std::to_string(settings.pods_cpu_quota_us) + " " +
                          std::to_string(settings.cpu_period_us));
    if (st && mkdirat(pfd, name.c_str(), 0755) != 0 && errno != EEXIST)
        st = fail(Error::Io, p.dir + "/" + name + ": mkdir: " + strerror(errno));
    int fd = st ? openat(pfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    e = errno;
    close(pfd);
    if (!st) return st;
    std::string dir = p.dir + "/" + name;
    if (fd < 0) return fail(Error::Io, dir + ": " + strerror(e));
    if (settings.memory_limit > 0)
        st = write_at(fd, dir, "memory.max", std::to_string(settings.memory_limit));
    if (st && settings.cpu_quota_us > 0)
        st = write_at(
            fd, dir, "cpu.max",
            std::to_string(settings.cpu_quota_us) + " " + std::to_string(settings.cpu_period_us));
    if (st && settings.cpu_shares > 0)
        st = write_at(fd, dir, "cpu.weight",
                      std::to_string(cpu_weight_for_shares(settings.cpu_shares)));
    if (st && settings.pids_max > 0)
        st = write_at(fd, dir, "pids.max", std::to_string(settings.pids_max));
    if (st)
        st = attach_device_policy(fd, dir, gpu_policy(settings.gpus, settings.deny),
                                  "slurm_k8s_pod", false);
    // Its containers' directories get the controllers (it holds no process).
    for (const char *c : {"+cpu", "+memory", "+pids"})
        if (st) st = write_at(fd, dir, "cgroup.subtree_control", c);
    if (st) st = enter_container(fd, dir, true, true, true, settings, pid);
    close(fd);
    return st;
}

}  // namespace

Status enter_pod_cgroup(const std::vector<PodCgroupParent> &parents, std::string_view pod_uid,
                        const PodCgroupSettings &settings, pid_t pid) {
    auto name = pod_cgroup_name(pod_uid);
    if (!name) return name.failure();
    for (const auto &p : parents) {
        if (p.unified) {
            if (auto st = enter_unified(p, *name, settings, pid); !st) return st;
            continue;
        }
        int pfd = p.own ? open_own_parent(p.dir)
                        : open(p.dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (pfd < 0) return fail(Error::Io, p.dir + ": " + strerror(errno));
        // The parent's cap on all pods together, before any pod's own.
        Status cap;
        if (names_controller(p.controllers, "memory") && settings.pods_memory_limit > 0)
            cap = write_at(pfd, p.dir, "memory.limit_in_bytes",
                           std::to_string(settings.pods_memory_limit + kShimMemoryHeadroom));
        if (cap && p.own && names_controller(p.controllers, "cpu") &&
            settings.pods_cpu_quota_us > 0) {
            cap = write_at(pfd, p.dir, "cpu.cfs_period_us", std::to_string(settings.cpu_period_us));
            if (cap)
                cap = write_at(pfd, p.dir, "cpu.cfs_quota_us",
                               std::to_string(settings.pods_cpu_quota_us));
        }
        if (!cap) {
            close(pfd);
            return cap;
        }
        if (mkdirat(pfd, name->c_str(), 0755) != 0 && errno != EEXIST) {
            int e = errno;
            close(pfd);
            return fail(Error::Io, p.dir + "/" + *name + ": mkdir: " + strerror(e));
        }
        int fd = openat(pfd, name->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(pfd);
        std::string dir = p.dir + "/" + *name;
        if (fd < 0) return fail(Error::Io, dir + ": " + strerror(e));
        Status st;
        if (names_controller(p.controllers, "devices"))
            st = deny_devices_at(fd, dir, settings.deny);
        if (st && names_controller(p.controllers, "memory") && settings.memory_limit > 0)
            st = write_at(fd, dir, "memory.limit_in_bytes", std::to_string(settings.memory_limit));
        if (st && names_controller(p.controllers, "cpu") && settings.cpu_quota_us > 0) {
            st = write_at(fd, dir, "cpu.cfs_period_us", std::to_string(settings.cpu_period_us));
            if (st)
                st = write_at(fd, dir, "cpu.cfs_quota_us", std::to_string(settings.cpu_quota_us));
        }
        if (st && names_controller(p.controllers, "cpu") && settings.cpu_shares > 0)
            st = write_at(fd, dir, "cpu.shares", std::to_string(settings.cpu_shares));
        if (st && names_controller(p.controllers, "pids") && settings.pids_max > 0)
            st = write_at(fd, dir, "pids.max", std::to_string(settings.pids_max));
        if (st)
            st = enter_container(fd, dir, names_controller(p.controllers, "memory"),
                                 names_controller(p.controllers, "cpu"), false, settings, pid);
        close(fd);
        if (!st) return st;
    }
    return {};
}

std::vector<std::string> pod_cgroup_uids(const std::vector<PodCgroupParent> &parents) {
    std::vector<std::string> out;
    for (const auto &p : parents) {
        DIR *d = opendir(p.dir.c_str());
        if (!d) continue;
        while (struct dirent *e = readdir(d)) {
            std::string n = e->d_name;
            if (e->d_type != DT_DIR || n.rfind(kPrefix, 0) != 0) continue;
            std::string uid = n.substr(sizeof kPrefix - 1);
            if (std::find(out.begin(), out.end(), uid) == out.end()) out.push_back(uid);
        }
        closedir(d);
    }
    return out;
}

std::vector<std::string> remove_pod_cgroup(const std::vector<PodCgroupParent> &parents,
                                           std::string_view pod_uid) {
    std::vector<std::string> left;
    auto name = pod_cgroup_name(pod_uid);
    if (!name) return {name.message()};
    for (const auto &p : parents) {
        std::string dir = p.dir + "/" + *name;
        if (DIR *d = opendir(dir.c_str())) {  // its containers' first
            std::vector<std::string> sub;
            while (struct dirent *e = readdir(d))
                if (e->d_type == DT_DIR &&
                    strncmp(e->d_name, kContainerPrefix, sizeof kContainerPrefix - 1) == 0)
                    sub.push_back(dir + "/" + e->d_name);
            closedir(d);
            for (const auto &s : sub)
                if (rmdir(s.c_str()) != 0 && errno != ENOENT)
                    left.push_back(s + ": " + strerror(errno));
        }
        if (rmdir(dir.c_str()) != 0 && errno != ENOENT)
            left.push_back(dir + ": " + strerror(errno));
    }
    return left;
}

std::vector<std::string> remove_own_job_cgroups(const std::vector<PodCgroupParent> &parents) {
    std::vector<std::string> left;
    for (const auto &p : parents) {
        if (!p.own) continue;
        if (rmdir(p.dir.c_str()) != 0 && errno != ENOENT && errno != EBUSY && errno != ENOTEMPTY)
            left.push_back(p.dir + ": " + strerror(errno));
    }
    return left;
}

}  // namespace sk
