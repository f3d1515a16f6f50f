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
#include "common/pod_cgroup.h"
#include "common/procfs.h"
#include "common/strings.h"

namespace sk::shim {

namespace {

// Cgroup files are a line or a few dozen; the bound only refuses nonsense.
constexpr size_t kMaxCgroupFileBytes = size_t{64} * 1024;

std::optional<uint64_t> number(std::string_view s) {
    auto n = parse_uint(s, "value");
    if (!n) return std::nullopt;
    return *n;
}

}  // namespace

bool parse_proc_usage(std::string_view text, ProcUsage *out) {
    auto paren = text.rfind(')');
    if (paren == std::string_view::npos || paren + 1 >= text.size() || text[paren + 1] != ' ')
        return false;
    auto fields = split(trim(text.substr(paren + 2)), ' ');
    // fields[0] is field 3 (the state).
    auto at = [&fields](size_t field) -> std::optional<uint64_t> {
        return field - 3 < fields.size() ? number(fields[field - 3]) : std::nullopt;
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

std::optional<uint64_t> flat_keyed_value(std::string_view text, std::string_view key) {
    for (const auto &line : split(text, '\n')) {
        auto sp = line.find(' ');
        if (sp == std::string::npos || std::string_view(line).substr(0, sp) != key) continue;
        return number(trim(std::string_view(line).substr(sp + 1)));
    }
    return std::nullopt;
}

std::optional<uint64_t> single_value(std::string_view text) {
    return number(trim(text));
}

JobCgroupFiles job_cgroup_files(const std::vector<CgroupLine> &job_lines, const std::string &root) {
    JobCgroupFiles f;
    for (const auto &l : job_lines) {
        if (l.controllers.empty()) {  // the unified hierarchy (kept only on a pure v2 host)
            f.v2 = true;
            f.cpu_dir = f.memory_dir = root + l.path;
            return f;
        }
        for (const auto &c : split(l.controllers, ',')) {
            if (c == "cpuacct") f.cpu_dir = root + "/" + l.controllers + l.path;
            if (c == "memory") f.memory_dir = root + "/" + l.controllers + l.path;
        }
    }
    return f;
}

std::optional<NodeUsage> cgroup_usage(bool v2, std::string_view cpu_text,
                                      std::string_view memory_usage_text,
                                      std::string_view memory_stat_text) {
    std::optional<uint64_t> cpu_ns;
    if (v2) {
        auto us = flat_keyed_value(cpu_text, "usage_usec");
        if (us && *us <= UINT64_MAX / 1000) cpu_ns = *us * 1000;
    } else {
        cpu_ns = single_value(cpu_text);
    }
    auto usage = single_value(memory_usage_text);
    auto inactive =
        flat_keyed_value(memory_stat_text, v2 ? "inactive_file" : "total_inactive_file");
    if (!cpu_ns || !usage || !inactive) return std::nullopt;
    return NodeUsage{*cpu_ns, *usage > *inactive ? *usage - *inactive : 0};
}

PodCgroupUsage read_pod_cgroup_usage(std::string_view self_cgroup_text, uint32_t job_id,
                                     const std::string &pod_uid, const std::string &root) {
    PodCgroupUsage out;
    auto name = pod_cgroup_name(pod_uid);
    auto parents =
        pod_cgroup_parents(self_cgroup_text, job_id, {"devices", "memory"}, root, {"cpuacct"});
    if (!name || !parents) return out;
    for (const auto &p : *parents) {
        std::string dir = p.dir + "/" + *name;
        if (p.unified) {  // cgroup v2: cpu.stat's usage_usec, memory.current less inactive_file
            auto cpu = read_file(dir + "/cpu.stat", kMaxCgroupFileBytes);
            auto current = read_file(dir + "/memory.current", kMaxCgroupFileBytes);
            auto stat = read_file(dir + "/memory.stat", kMaxCgroupFileBytes);
            if (cpu && current && stat)
                if (auto u = cgroup_usage(true, *cpu, *current, *stat)) {
                    out.cpu_ns = u->cpu_ns;
                    out.working_set_bytes = u->working_set_bytes;
                }
            continue;
        }
        bool cpu = false, memory = false;
        for (const auto &c : split(p.controllers, ',')) {
            cpu = cpu || c == "cpuacct";
            memory = memory || c == "memory";
        }
        if (cpu && !out.cpu_ns) {
            if (auto t = read_file(dir + "/cpuacct.usage", kMaxCgroupFileBytes))
                out.cpu_ns = single_value(*t);
        }
        if (memory && !out.working_set_bytes) {
            auto usage = read_file(dir + "/memory.usage_in_bytes", kMaxCgroupFileBytes);
            auto stat = read_file(dir + "/memory.stat", kMaxCgroupFileBytes);
            if (usage && stat) {
                uint64_t u = single_value(*usage).value_or(UINT64_MAX);
                uint64_t inactive =
                    flat_keyed_value(*stat, "total_inactive_file").value_or(UINT64_MAX);
                if (u != UINT64_MAX && inactive != UINT64_MAX)
                    out.working_set_bytes = u > inactive ? u - inactive : 0;
            }
        }
    }
    return out;
}

std::optional<NodeUsage> read_job_cgroup_usage(uint32_t job_id) {
    auto self = read_file("/proc/self/cgroup", kMaxCgroupFileBytes);
    if (!self) return std::nullopt;
    JobCgroupFiles f = job_cgroup_files(slurm_job_cgroups(*self, job_id));
    if (f.cpu_dir.empty() || f.memory_dir.empty()) return std::nullopt;
    auto cpu = read_file(f.cpu_dir + (f.v2 ? "/cpu.stat" : "/cpuacct.usage"), kMaxCgroupFileBytes);
    auto usage = read_file(f.memory_dir + (f.v2 ? "/memory.current" : "/memory.usage_in_bytes"),
                           kMaxCgroupFileBytes);
    auto stat = read_file(f.memory_dir + "/memory.stat", kMaxCgroupFileBytes);
    if (!cpu || !usage || !stat) return std::nullopt;
    return cgroup_usage(f.v2, *cpu, *usage, *stat);
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
