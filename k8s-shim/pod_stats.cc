#include "k8s-shim/pod_stats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <set>
#include <utility>

#include "common/fs.h"
#include "common/cgroup/pod_cgroup.h"
#include "common/procfs.h"
#include "common/strings.h"

namespace sk::shim {

bool parse_proc_usage(std::string_view text, ProcUsage *out) {
    auto paren = text.rfind(')');
    if (paren == std::string_view::npos || paren + 1 >= text.size() || text[paren + 1] != ' ')
        return false;
    auto fields = split(trim(text.substr(paren + 2)), ' ');
    // fields[0] is field 3 (the state).
    auto at = [&fields](size_t field) -> std::optional<uint64_t> {
        return field - 3 < fields.size() ? to_uint(fields[field - 3]) : std::nullopt;
    };
    auto ppid = at(4), ut = at(14), st = at(15), cut = at(16), cst = at(17), rss = at(24);
    if (!ppid || *ppid > INT32_MAX || !ut || !st || !cut || !cst || !rss) return false;
    auto open = text.find('(');
    std::string comm(open != std::string_view::npos && open < paren
                         ? text.substr(open + 1, std::min<size_t>(paren - open - 1, 64))
                         : std::string_view());
    *out = ProcUsage{static_cast<int>(*ppid), *ut, *st, *cut, *cst, *rss, std::move(comm)};
    return true;
}

ProcessTable read_process_table(size_t max_procs) {
    ProcessTable t;
    DIR *d = opendir("/proc");
    if (!d) return t;
    while (struct dirent *e = readdir(d)) {
        if (t.size() >= max_procs) break;
        auto pid = parse_uint(e->d_name, "pid", INT32_MAX);
        if (!pid || *pid == 0) continue;
        // A stat line is a few hundred bytes.
        auto text = read_proc_file(static_cast<int>(*pid), "stat", 4096);
        ProcUsage u;
        if (text && parse_proc_usage(*text, &u)) t[static_cast<int>(*pid)] = u;
    }
    closedir(d);
    return t;
}

TreeUsage tree_usage(const ProcessTable &table, int root) {
    TreeUsage out;
    for (int pid : tree_pids(table, root)) {
        const ProcUsage &u = table.at(pid);
        out.cpu_ticks += u.utime + u.stime + u.cutime + u.cstime;
        out.rss_pages += u.rss_pages;
        out.processes++;
    }
    return out;
}

TreeUsage image_container_usage(const ProcessTable &table, int root) {
    TreeUsage out;
    if (root <= 0) return out;
    for (const auto &[pid, u] : table) {
        if (u.ppid != root || u.comm != "conmon") continue;
        for (const auto &[child, cu] : table) {
            if (cu.ppid != pid || child == pid) continue;
            TreeUsage t = tree_usage(table, child);
            out.cpu_ticks += t.cpu_ticks;
            out.rss_pages += t.rss_pages;
            out.processes += t.processes;
        }
    }
    return out;
}

std::vector<int> tree_pids(const ProcessTable &table, int root) {
    std::vector<int> out;
    if (root <= 0 || !table.count(root)) return out;
    std::map<int, std::vector<int>> children;
    for (const auto &[pid, u] : table)
        if (pid != root) children[u.ppid].push_back(pid);
    // Breadth first from root; the table is a snapshot, so a pid is seen once
    // (a parent link cannot loop: each pid has one parent, and root's own is
    // not followed).
    std::deque<int> todo{root};
    while (!todo.empty() && out.size() < table.size()) {
        int pid = todo.front();
        todo.pop_front();
        out.push_back(pid);
        if (auto it = children.find(pid); it != children.end())
            for (int c : it->second)
                todo.push_back(c);
    }
    return out;
}

uint64_t ticks_to_ns(uint64_t ticks) {
    static const long hz = sysconf(_SC_CLK_TCK);
    uint64_t per = hz > 0 ? 1000000000ULL / static_cast<uint64_t>(hz) : 10000000ULL;
    return ticks * per;
}

uint64_t pages_to_bytes(uint64_t pages) {
    static const long size = sysconf(_SC_PAGESIZE);
    return pages * static_cast<uint64_t>(size > 0 ? size : 4096);
}

namespace {

// One dir_disk_use() walk: its bounds, the inodes counted, the figures.
class DiskWalk {
  public:
    DiskWalk(DiskWalkLimits limits, dev_t dev, DirDiskUse *out)
        : limits_(limits), dev_(dev), out_(out) {}

    // Takes `fd` (a directory at `depth` below the walk's root); `child` is
    // the root's entry it belongs to (null for the root itself).
    void walk(int fd, int depth, proto::DiskUse *child) {
        DIR *d = fdopendir(fd);
        if (!d) {
            close(fd);
            return;
        }
        while (!out_->capped) {
            struct dirent *e = readdir(d);
            if (!e) break;
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            if (out_->entries >= limits_.max_entries) {
                out_->capped = true;
                break;
            }
            out_->entries++;
            struct stat st;
            if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
            proto::DiskUse *mine = child ? child : &out_->by_child[e->d_name];
            count(st, mine);
            if (!S_ISDIR(st.st_mode) || st.st_dev != dev_) continue;
            if (depth + 1 > limits_.max_depth) {
                out_->capped = true;
                break;
            }
            // Swapped for a symlink since the fstatat: ELOOP/ENOTDIR, skipped.
            int sub = openat(dirfd(d), e->d_name,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
            if (sub >= 0) walk(sub, depth + 1, mine);
        }
        closedir(d);
    }

    void count(const struct stat &st, proto::DiskUse *child) {
        if (st.st_nlink > 1 && !S_ISDIR(st.st_mode) && !seen_.insert({st.st_dev, st.st_ino}).second)
            return;
        uint64_t bytes = static_cast<uint64_t>(st.st_blocks) * 512;
        out_->total.bytes += bytes;
        out_->total.inodes++;
        if (child) {
            child->bytes += bytes;
            child->inodes++;
        }
    }

  private:
    DiskWalkLimits limits_;
    dev_t dev_;
    DirDiskUse *out_;
    std::set<std::pair<dev_t, ino_t>> seen_;  // inodes with several links, once each
};

}  // namespace

Result<DirDiskUse> dir_disk_use(const std::string &dir, DiskWalkLimits limits) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int err = errno;
        return fail(err == ENOENT ? Error::NotFound : Error::Io,
                    dir + ": " + std::string(strerror(err)));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return fail(Error::Io, dir + ": fstat: " + std::string(strerror(err)));
    }
    DirDiskUse out;
    DiskWalk w(limits, st.st_dev, &out);
    w.count(st, nullptr);
    w.walk(fd, 0, nullptr);
    return out;
}

}  // namespace sk::shim
