#include "common/daemons/log_paths.h"

#include <stdio.h>

#include <dirent.h>
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/fs.h"

namespace sk {

Status check_log_path_component(std::string_view s, std::string_view what) {
    bool bad = s.empty() || s.size() > 253 || s == "." || s == ".." ||
               s.find('/') != std::string_view::npos || s.find('\0') != std::string_view::npos;
    if (bad)
        return fail(Error::InvalidArgument,
                    "invalid " + std::string(what) + " '" + std::string(s) + "'");
    return {};
}

std::string podman_run_dir(uint32_t uid, uint32_t job_id, const std::string &slurm_node) {
    std::string base = "/tmp/sk-podman-" + std::to_string(uid) + "/" + std::to_string(job_id) + "_";
    if (base.size() + slurm_node.size() <= 50) return base + slurm_node;
    uint32_t h = 2166136261u;
    for (unsigned char c : slurm_node) {
        h ^= c;
        h *= 16777619u;
    }
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", h);
    return base + hex;
}

std::string pod_log_dir(const std::string &state_dir, const std::string &pod_uid) {
    return state_dir + "/pods/" + pod_uid;
}

std::string container_log_dir(const std::string &state_dir, const std::string &pod_uid,
                              const std::string &container) {
    return pod_log_dir(state_dir, pod_uid) + "/" + container;
}

std::string container_log_path(const std::string &state_dir, const std::string &pod_uid,
                               const std::string &container, int restart_count) {
    return container_log_dir(state_dir, pod_uid, container) + "/" + std::to_string(restart_count) +
           ".log";
}

std::vector<std::string> log_files_oldest_first(const std::string &path) {
    return {path + ".1", path};
}

std::optional<int> parse_log_file_name(std::string_view name) {
    constexpr std::string_view kSuffix = ".log";
    if (name.size() <= kSuffix.size() || name.substr(name.size() - kSuffix.size()) != kSuffix)
        return std::nullopt;
    std::string_view num = name.substr(0, name.size() - kSuffix.size());
    if (num.size() > 9 || (num.size() > 1 && num[0] == '0')) return std::nullopt;
    int v = 0;
    for (char c : num) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + (c - '0');
    }
    return v;
}

std::optional<int> previous_restart_count(const std::vector<int> &existing, int current) {
    std::optional<int> best;
    for (int n : existing)
        if (n < current && (!best || n > *best)) best = n;
    return best;
}

Result<std::vector<int>> list_restart_counts(const std::string &trusted_dir,
                                             const std::string &dir) {
    std::vector<int> out;
    auto fd = open_dir_beneath(trusted_dir, dir);
    if (!fd.ok()) {
        if (fd.error() == Error::NotFound) return out;
        return fail(fd.error(), "cannot list container logs: " + fd.message());
    }
    DIR *d = fdopendir(*fd);
    if (!d) {
        int err = errno;
        close(*fd);
        return fail(Error::Io, "cannot list " + dir + ": " + std::strerror(err));
    }
    while (struct dirent *e = readdir(d)) {
        if (auto n = parse_log_file_name(e->d_name)) out.push_back(*n);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

Result<std::vector<std::string>> container_log_files(const std::string &state_dir,
                                                     const std::string &pod_uid,
                                                     const std::string &container,
                                                     int current_restart_count, bool previous) {
    if (Status st = check_log_path_component(pod_uid, "pod uid"); !st.ok()) return st.failure();
    if (Status st = check_log_path_component(container, "container name"); !st.ok())
        return st.failure();
    int restart = current_restart_count;
    if (previous) {
        auto existing =
            list_restart_counts(state_dir, container_log_dir(state_dir, pod_uid, container));
        if (!existing.ok()) return existing.failure();
        auto prev = previous_restart_count(*existing, current_restart_count);
        if (!prev)
            return fail(Error::NotFound,
                        "previous terminated container \"" + container + "\" not found");
        restart = *prev;
    }
    return log_files_oldest_first(container_log_path(state_dir, pod_uid, container, restart));
}

}  // namespace sk
