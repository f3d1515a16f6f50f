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
// /proc/PID/cgroup text must place it in the job's Slurm cgroup (job_<id>).
Status authorize_attach(const PeerCred &peer, uint32_t job_id, uint32_t job_uid, ShimAuth mode,
                        std::string_view cgroup_text);

// True when some line of /proc/PID/cgroup has a path component "job_<id>".
bool cgroup_has_job(std::string_view cgroup_text, uint32_t job_id);

// Reads /proc/PID/cgroup ("" when the process is gone).
std::string read_proc_cgroup(int32_t pid);

}  // namespace sk::agent
