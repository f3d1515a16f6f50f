// Where container logs live, shared by the shim
// (writer) and the agent (kubelet endpoint):
//     <state_dir>/pods/<pod uid>/<container name>/<restartCount>.log
//     <state_dir>/pods/<pod uid>/<container name>/<restartCount>.log.1   (one rotation)
// `kubectl logs --previous` reads the highest restartCount below the current
// one that has a file (a restart whose container never wrote may be absent).
//
// Everything here is pure except list_restart_counts() and
// container_log_files(), which read one directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk {

// The podman runtime's run directory of one job on one node (k8s-shim/
// podman.h): podman refuses a --runroot longer than 50 characters, which a
// shim state directory easily is, so it lives at
//     /tmp/sk-podman-<uid>/<job id>_<slurm node>
// (the node's name replaced by the FNV-1a hash of it, in hex, when the
// path would be longer). The shim makes and removes it; the agent removes
// what a shim that died left, with the job's state directory.
std::string podman_run_dir(uint32_t uid, uint32_t job_id, const std::string &slurm_node);

// A pod uid or container name used as one path component: non-empty, at most
// 253 bytes, no '/', no NUL, not "." or "..". Refuses path traversal from a
// request like /containerLogs/ns/pod/..%2F..
Status check_log_path_component(std::string_view s, std::string_view what);

std::string pod_log_dir(const std::string &state_dir, const std::string &pod_uid);
std::string container_log_dir(const std::string &state_dir, const std::string &pod_uid,
                              const std::string &container);
std::string container_log_path(const std::string &state_dir, const std::string &pod_uid,
                               const std::string &container, int restart_count);
// {path + ".1", path}: what read_cri_log() takes.
std::vector<std::string> log_files_oldest_first(const std::string &path);

// "3.log" -> 3; anything else (including "3.log.1", "03.log", "-1.log") -> nullopt.
std::optional<int> parse_log_file_name(std::string_view name);
// The highest value in `existing` below `current`; nullopt when none.
std::optional<int> previous_restart_count(const std::vector<int> &existing, int current);

// Restart counts that have a "<n>.log" file in `dir`, below `trusted_dir`
// and opened as open_dir_beneath (common/fs.h) does: a symlink at any
// component below it is refused (Error::Refused), never listed. Empty when
// the directory does not exist.
Result<std::vector<int>> list_restart_counts(const std::string &trusted_dir,
                                             const std::string &dir);

// The files to read for a container: the current restart's, or with
// `previous` those of the restart before it (NotFound with a kubectl-style
// message when there is none).
Result<std::vector<std::string>> container_log_files(const std::string &state_dir,
                                                     const std::string &pod_uid,
                                                     const std::string &container,
                                                     int current_restart_count, bool previous);

}  // namespace sk
