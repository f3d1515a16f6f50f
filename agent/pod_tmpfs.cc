#include "agent/pod_tmpfs.h"

#include "agent/core/shared_mount.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/fs.h"
#include "common/log.h"
#include "common/procfs.h"
#include "common/strings.h"

namespace sk::agent {
namespace {

constexpr const char *kSourcePrefix = "slurm-k8s:";

// A descriptor that closes itself.
struct Fd {
    int fd = -1;
    explicit Fd(int f = -1) : fd(f) {}
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    Fd(Fd &&o) noexcept : fd(o.fd) { o.fd = -1; }
    Fd &operator=(Fd &&o) noexcept {
        if (this != &o) {
            if (fd >= 0) close(fd);
            fd = o.fd;
            o.fd = -1;
        }
        return *this;
    }
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

int open_beneath(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
    open_how how{};
    how.flags = flags | O_CLOEXEC;
    how.resolve = resolve;
    return static_cast<int>(syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

constexpr uint64_t kBeneath =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

Failure sys_fail(const std::string &what) {
    return fail(Error::Io, what + ": " + strerror(errno));
}

// The directory `name` in `parent` (made, the user's, when missing): a
// directory reached without a link, on the same file system.
Result<Fd> subdir(const Fd &parent, const std::string &name, uint32_t uid, uint32_t gid,
                  const std::string &where) {
    if (mkdirat(parent.fd, name.c_str(), 0750) == 0) {
        if (fchownat(parent.fd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
            return sys_fail("chown " + where);
    } else if (errno != EEXIST) {
        return sys_fail("mkdir " + where);
    }
    Fd d(open_beneath(parent.fd, name.c_str(), O_PATH | O_DIRECTORY, kBeneath));
    if (d.fd < 0) return sys_fail("open " + where + " (it must be a directory, not a link)");
    struct stat st;
    if (fstat(d.fd, &st) != 0) return sys_fail("stat " + where);
    if (st.st_uid != uid && st.st_uid != 0)
        return fail(Error::Refused, where + " belongs to uid " + std::to_string(st.st_uid) +
                                        ", not to the job's user");
    return d;
}

// The mount id of a descriptor (/proc/self/fdinfo: "mnt_id:").
int mount_id_of(int fd) {
    auto info = read_file("/proc/self/fdinfo/" + std::to_string(fd), 4096);
    if (!info) return -1;
    for (const auto &line : split(*info, '\n'))
        if (line.rfind("mnt_id:", 0) == 0) {
            auto id = parse_uint(trim(std::string_view(line).substr(7)), "mnt_id", INT32_MAX);
            return id ? static_cast<int>(*id) : -1;
        }
    return -1;
}

bool mounted_here(const std::string &source, const Fd &dir) {
    int id = mount_id_of(dir.fd);
    auto text = read_file("/proc/self/mountinfo", size_t{16} << 20);
    if (!text || id < 0) return false;
    for (const auto &m : parse_mountinfo(*text))
        if (m.id == id && m.source == source && m.fstype == "tmpfs") return true;
    return false;
}

}  // namespace

std::string tmpfs_source(const std::string &job_tag, const std::string &pod_uid) {
    return kSourcePrefix + job_tag + ":" + pod_uid;
}

Status TmpfsMounts::mount_memory(const MemoryVolume &v) {
    const std::string where = v.job_dir + "/pods/" + v.pod_uid + "/volumes/" + v.volume;
    Fd job(open(v.job_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (job.fd < 0) return sys_fail("open " + v.job_dir);
    Fd cur = std::move(job);
    std::string path = v.job_dir;
    for (const std::string &part :
         {std::string("pods"), v.pod_uid, std::string("volumes"), v.volume}) {
        path += "/" + part;
        auto next = subdir(cur, part, v.uid, v.gid, path);
        if (!next) return next.failure();
        cur = std::move(*next);
    }
    std::string source = tmpfs_source(v.job_tag, v.pod_uid);
    if (mounted_here(source, cur)) return {};  // a restart of the agent, a retried start
    Fd fs(fsopen("tmpfs", FSOPEN_CLOEXEC));
    if (fs.fd < 0) return sys_fail("fsopen tmpfs for " + where);
    std::string size = std::to_string(v.size_bytes), uid = std::to_string(v.uid),
                gid = std::to_string(v.gid);
    if (fsconfig(fs.fd, FSCONFIG_SET_STRING, "source", source.c_str(), 0) != 0 ||
        fsconfig(fs.fd, FSCONFIG_SET_STRING, "size", size.c_str(), 0) != 0 ||
        fsconfig(fs.fd, FSCONFIG_SET_STRING, "mode", "0770", 0) != 0 ||
        fsconfig(fs.fd, FSCONFIG_SET_STRING, "uid", uid.c_str(), 0) != 0 ||
        fsconfig(fs.fd, FSCONFIG_SET_STRING, "gid", gid.c_str(), 0) != 0 ||
        fsconfig(fs.fd, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
        return sys_fail("tmpfs of " + size + " bytes for " + where);
    Fd mnt(fsmount(fs.fd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
    if (mnt.fd < 0) return sys_fail("fsmount for " + where);
    if (move_mount(mnt.fd, "", cur.fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
        return sys_fail("mount the tmpfs at " + where);
    LOG_INFO("tmpfs of %s bytes at %s (%s)", size.c_str(), where.c_str(), source.c_str());
    return {};
}

size_t TmpfsMounts::unmount(const std::string &job_tag, const std::string &pod_uid) {
    auto text = read_file("/proc/self/mountinfo", size_t{16} << 20);
    if (!text) {
        LOG_WARN("cannot read /proc/self/mountinfo: %s", text.message().c_str());
        return 0;
    }
    std::string want = pod_uid.empty() ? std::string(kSourcePrefix) + job_tag + ":"
                                       : tmpfs_source(job_tag, pod_uid);
    size_t n = 0;
    // Innermost first (a later line mounts over or below an earlier one).
    auto mounts = parse_mountinfo(*text);
    for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) {
        const MountInfo &m = *it;
        if (m.fstype != "tmpfs" ||
            (pod_uid.empty() ? m.source.rfind(want, 0) != 0 : m.source != want))
            continue;
        // The path is the user's to change: the descriptor, reached without
        // a link, must be that very mount.
        Fd at(open_beneath(AT_FDCWD, m.mount_point.c_str(), O_PATH | O_DIRECTORY,
                           RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS));
        if (at.fd < 0 || mount_id_of(at.fd) != m.id) {
            LOG_WARN("tmpfs %s at %s: not reached as mounted (%s); left mounted", m.source.c_str(),
                     m.mount_point.c_str(), at.fd < 0 ? strerror(errno) : "another mount there");
            continue;
        }
        std::string proc = "/proc/self/fd/" + std::to_string(at.fd);
        if (umount2(proc.c_str(), MNT_DETACH) != 0) {
            LOG_WARN("cannot unmount the tmpfs at %s: %s", m.mount_point.c_str(), strerror(errno));
            continue;
        }
        LOG_VERBOSE("unmounted the tmpfs at %s (%s)", m.mount_point.c_str(), m.source.c_str());
        n++;
    }
    return n;
}

Status share_job_dir(const std::string &dir) {
    // `dir` is the agent's own entry of the root-owned shim_state_dir: the
    // job's user owns the directory, not its name.
    return share_dir(dir);
}

void unshare_job_dir(const std::string &dir) {
    if (is_mount_point(dir) && umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0)
        LOG_WARN("cannot unmount %s: %s", dir.c_str(), strerror(errno));
}

}  // namespace sk::agent
