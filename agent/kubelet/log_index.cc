#include "agent/kubelet/log_index.h"

#include <unistd.h>

#include "common/daemons/log_paths.h"
#include "common/fs.h"

namespace sk::agent {

// Whether the instance wrote a file, looked up as read_cri_log opens it
// (never through a symlink): anything there but nothing counts, so that
// what is refused is refused when it is read, with the reason.
static bool exists_any(const std::string &dir, const std::vector<std::string> &paths) {
    for (const auto &p : paths) {
        auto fd = open_file_beneath(dir, p);
        if (fd.ok()) close(*fd);
        if (fd.ok() || fd.error() != Error::NotFound) return true;
    }
    return false;
}

void LogIndex::update(const std::string &ns, const std::string &name, const std::string &uid,
                      const std::string &state_dir, const Json::Value &st) {
    PodLogs p;
    p.uid = uid;
    p.state_dir = state_dir;
    for (const char *list : {"initContainerStatuses", "containerStatuses"}) {
        for (const auto &cs : st[list]) {
            ContainerLogState c;
            c.restart_count = cs["restartCount"].isIntegral() ? cs["restartCount"].asInt() : 0;
            c.running = cs["state"].isMember("running");
            if (cs["state"].isMember("waiting"))
                c.waiting_reason = cs["state"]["waiting"]["reason"].asString();
            p.containers[cs["name"].asString()] = c;
        }
    }
    std::lock_guard<std::mutex> g(mu_);
    pods_[ns + "/" + name] = std::move(p);
}

void LogIndex::remove(const std::string &ns, const std::string &name, const std::string &uid) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = pods_.find(ns + "/" + name);
    if (it != pods_.end() && it->second.uid == uid) pods_.erase(it);
}

size_t LogIndex::size() const {
    std::lock_guard<std::mutex> g(mu_);
    return pods_.size();
}

Result<ContainerLogSource> LogIndex::resolve(const ContainerLogRef &ref) const {
    std::string uid, dir;
    ContainerLogState c;
    {
        std::lock_guard<std::mutex> g(mu_);
        auto it = pods_.find(ref.ns + "/" + ref.pod);
        if (it == pods_.end())
            return fail(Error::NotFound, "pod \"" + ref.pod + "\" in namespace \"" + ref.ns +
                                             "\" is not running on this node");
        auto ci = it->second.containers.find(ref.container);
        if (ci == it->second.containers.end())
            return fail(Error::InvalidArgument,
                        "container " + ref.container + " is not valid for pod " + ref.pod);
        uid = it->second.uid;
        dir = it->second.state_dir;
        c = ci->second;
    }
    ContainerLogSource src;
    if (!ref.previous && !c.running && c.restart_count == 0 && !c.waiting_reason.empty()) {
        // Never started: the kubelet answers 400 with the waiting reason.
        auto files = container_log_files(dir, uid, ref.container, 0, false);
        if (!files || !exists_any(dir, *files))
            return fail(Error::InvalidArgument, "container \"" + ref.container + "\" in pod \"" +
                                                    ref.pod +
                                                    "\" is waiting to start: " + c.waiting_reason);
    }
    auto files = container_log_files(dir, uid, ref.container, c.restart_count, ref.previous);
    if (!files && ref.previous && files.error() == Error::NotFound)
        // The kubelet's answer (validateContainerLogStatus): 400 with these words.
        return fail(Error::InvalidArgument, "previous terminated container \"" + ref.container +
                                                "\" in pod \"" + ref.pod + "\" not found");
    if (!files) return files.failure();
    if (!ref.previous && !c.running && !exists_any(dir, *files)) {
        // In back-off the status already counts the next instance, which has
        // not written yet: show the last terminated one, as the kubelet does.
        if (auto prev = container_log_files(dir, uid, ref.container, c.restart_count, true); prev)
            files = prev;
    }
    src.trusted_dir = dir;
    src.paths_oldest_first = *files;
    src.running = !ref.previous && c.running;
    return src;
}

Status LogIndex::exec_check(const std::string &ns, const std::string &pod,
                            const std::string &container, const std::string &state_dir) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = pods_.find(ns + "/" + pod);
    if (it == pods_.end() || (!state_dir.empty() && it->second.state_dir != state_dir))
        return fail(Error::NotFound,
                    "pod \"" + pod + "\" in namespace \"" + ns + "\" is not running on this node");
    if (container.empty()) return {};  // port-forward: the pod's network, no container
    auto ci = it->second.containers.find(container);
    if (ci == it->second.containers.end())
        return fail(Error::NotFound, "container not found (\"" + container + "\")");
    if (!ci->second.running)
        return fail(Error::InvalidArgument,
                    "container \"" + container + "\" in pod \"" + pod + "\" is not running");
    return {};
}

}  // namespace sk::agent
