#include "k8s-shim/mount_ns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

namespace sk::shim {

namespace {

// A directory with more entries than this is not shadowed (one bind each).
constexpr size_t kMaxShadowEntries = 4096;
// The size of a shadow's tmpfs: new entries the container makes directly in
// a shadowed directory (its own files in a shadowed /tmp).
constexpr size_t kShadowSizeMiB = 64;

std::string sys(const std::string &what) {
    return what + ": " + strerror(errno);
}

std::string write_proc(const char *path, const std::string &text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? "" : sys(std::string("open ") + path);
    ssize_t n = write(fd, text.data(), text.size());
    int e = errno;
    close(fd);
    errno = e;
    if (n != static_cast<ssize_t>(text.size())) return sys(std::string("write ") + path);
    return "";
}

std::string parent_of(const std::string &path) {
    auto slash = path.rfind('/');
    return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

bool under(const std::string &path, const std::string &dir) {
    if (dir == "/") return true;
    return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                           path[dir.size()] == '/');
}

std::string join(const std::string &dir, const std::string &name) {
    return dir == "/" ? "/" + name : dir + "/" + name;
}

size_t depth(const std::string &path) {
    return static_cast<size_t>(std::count(path.begin(), path.end(), '/'));
}

// `dir` (a real path, no link) shows, from now on in this namespace, a
// tmpfs with an entry for each of its entries, bound to the original
// (symlinks copied), where new entries can be made. Built on `scratch`,
// then moved onto dir (the root: made the namespace's root).
std::string shadow(const std::string &dir, const std::string &scratch,
                   const std::set<std::string> &leave_out = {}) {
    struct stat was;
    if (stat(dir.c_str(), &was) != 0) return sys("stat " + dir);
    // The directory's mode (a shared /tmp stays sticky); what the container
    // writes directly into it lives in this tmpfs, counted in the job's
    // memory, and goes with the container.
    char opts[64];
    snprintf(opts, sizeof opts, "mode=%o,size=%zum", static_cast<unsigned>(was.st_mode & 07777),
             kShadowSizeMiB);
    if (mount("tmpfs", scratch.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
        return sys("mounting a tmpfs on " + scratch);
    // Unbindable while it is built: the recursive binds of dir's entries
    // leave it out where dir's tree holds scratch (the root's always does),
    // instead of copying it, with what is bound in it so far, into itself.
    if (mount(nullptr, scratch.c_str(), nullptr, MS_UNBINDABLE, nullptr) != 0)
        return sys("making the tmpfs on " + scratch + " unbindable");
    DIR *d = opendir(dir.c_str());
    if (!d) return sys("cannot list " + dir + " to make a mountPath in it");
    std::string err;
    size_t n = 0;
    while (struct dirent *e = readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == ".." || leave_out.count(name)) continue;
        if (++n > kMaxShadowEntries) {
            err = dir + " has more than " + std::to_string(kMaxShadowEntries) +
                  " entries: no mountPath is made in it";
            break;
        }
        std::string from = join(dir, name), to = scratch + "/" + name;
        struct stat st;
        if (lstat(from.c_str(), &st) != 0) continue;  // gone meanwhile
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t len = readlink(from.c_str(), target, sizeof target - 1);
            if (len < 0) continue;
            target[len] = '\0';
            if (symlink(target, to.c_str()) != 0) {
                err = sys("copying the link " + from);
                break;
            }
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            if (mkdir(to.c_str(), 0755) != 0) {
                err = sys("mkdir " + to);
                break;
            }
        } else {
            int fd = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0) {
                err = sys("creating " + to);
                break;
            }
            close(fd);
        }
        if (mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
            err = sys("binding " + from + " into the view of " + dir);
            break;
        }
    }
    closedir(d);
    if (!err.empty()) return err;
    // In place, it is bindable again: a later shadow of a directory above
    // it binds it (with what it holds) like any other entry.
    if (dir != "/") {
        if (mount(scratch.c_str(), dir.c_str(), nullptr, MS_MOVE, nullptr) != 0)
            return sys("moving the view of " + dir + " in place");
        if (mount(nullptr, dir.c_str(), nullptr, MS_PRIVATE, nullptr) != 0)
            return sys("making the view of " + dir + " bindable");
        return "";
    }
    // The root: the tmpfs becomes the namespace's root, the old one is
    // detached (what a process joining the namespace later starts from).
    // A node whose root is the initial ramfs (a diskless node that never
    // switched root) refuses pivot_root (EINVAL): there the view is moved
    // over / and the process chroots into it, as switch_root does; those
    // that join later chroot to the container's root too
    // (join_container_mounts).
    if (chdir(scratch.c_str()) != 0) return sys("chdir " + scratch);
    if (syscall(SYS_pivot_root, ".", ".") == 0) {
        if (umount2(".", MNT_DETACH) != 0) return sys("detaching the old root");
    } else if (errno != EINVAL) {
        return sys("pivot_root into the view of /");
    } else if (mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) {
        return sys("moving the view of / in place (pivot_root refused)");
    } else if (chroot(".") != 0) {
        return sys("chroot into the view of /");
    }
    if (chdir("/") != 0) return sys("chdir /");
    if (mount(nullptr, "/", nullptr, MS_PRIVATE, nullptr) != 0)
        return sys("making the view of / bindable");
    return "";
}

// What the container may make entries in: the directories it shadowed
// (their tmpfs: entries directly in them, not in what is bound there) and
// its volumes (anywhere in them: the pod's own directories).
struct Writable {
    std::vector<std::string> shadows, volumes;
    bool holds(const std::string &dir) const {
        return std::find(shadows.begin(), shadows.end(), dir) != shadows.end() ||
               std::any_of(volumes.begin(), volumes.end(),
                           [&](const std::string &v) { return under(dir, v); });
    }
};

// Makes `target` (missing) as a directory or an empty file: its missing
// parents and itself in a tmpfs or a volume of the container's (`own`),
// shadowing the deepest existing directory first when it is the node's.
std::string make_target(const std::string &target, bool dir, const std::string &scratch,
                        Writable *own) {
    std::string base = parent_of(target);
    struct stat st;
    while (stat(base.c_str(), &st) != 0) {
        if (errno != ENOENT) return sys("mountPath " + target + ": " + base);
        base = parent_of(base);
    }
    if (!S_ISDIR(st.st_mode)) return "mountPath " + target + ": " + base + " is not a directory";
    char *real = realpath(base.c_str(), nullptr);
    if (!real) return sys("mountPath " + target + ": resolving " + base);
    std::string anchor = real;
    free(real);
    bool mine = own->holds(anchor);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!mine) {
            if (auto err = shadow(anchor, scratch); !err.empty()) return err;
            own->shadows.push_back(anchor);
        }
        // Each missing component below base, the last one as asked.
        std::string err;
        for (size_t at = base == "/" ? 1 : base.size() + 1; at <= target.size();) {
            size_t end = std::min(target.find('/', at), target.size());
            std::string path = target.substr(0, end);
            bool last = end == target.size();
            if (!last || dir) {
                if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) err = sys("mkdir " + path);
            } else {
                int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                if (fd < 0)
                    err = sys("creating " + path);
                else
                    close(fd);
            }
            if (!err.empty()) break;
            at = end + 1;
        }
        if (err.empty()) return "";
        if (!mine) return "mountPath " + target + ": " + err;
        mine = false;  // a read-only volume of ours: shadow it too
    }
    return "mountPath " + target + ": cannot be made";
}

std::string remount_read_only(const std::string &target) {
    struct statvfs sv;
    if (statvfs(target.c_str(), &sv) != 0) return sys("statvfs " + target);
    // A remount must keep the flags the kernel locked on what it came from.
    unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
    if (sv.f_flag & ST_NOSUID) flags |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV) flags |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
    if (mount(nullptr, target.c_str(), nullptr, flags, nullptr) != 0)
        return sys("making mountPath " + target + " read-only");
    return "";
}

// The pid's parent, from /proc/PID/stat (after the command's last ')').
pid_t parent_pid(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    // ") S PPID ...": the state, then the parent.
    char *p = strrchr(buf, ')');
    if (!p || strlen(p) < 5 || p[1] != ' ' || p[3] != ' ') return -1;
    char *end = nullptr;
    long ppid = strtol(p + 4, &end, 10);
    if (end == p + 4 || *end != ' ') return -1;
    return static_cast<pid_t>(ppid);
}

std::string ns_of(pid_t pid, const char *ns) {
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/%d/ns/%s", static_cast<int>(pid), ns);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n < 0) return "";
    return std::string(link, static_cast<size_t>(n));
}

}  // namespace

std::string enter_own_mounts(const std::vector<BindMount> &binds,
                             const std::vector<std::string> &hidden, const std::string &scratch) {
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        return sys(
            "a container with volumeMounts runs in user and mount namespaces of its own, and "
            "this node refuses them to the job's user (docs/admin-guide.md, \"User "
            "namespaces\"); unshare");
    if (auto err = write_proc("/proc/self/setgroups", "deny\n"); !err.empty()) return err;
    if (auto err = write_proc("/proc/self/uid_map",
                              std::to_string(uid) + " " + std::to_string(uid) + " 1\n");
        !err.empty())
        return err;
    if (auto err = write_proc("/proc/self/gid_map",
                              std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
        !err.empty())
        return err;
    // Slaves: nothing done here propagates back to the node, while what the
    // node mounts later (an automounted home or project directory) still
    // shows here, in the binds of the shadows too (a bind of a slave is a
    // slave of the same master). The first mount also shows whether the
    // namespace is any use (a security module may leave a user namespace
    // without the capabilities it should give).
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
        return sys(
            "a container with volumeMounts mounts them in a user namespace of its own, and "
            "this node gives it no rights there (docs/admin-guide.md, \"User namespaces\"); "
            "making its mounts private");
    char *real = realpath(scratch.c_str(), nullptr);
    if (!real) return sys("scratch directory " + scratch);
    std::string scr = real;
    free(real);
    Writable own;
    std::map<std::string, std::set<std::string>> hide;  // directory -> names left out
    for (const auto &h : hidden)
        if (!h.empty() && h[0] == '/' && h != "/")
            hide[parent_of(h)].insert(h.substr(h.rfind('/') + 1));
    for (const auto &[dir, names] : hide) {
        char *rp = realpath(dir.c_str(), nullptr);
        if (!rp) continue;  // no such directory: nothing to hide
        std::string d = rp;
        free(rp);
        if (auto err = shadow(d, scr, names); !err.empty())
            return "hiding the node's other GPUs: " + err;
        own.shadows.push_back(d);
    }
    std::vector<BindMount> order = binds;
    std::stable_sort(order.begin(), order.end(), [](const BindMount &a, const BindMount &b) {
        return depth(a.target) < depth(b.target);
    });
    for (const auto &b : order) {
        struct stat src;
        if (stat(b.source.c_str(), &src) != 0) return sys("volume path " + b.source);
        bool dir = S_ISDIR(src.st_mode);
        struct stat st;
        if (stat(b.target.c_str(), &st) == 0) {
            if (S_ISDIR(st.st_mode) != dir)
                return "mountPath " + b.target + " is " +
                       (dir ? "not a directory, and the volume is one"
                            : "a directory, and the volume path is a file");
        } else if (errno != ENOENT) {
            return sys("mountPath " + b.target);
        } else if (auto err = make_target(b.target, dir, scr, &own); !err.empty()) {
            return err;
        }
        if (mount(b.source.c_str(), b.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
            return sys("binding volume path " + b.source + " at mountPath " + b.target);
        if (b.read_only)
            if (auto err = remount_read_only(b.target); !err.empty()) return err;
        if (dir) own.volumes.push_back(b.target);
    }
    return "";
}

namespace {

// The supervisor's children: its children file (one read, where the kernel
// has CONFIG_PROC_CHILDREN), else a scan of /proc for that parent.
std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", static_cast<int>(parent),
             static_cast<int>(parent));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n >= 0) {
            buf[n] = '\0';
            for (char *p = buf, *end = nullptr;; p = end) {
                long pid = strtol(p, &end, 10);
                if (end == p) break;
                if (pid > 0) out.push_back(static_cast<pid_t>(pid));
            }
            return out;
        }
    }
    DIR *d = opendir("/proc");
    if (!d) return out;
    while (struct dirent *e = readdir(d)) {
        char *end = nullptr;
        long pid = strtol(e->d_name, &end, 10);
        if (pid > 0 && *end == '\0' && parent_pid(static_cast<pid_t>(pid)) == parent)
            out.push_back(static_cast<pid_t>(pid));
    }
    closedir(d);
    return out;
}

}  // namespace

std::string join_container_mounts(pid_t supervisor) {
    std::string mine = ns_of(getpid(), "user");
    pid_t main = 0;
    for (pid_t pid : children_of(supervisor)) {
        std::string theirs = ns_of(pid, "user");
        if (!theirs.empty() && theirs != mine) {
            main = pid;
            break;
        }
    }
    if (main == 0) return "the container's main process is gone: its mounts cannot be joined";
    std::string base = "/proc/" + std::to_string(main);
    int user = open((base + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
    int mnt = open((base + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC);
    int root = open((base + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    std::string err;
    if (user < 0 || mnt < 0 || root < 0)
        err = sys("opening the namespaces of the container's process " + std::to_string(main));
    else if (setns(user, CLONE_NEWUSER) != 0)
        err = sys("joining the container's user namespace");
    else if (setns(mnt, CLONE_NEWNS) != 0)
        err = sys("joining the container's mount namespace");
    else if (fchdir(root) != 0 || chroot(".") != 0)
        err = sys("entering the container's root directory");
    for (int fd : {user, mnt, root})
        if (fd >= 0) close(fd);
    return err;
}

}  // namespace sk::shim
