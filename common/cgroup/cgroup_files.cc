#include "common/cgroup/cgroup_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/cgroup/pod_cgroup.h"
#include "common/fs.h"
#include "common/procfs.h"

namespace sk {

Result<std::string> read_process_cgroups(pid_t pid) {
    if (pid == 0) return read_file("/proc/self/cgroup", kMaxCgroupFileBytes);
    return read_proc_file(pid, "cgroup", kMaxCgroupFileBytes);
}

std::vector<pid_t> read_cgroup_procs(const std::string &dir) {
    std::vector<pid_t> out;
    auto text = read_file(dir + "/cgroup.procs", size_t{4} << 20);
    if (!text) return out;
    std::istringstream in(*text);
    long p;
    while (in >> p)
        out.push_back(static_cast<pid_t>(p));
    return out;
}

Status move_to_cgroup(const std::string &dir, pid_t pid) {
    const std::string path = dir + "/cgroup.procs", text = std::to_string(pid);
    int fd = open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail(Error::Io, path + ": " + strerror(errno));
    Status st;
    if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        st = fail(Error::Io, path + ": writing '" + text + "': " + strerror(errno));
    close(fd);
    return st;
}

long long oom_kill_count(const std::string &path, long long absent) {
    auto text = read_file(path, kMaxCgroupFileBytes);
    if (!text) return absent;
    std::istringstream f(*text);
    std::string key;
    long long value;
    while (f >> key >> value)
        if (key == "oom_kill") return value;
    return -1;
}

long long container_oom_kills(const std::string &own_cgroups, const std::string &pod_uid,
                              uint32_t job_id, const std::string &container,
                              const std::string &root) {
    std::istringstream cg(own_cgroups);
    std::string line, path;
    while (std::getline(cg, line))
        if (line.rfind("0::", 0) == 0) path = line.substr(3);
    auto memory = pod_uid.empty() ? Result<std::vector<PodCgroupParent>>(fail(Error::NotFound, ""))
                                  : pod_cgroup_parents(own_cgroups, job_id, {"memory"}, root);
    // The container's own cgroup (0 until the agent made it).
    auto ctr = container_cgroup_name(container);
    if (memory && !memory->empty() && ctr)
        return oom_kill_count(
            memory->front().dir + "/k8s_pod_" + pod_uid + "/" + *ctr +
                (memory->front().unified ? "/memory.events" : "/memory.oom_control"),
            0);
    if (path.empty()) return -1;
    return oom_kill_count(root + path + "/memory.events", -1);
}

}  // namespace sk
