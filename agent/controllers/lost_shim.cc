#include "agent/controllers/lost_shim.h"

#include <dirent.h>

#include "common/daemons/json.h"
#include "common/daemons/pod_loss.h"
#include "common/daemons/supervisor.h"
#include "common/fs.h"

namespace sk::agent {

std::vector<RecordedProcess> recorded_processes(const Json::Value &state) {
    std::vector<RecordedProcess> out;
    if (!state.isObject() || state["finished"].asBool() || !state["processes"].isObject())
        return out;
    for (const auto &name : state["processes"].getMemberNames()) {
        const Json::Value &p = state["processes"][name];
        if (!p.isObject() || !p["pid"].isIntegral() || !p["start_ticks"].isIntegral()) continue;
        if (p["pid"].asLargestInt() <= 1 || p["pid"].asLargestInt() > INT32_MAX) continue;
        if (p["start_ticks"].asLargestUInt() == 0) continue;
        out.push_back({static_cast<int>(p["pid"].asInt()),
                       static_cast<unsigned long long>(p["start_ticks"].asLargestUInt())});
    }
    return out;
}

Json::Value shim_lost_status(const Json::Value &status, const std::string &message,
                             const std::string &finished_at) {
    return lost_pod_status(
        status, PodLoss{"ShimLost", message, "Error",
                        "killed: the job's pod runner (slurm-k8s-shim) died", finished_at});
}

// A state.json the user controls: no link, no FIFO (it would block the
// agent), bounded size.
static Json::Value read_state_file(const std::string &path) {
    auto text = read_file(path, (size_t{1} << 20) - 1);
    if (!text) return Json::Value();
    auto v = json::parse(*text);
    return v ? *v : Json::Value();
}

int stop_recorded_processes(const std::string &state_dir, uint32_t uid, uint32_t gid) {
    std::string pods = state_dir + "/pods";
    DIR *d = opendir(pods.c_str());
    if (!d) return 0;
    RecordedContainers containers;
    while (struct dirent *e = readdir(d)) {
        std::string uid_dir = e->d_name;
        if (uid_dir == "." || uid_dir == "..") continue;
        for (const auto &p :
             recorded_processes(read_state_file(pods + "/" + uid_dir + "/state.json")))
            (void)containers.add(p.pid, p.start_ticks);
    }
    closedir(d);
    // As the job's user, from a child: the kernel's permission check then
    // bounds what a forged record can reach. The supervisors' kill passes
    // are waited for by a grandchild (RecordedContainers::stop), never on
    // the agent's loop.
    JobCredentials as{uid, gid};
    return containers.stop(&as, kSupervisorSweepMs) ? static_cast<int>(containers.size()) : 0;
}

}  // namespace sk::agent
