// Who may send what on the agent socket, decided from SO_PEERCRED. Pure
// decisions (tested table-driven) + one reader of /proc/PID/cgroup.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk::agent {

struct PeerCred {
    int32_t pid = -1;
    uint32_t uid = UINT32_MAX;
    uint32_t gid = UINT32_MAX;
};

// register / deregister / status / list: only the admin uids.
// attach: anyone here; authorize_attach decides. Anything else: refused.
// Root and the SlurmUser (admin_uids) see and change every job.
bool is_admin(const PeerCred &peer, const std::vector<uint32_t> &admin_uids);
Status authorize_op(const std::string &op, const PeerCred &peer,
                    const std::vector<uint32_t> &admin_uids);

enum class ShimAuth { Cgroup, Uid };

// attach to job_id: uid must be the job's; with ShimAuth::Cgroup the peer's
// /proc/PID/cgroup text must place it in the job's Slurm cgroup
// (slurm_job_cgroups, common/slurm_cgroup.h: only the hierarchies Slurm
// confines jobs with count, never one systemd may delegate to the user).
Status authorize_attach(const PeerCred &peer, uint32_t job_id, uint32_t job_uid, ShimAuth mode,
                        std::string_view cgroup_text);

// Reads /proc/PID/cgroup, bounded and not through a symlink ("" when the
// process is gone or pid <= 0).
std::string read_proc_cgroup(int32_t pid);

}  // namespace sk::agent
