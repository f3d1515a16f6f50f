// agent/core/pod_mounts.h done as root, without following a link the
// job's user could plant: the volume directory is reached from the job's
// directory by openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_XDEV), made (and given to the user) a component at a time
// through directory descriptors, and the tmpfs attached to that descriptor
// with the new mount API (fsopen, fsmount, move_mount: nosuid, nodev, the
// user's uid and gid, mode 0770, size=). Each tmpfs carries its job and pod
// in its source ("slurm-k8s:<job_tag>:<pod uid>", /proc/self/mountinfo), so
// that it is found wherever the user moved its directory; it is unmounted
// (detached: containers that still have it keep it until they exit) through
// a descriptor of its mount point whose mount id is checked first.
#pragma once

#include <string>

#include "agent/core/pod_mounts.h"

namespace sk::agent {

class TmpfsMounts : public PodMounts {
  public:
    Status mount_memory(const MemoryVolume &v) override;
    size_t unmount(const std::string &job_tag, const std::string &pod_uid) override;
};

// The job's shim directory made a mount point of its own with shared
// propagation (bound onto itself) before its shim attaches: the mount
// namespace rootless podman makes for the job (held by its pause process,
// k8s-shim/podman.h) is then a slave of it, so a memory volume mounted below
// it afterwards reaches the job's image containers too, where the host's
// "/" is private (a copy of a private mount receives nothing). Idempotent.
Status share_job_dir(const std::string &dir);
// Its bind detached (the job's end, before the directory is removed).
void unshare_job_dir(const std::string &dir);

// The source a tmpfs of the job's pod carries.
std::string tmpfs_source(const std::string &job_tag, const std::string &pod_uid);

}  // namespace sk::agent
