#include "agent/lost_shim.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/json.h"

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
    Json::Value s = status.isObject() ? status : Json::Value(Json::objectValue);
    s["phase"] = "Failed";
    s["reason"] = "ShimLost";
    s["message"] = message;
    for (const char *list : {"initContainerStatuses", "containerStatuses"}) {
        for (auto &cs : s[list]) {
            cs["ready"] = false;
            if (cs["started"].isBool()) cs["started"] = false;
            if (!cs["state"].isMember("running")) continue;
            Json::Value t(Json::objectValue);
            t["exitCode"] = 137;
            t["reason"] = "Error";
            t["message"] = "killed: the job's pod runner (slurm-k8s-shim) died";
            t["startedAt"] = cs["state"]["running"]["startedAt"];
            t["finishedAt"] = finished_at;
            if (cs.isMember("containerID")) t["containerID"] = cs["containerID"];
            cs["state"] = Json::Value(Json::objectValue);
            cs["state"]["terminated"] = t;
        }
        if (s[list].isNull()) s.removeMember(list);
    }
    for (auto &c : s["conditions"]) {
        std::string t = c["type"].asString();
        if (t == "Ready" || t == "ContainersReady") c["status"] = "False";
    }
    if (s["conditions"].isNull()) s.removeMember("conditions");
    return s;
}

// Fields after the last ')' of /proc/PID/stat: 3 = state, 22 = starttime.
static bool read_stat(int pid, char *state, unsigned long long *start) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f) return false;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ') return false;
    p += 2;
    *state = *p;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p) return false;
        p++;
    }
    *start = strtoull(p, nullptr, 10);
    return true;
}

unsigned long long proc_start_ticks(int pid) {
    char state = 0;
    unsigned long long start = 0;
    if (pid <= 0 || !read_stat(pid, &state, &start)) return 0;
    return state == 'Z' || state == 'X' ? 0 : start;
}

bool process_gone(int pid, unsigned long long start_ticks) {
    unsigned long long now = proc_start_ticks(pid);
    return now == 0 || now != start_ticks;
}

// A state.json the user controls: no link, no FIFO (it would block the
// agent), bounded size.
static Json::Value read_state_file(const std::string &path) {
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return Json::Value();
    struct stat st;
    std::string text;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (1 << 20)) {
        text.resize(static_cast<size_t>(st.st_size));
        ssize_t n = read(fd, text.data(), text.size());
        text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    }
    close(fd);
    auto v = json::parse(text);
    return v ? *v : Json::Value();
}

// Signals the groups from a child holding the job user's credentials: the
// kernel's permission check then bounds what a forged record can reach.
static int kill_groups_as(const std::vector<int> &pgids, uint32_t uid, uint32_t gid) {
    if (pgids.empty()) return 0;
    pid_t child = fork();
    if (child < 0) return 0;
    if (child == 0) {  // async-signal-safe calls only
        if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
                               setresuid(uid, uid, uid) != 0))
            _exit(1);
        if (geteuid() != uid) _exit(1);
        for (int g : pgids)
            kill(-g, SIGKILL);
        _exit(0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? static_cast<int>(pgids.size()) : 0;
}

int stop_recorded_processes(const std::string &state_dir, uint32_t uid, uint32_t gid) {
    std::string pods = state_dir + "/pods";
    DIR *d = opendir(pods.c_str());
    if (!d) return 0;
    std::vector<int> pgids;
    while (struct dirent *e = readdir(d)) {
        std::string uid_dir = e->d_name;
        if (uid_dir == "." || uid_dir == "..") continue;
        for (const auto &p :
             recorded_processes(read_state_file(pods + "/" + uid_dir + "/state.json")))
            if (!process_gone(p.pid, p.start_ticks)) pgids.push_back(p.pid);
    }
    closedir(d);
    return kill_groups_as(pgids, uid, gid);
}

}  // namespace sk::agent
