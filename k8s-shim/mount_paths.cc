#include "k8s-shim/mount_paths.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>

#include <json/json.h>

#include "common/fs.h"
#include "common/json.h"

namespace sk::shim {

namespace {

constexpr int kMaxSymlinks = 8;              // followed in one walk (the kernel allows 40)
constexpr size_t kMaxRecordBytes = 4 << 20;  // kMaxVolumes mounts of 4 KiB paths, with room

class Fd {
  public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    Fd(Fd &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Fd &operator=(Fd &&o) noexcept {
        std::swap(fd_, o.fd_);
        return *this;
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() {
        if (fd_ >= 0) close(fd_);
    }
    int get() const { return fd_; }

  private:
    int fd_;
};

Failure refused(const std::string &msg) {
    return fail(Error::Refused, msg);
}

Failure io(const std::string &what) {
    return fail(Error::Io, what + ": " + strerror(errno));
}

std::vector<std::string> components(const std::string &path) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < path.size()) {
        size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        std::string c = path.substr(i, j - i);
        if (!c.empty() && c != ".") out.push_back(std::move(c));
        i = j + 1;
    }
    return out;
}

std::string join(const std::string &dir, const std::string &name) {
    return (dir == "/" ? "" : dir) + "/" + name;
}

const char *kind_of(mode_t m) {
    if (S_ISLNK(m)) return "a symlink";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISREG(m)) return "a file";
    return "a special file";
}

// Whether `st` (of `path`) may be on the way: see k8s-shim/mount_paths.h.
Status check_entry(const struct stat &st, const std::string &path, uid_t uid) {
    if (st.st_uid != 0 && st.st_uid != uid)
        return refused(path + " is " + kind_of(st.st_mode) + " of uid " +
                       std::to_string(st.st_uid) + ", neither the job's user nor root");
    if (S_ISDIR(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        char mode[8];
        snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return refused(path + " is a directory other users can write to (mode " + mode +
                       ", not sticky)");
    }
    return {};
}

// What was made, in order; saved before each creation and after it.
class Record {
  public:
    explicit Record(std::string path) : path_(std::move(path)) {}

    Status intend(const std::string &kind, const std::string &path, const std::string &target) {
        Json::Value e(Json::objectValue);
        e["kind"] = kind;
        e["path"] = path;
        if (!target.empty()) e["target"] = target;
        entries_.append(e);
        return save();
    }
    Status made(int dirfd, const std::string &name) {
        struct stat st;
        if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
            return io("stat " + last()["path"].asString());
        last()["dev"] = Json::UInt64(st.st_dev);
        last()["ino"] = Json::UInt64(st.st_ino);
        return save();
    }
    Status drop_last() {
        entries_.removeIndex(entries_.size() - 1, nullptr);
        return save();
    }
    bool empty() const { return entries_.empty(); }

  private:
    Json::Value &last() { return entries_[entries_.size() - 1]; }
    Status save() {
        Json::Value v(Json::objectValue);
        v["entries"] = entries_;
        return write_file_atomic(path_, json::write(v), 0600, Durability::Cached);
    }

    std::string path_;
    Json::Value entries_{Json::arrayValue};
};

struct Dir {
    Fd fd;
    std::string path;  // absolute, without symlinks
};

// Opens the directory `path` names, from "/", one component at a time
// (O_PATH | O_NOFOLLOW), checking each with check_entry(). With a record,
// symlinks that pass are followed and missing directories are made (and
// recorded); without one (removal: recorded paths have no symlinks) a
// symlink is refused and nothing is made. Error::NotFound: a component is
// missing and cannot be made (or searched) by the job's user, only by root.
Result<Dir> open_dir(const std::string &path, uid_t uid, Record *rec) {
    auto root = [&]() -> Result<Dir> {
        Fd fd(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
        struct stat st;
        if (fd.get() < 0 || fstat(fd.get(), &st) != 0) return io("open /");
        if (auto s = check_entry(st, "/", uid); !s) return s.failure();
        return Dir{std::move(fd), "/"};
    };
    auto start = root();
    if (!start) return start;
    Dir cur = std::move(*start);
    auto names = components(path);
    std::deque<std::string> todo(names.begin(), names.end());
    int links = 0, retries = 0;
    while (!todo.empty()) {
        std::string name = todo.front();
        todo.pop_front();
        if (name == "..") return refused(join(cur.path, name) + ": '..' is not allowed");
        std::string here = join(cur.path, name);
        Fd fd(openat(cur.fd.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
        if (fd.get() < 0 && errno == ENOENT && rec) {
            if (auto s = rec->intend("dir", here, ""); !s) return s.failure();
            if (mkdirat(cur.fd.get(), name.c_str(), 0700) != 0) {
                int err = errno;
                if (auto s = rec->drop_last(); !s) return s.failure();
                errno = err;
                if (err == EEXIST && retries++ < 1) {  // made in between: check it as any other
                    todo.push_front(name);
                    continue;
                }
                if (err == EACCES || err == EPERM || err == EROFS)
                    return fail(Error::NotFound,
                                here + " does not exist and only root can make it");
                return io("mkdir " + here);
            }
            if (auto s = rec->made(cur.fd.get(), name); !s) return s.failure();
            fd = Fd(openat(cur.fd.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
        }
        if (fd.get() < 0) {
            if (errno == ENOENT || errno == EACCES)
                return fail(Error::NotFound, here + " does not exist or cannot be searched");
            return io("open " + here);
        }
        struct stat st;
        if (fstat(fd.get(), &st) != 0) return io("stat " + here);
        if (auto s = check_entry(st, here, uid); !s) return s.failure();
        if (S_ISLNK(st.st_mode)) {
            if (!rec) return refused(here + " is a symlink");
            if (++links > kMaxSymlinks)
                return refused(here + ": more than " + std::to_string(kMaxSymlinks) +
                               " symlinks on the way");
            char buf[4096];
            ssize_t n = readlinkat(fd.get(), "", buf, sizeof buf);
            if (n < 0) return io("readlink " + here);
            if (static_cast<size_t>(n) >= sizeof buf) return refused(here + ": symlink too long");
            std::string target(buf, static_cast<size_t>(n));
            auto parts = components(target);
            if (std::find(parts.begin(), parts.end(), "..") != parts.end())
                return refused(here + " is a symlink to " + target + ", which has '..'");
            todo.insert(todo.begin(), parts.begin(), parts.end());
            if (!target.empty() && target[0] == '/') {
                auto r = root();
                if (!r) return r;
                cur = std::move(*r);
            }
            continue;
        }
        if (!S_ISDIR(st.st_mode)) return refused(here + " is " + kind_of(st.st_mode));
        cur = Dir{std::move(fd), here};
    }
    return cur;
}

std::pair<std::string, std::string> split_last(const std::string &path) {
    auto slash = path.rfind('/');
    return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// One link; Error::NotFound: only root could make it.
Status make_link(const MountLink &l, uid_t uid, Record *rec) {
    auto [parent, name] = split_last(l.mount_path);
    auto dir = open_dir(parent, uid, rec);
    if (!dir) return dir.failure();
    std::string here = join(dir->path, name);
    if (auto s = rec->intend("link", here, l.target); !s) return s;
    if (symlinkat(l.target.c_str(), dir->fd.get(), name.c_str()) != 0) {
        int err = errno;
        if (auto s = rec->drop_last(); !s) return s;
        if (err == EEXIST) {
            struct stat st;
            std::string what = "something";
            if (fstatat(dir->fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
                what = std::string(kind_of(st.st_mode)) + " of uid " + std::to_string(st.st_uid);
            return refused(here + " already exists (" + what +
                           "); a volume is placed only at a path that does not exist yet");
        }
        if (err == EACCES || err == EPERM || err == EROFS)
            return fail(Error::NotFound, here + ": only root can make it");
        errno = err;
        return io("symlink " + here);
    }
    return rec->made(dir->fd.get(), name);
}

}  // namespace

std::string mount_record(const std::string &pod_dir) {
    return pod_dir + "/mounts.json";
}

Result<MountOutcome> make_mount_links(const std::vector<MountLink> &links, uid_t uid,
                                      const std::string &record_path) {
    (void)remove_mount_links(record_path, uid);  // a crashed predecessor's, if any
    MountOutcome out;
    if (links.empty()) return out;
    // Parents first: a mountPath inside another one's volume goes in that volume.
    std::vector<MountLink> sorted(links);
    std::sort(sorted.begin(), sorted.end(),
              [](const MountLink &a, const MountLink &b) { return a.mount_path < b.mount_path; });
    Record rec(record_path);
    for (const auto &l : sorted) {
        auto st = make_link(l, uid, &rec);
        if (st) continue;
        if (st.error() == Error::NotFound) {
            out.skipped.push_back(l.mount_path);
            continue;
        }
        (void)remove_mount_links(record_path, uid);
        return fail(st.error(), "mountPath " + l.mount_path + ": " + st.message());
    }
    if (rec.empty()) unlink(record_path.c_str());
    return out;
}

Status remove_mount_links(const std::string &record_path, uid_t uid) {
    auto text = read_file(record_path, kMaxRecordBytes);
    if (!text) return text.error() == Error::NotFound ? Status{} : text.failure();
    auto v = json::parse(*text);
    std::vector<std::string> left;
    const Json::Value &entries = v && (*v)["entries"].isArray() ? (*v)["entries"] : Json::Value();
    for (Json::ArrayIndex i = entries.size(); i-- > 0;) {
        const Json::Value &e = entries[i];
        std::string path = e["path"].isString() ? e["path"].asString() : "";
        std::string kind = e["kind"].isString() ? e["kind"].asString() : "";
        if (path.size() < 2 || path[0] != '/') continue;
        auto [parent, name] = split_last(path);
        auto dir = open_dir(parent, uid, nullptr);
        if (!dir) {
            if (dir.error() != Error::NotFound) left.push_back(path + " (" + dir.message() + ")");
            continue;
        }
        struct stat st;
        if (fstatat(dir->fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT) left.push_back(path + " (" + strerror(errno) + ")");
            continue;
        }
        bool same_inode = e["ino"].isUInt64() && e["dev"].isUInt64() &&
                          e["ino"].asUInt64() == st.st_ino && e["dev"].asUInt64() == st.st_dev;
        bool ours = st.st_uid == uid;
        if (kind == "link" && ours && S_ISLNK(st.st_mode)) {
            char buf[4096];
            ssize_t n = readlinkat(dir->fd.get(), name.c_str(), buf, sizeof buf);
            ours = n >= 0 && e["target"].isString() &&
                   std::string(buf, static_cast<size_t>(n)) == e["target"].asString();
            if (ours && unlinkat(dir->fd.get(), name.c_str(), 0) != 0 && errno != ENOENT)
                left.push_back(path + " (" + strerror(errno) + ")");
        } else if (kind == "dir" && ours && same_inode && S_ISDIR(st.st_mode)) {
            if (unlinkat(dir->fd.get(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
                left.push_back(path + " (" + strerror(errno) + ")");
        } else {
            ours = false;
        }
        if (!ours) left.push_back(path + " (not as the shim made it)");
    }
    if (unlink(record_path.c_str()) != 0 && errno != ENOENT) return io("unlink " + record_path);
    if (!left.empty()) {
        std::string msg = "left in place:";
        for (const auto &l : left)
            msg += " " + l;
        return fail(Error::Io, msg);
    }
    return {};
}

}  // namespace sk::shim
