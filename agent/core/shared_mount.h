// A directory of the agent's made a mount point of its own with shared
// propagation, so that what the agent mounts below it later (a pod's memory
// volume, its network namespaces) also shows in the mount namespaces copied
// from the node's before that: rootless podman's, whose "/" is private on
// most hosts (podman warns '"/" is not a shared mount').
#pragma once

#include <string>

#include "common/result.h"

namespace sk::agent {

// Whether `dir` (its real path) is a mount point in the agent's namespace.
bool is_mount_point(const std::string &dir);
// Binds `dir` onto itself unless it is a mount point already, then makes
// it shared. Idempotent.
Status share_dir(const std::string &dir);

}  // namespace sk::agent
