// The mounts of a pod's volumes that only root can make on the node, as a
// kubelet makes them: an emptyDir of medium Memory is a tmpfs of its size
// at the pod's volume directory (<job's shim dir>/pods/<uid>/volumes/<name>),
// owned by the job's user, so that every container of the pod (process,
// template or image) shares it, it outlives a container's restart, and
// its pages are charged to the memory cgroup of the pod's process that
// writes them. The daemon's is agent/pod_tmpfs.h; the controllers' tests
// leave AgentContext::mounts null (the volume is then a directory).
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace sk::agent {

struct MemoryVolume {
    std::string job_dir;  // shim_state_dir_for(): made by the agent, the user's
    std::string job_tag;  // "job_<id>_<node>": names the job's mounts
    std::string pod_uid, volume;
    uint64_t size_bytes = 0;
    uint32_t uid = 0, gid = 0;  // the job's user
};

class PodMounts {
  public:
    virtual ~PodMounts() = default;
    // The tmpfs of `v` (the directories to it made as needed, the user's);
    // one already there is kept. Fails saying why (FailedMount).
    virtual Status mount_memory(const MemoryVolume &v) = 0;
    // Unmounts the pod's tmpfs volumes (pod_uid ""= every one of the job's);
    // the number unmounted.
    virtual size_t unmount(const std::string &job_tag, const std::string &pod_uid) = 0;
};

}  // namespace sk::agent
