#include "common/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace sk {

namespace {

Failure io_error(const std::string &what, const std::string &path, int err) {
    return fail(err == ENOENT ? Error::NotFound : Error::Io,
                what + " " + path + ": " + strerror(err));
}

std::string dir_of(const std::string &path) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

void sync_dir_of(const std::string &path) noexcept {
    int dfd = open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    (void)fsync(dfd);  // the rename itself must survive a crash
    close(dfd);
}

// "<path>.tmp.<pid>.<n>": unique among the writers of this process (the
// counter) and of other processes (the pid); O_EXCL settles any collision
// left, e.g. by a writer that crashed, by trying the next name.
int create_temp(const std::string &path, mode_t mode, std::string *tmp) {
    static std::atomic<unsigned> counter{0};
    const std::string base = path + ".tmp." + std::to_string(getpid()) + ".";
    for (int attempt = 0; attempt < 100; attempt++) {
        *tmp = base + std::to_string(counter.fetch_add(1));
        int fd = open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

bool write_all(int fd, std::string_view data) {
    size_t off = 0;
    while (off < data.size()) {
        ssize_t n = write(fd, data.data() + off, data.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = EIO;
            return false;
        }
        off += static_cast<size_t>(n);
    }
    return true;
}

Failure refused(const std::string &path, const std::string &why) {
    return fail(Error::Refused, path + " refused: " + why);
}

// Checks a component opened below the trusted directory: its kind and owner.
Status check_beneath(int fd, const std::string &path, bool want_dir, uid_t owner) {
    struct stat st;
    if (fstat(fd, &st) != 0) return io_error("cannot stat", path, errno);
    if (want_dir && !S_ISDIR(st.st_mode)) return refused(path, "not a directory");
    if (!want_dir && !S_ISREG(st.st_mode)) return refused(path, "not a regular file");
    if (st.st_uid != owner)
        return refused(path, "owned by uid " + std::to_string(st.st_uid) + ", not uid " +
                                 std::to_string(owner));
    if (!want_dir && st.st_nlink != 1)
        return refused(path, "has " + std::to_string(st.st_nlink) + " hard links");
    return {};
}

// open_file_beneath and open_dir_beneath: the last component a regular file
// or a directory.
Result<int> open_beneath(const std::string &trusted_dir, const std::string &path, bool dir) {
    if (trusted_dir.empty() || path.size() <= trusted_dir.size() + 1 ||
        path.compare(0, trusted_dir.size(), trusted_dir) != 0 || path[trusted_dir.size()] != '/')
        return fail(Error::InvalidArgument, path + " is not below " + trusted_dir);
    std::vector<std::string> parts;
    size_t pos = trusted_dir.size() + 1;
    while (pos <= path.size()) {
        size_t slash = path.find('/', pos);
        if (slash == std::string::npos) slash = path.size();
        std::string part = path.substr(pos, slash - pos);
        if (part.empty() || part == "." || part == "..")
            return fail(Error::InvalidArgument, path + ": invalid component '" + part + "'");
        parts.push_back(std::move(part));
        pos = slash + 1;
    }
    int dfd = open(trusted_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return io_error("cannot open", trusted_dir, errno);
    struct stat top;
    if (fstat(dfd, &top) != 0) {
        int err = errno;
        close(dfd);
        return io_error("cannot stat", trusted_dir, err);
    }
    std::string walked = trusted_dir;
    for (size_t i = 0; i < parts.size(); i++) {
        const bool last = i + 1 == parts.size();
        walked += "/" + parts[i];
        // O_NOFOLLOW: ELOOP on a symlink (ENOTDIR with O_DIRECTORY);
        // O_DIRECTORY: ENOTDIR on anything but a directory.
        int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
                    (last && !dir ? O_NONBLOCK : O_DIRECTORY);
        int fd = openat(dfd, parts[i].c_str(), flags);
        if (fd < 0) {
            int err = errno;
            struct stat lst;
            bool link =
                err == ELOOP ||
                (err == ENOTDIR && fstatat(dfd, parts[i].c_str(), &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
                 S_ISLNK(lst.st_mode));
            close(dfd);
            if (link) return refused(walked, "a symbolic link");
            if (err == ENOTDIR) return refused(walked, "not a directory");
            return io_error("cannot open", walked, err);
        }
        close(dfd);
        if (Status st = check_beneath(fd, walked, !last || dir, top.st_uid); !st.ok()) {
            close(fd);
            return st.failure();
        }
        dfd = fd;
    }
    return dfd;
}

}  // namespace

Result<int> open_file_beneath(const std::string &trusted_dir, const std::string &path) {
    return open_beneath(trusted_dir, path, false);
}

Result<int> open_dir_beneath(const std::string &trusted_dir, const std::string &path) {
    return open_beneath(trusted_dir, path, true);
}

Status write_file_atomic(const std::string &path, std::string_view data, mode_t mode,
                         Durability durability) {
    const bool durable = durability == Durability::Durable;
    std::string tmp;
    int fd = create_temp(path, mode, &tmp);
    if (fd < 0) return io_error("cannot create", tmp, errno);
    auto undo = [&](const char *what, int err) {
        unlink(tmp.c_str());
        return io_error(what, tmp, err);
    };
    if (!write_all(fd, data)) {
        int err = errno;
        close(fd);
        return undo("cannot write", err);
    }
    if (durable && fsync(fd) != 0) {
        int err = errno;
        close(fd);
        return undo("cannot sync", err);
    }
    if (close(fd) != 0) return undo("cannot close", errno);
    if (rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        unlink(tmp.c_str());
        return io_error("cannot rename into", path, err);
    }
    if (durable) sync_dir_of(path);
    return {};
}

void sync_to_disk(const std::string &path) noexcept {
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
    sync_dir_of(path);
}

Result<std::string> read_file(const std::string &path, size_t max_bytes, Links links) {
    int fd = open(path.c_str(),
                  O_RDONLY | (links == Links::Refuse ? O_NOFOLLOW : 0) | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return io_error("cannot open", path, errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return io_error("cannot stat", path, err);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(Error::Io, path + " is not a regular file");
    }
    std::string text;
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            close(fd);
            return io_error("cannot read", path, err);
        }
        if (n == 0) break;
        if (text.size() + static_cast<size_t>(n) > max_bytes) {
            close(fd);
            return fail(Error::TooLarge,
                        path + " is larger than " + std::to_string(max_bytes) + " bytes");
        }
        text.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return text;
}

namespace {

// The writer's pid of "<name>.tmp.<pid>.<n>" (both numbers plain decimal), or 0.
pid_t temp_file_writer(std::string_view name) {
    size_t dot = name.rfind('.');
    if (dot == std::string_view::npos || dot + 1 == name.size()) return 0;
    for (char c : name.substr(dot + 1))
        if (c < '0' || c > '9') return 0;
    std::string_view head = name.substr(0, dot);
    size_t pdot = head.rfind('.');
    if (pdot == std::string_view::npos || pdot + 1 == head.size() || pdot < 4 ||
        head.substr(pdot - 4, 5) != ".tmp.")
        return 0;
    std::string_view pid = head.substr(pdot + 1);
    if (pid.size() > 9) return 0;
    pid_t v = 0;
    for (char c : pid) {
        if (c < '0' || c > '9') return 0;
        v = v * 10 + (c - '0');
    }
    return v;
}

}  // namespace

namespace {
int remove_entry(const char *path, const struct stat *, int, struct FTW *) {
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}
}  // namespace

Status remove_tree(const std::string &dir) {
    if (nftw(dir.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0 &&
        errno != ENOENT)
        return fail(Error::Io, "cannot remove " + dir + ": " + strerror(errno));
    return {};
}

size_t remove_stale_temp_files(const std::string &dir) {
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return 0;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return 0;
    }
    std::vector<std::string> stale;
    while (struct dirent *e = readdir(d)) {
        pid_t pid = temp_file_writer(e->d_name);
        if (pid <= 0 || pid == getpid()) continue;
        if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or cannot tell
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) stale.emplace_back(e->d_name);
    }
    size_t n = 0;
    for (const auto &name : stale)
        if (unlinkat(dfd, name.c_str(), 0) == 0) n++;
    closedir(d);  // closes dfd
    return n;
}

Result<std::string> clean_absolute_path(std::string_view path) {
    if (path.empty() || path[0] != '/')
        return fail(Error::InvalidArgument, "'" + std::string(path) + "' is not an absolute path");
    std::string out;
    size_t i = 0;
    while (i < path.size()) {
        size_t j = std::min(path.find('/', i), path.size());
        std::string_view part = path.substr(i, j - i);
        if (part == "..")
            return fail(Error::InvalidArgument,
                        "'" + std::string(path) + "' must not contain a '..' component");
        if (!part.empty() && part != ".") {
            out += '/';
            out += part;
        }
        i = j + 1;
    }
    return out.empty() ? std::string("/") : out;
}

bool path_within(std::string_view path, std::string_view root) {
    if (root == "/") return !path.empty() && path[0] == '/';
    return path == root || (path.size() > root.size() && path.substr(0, root.size()) == root &&
                            path[root.size()] == '/');
}

}  // namespace sk
