// Who may send what on the agent socket, decided from SO_PEERCRED. Pure
// decisions (tested table-driven) + one reader of /proc/PID/cgroup.
#pragma once

#include <cstddef>
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
// (slurm_job_cgroups, common/cgroup/slurm_cgroup.h: only the hierarchies Slurm
// confines jobs with count, never one systemd may delegate to the user).
Status authorize_attach(const PeerCred &peer, uint32_t job_id, uint32_t job_uid, ShimAuth mode,
                        std::string_view cgroup_text);

// The agent socket's admission (agent/socket_server.h says how it is used).
struct SocketLimits {
    size_t max_connections = 256;   // user pool, all uids together
    size_t max_per_uid = 16;        // user pool, per uid
    size_t admin_connections = 64;  // reserved for the admin uids
    uint64_t idle_timeout_ms = 10000;
    // The admin socket (common/agent_call.h admin_socket_for): only the
    // admin uids, admin_connections of them; no user or shim pool.
    bool admin_only = false;
};

// What the agent knows of a peer at accept.
struct PeerStanding {
    bool admin = false;  // root or the SlurmUser (is_admin above)
    size_t jobs = 0;     // jobs of this uid registered here: its shim slots
};

enum class Pool { None, Admin, Shim, User };

// The pool a new connection goes to, or the refusal (Error::Unavailable, the
// text the peer gets). Pure: `n` counts the connections open now.
struct PoolCounts {
    size_t admin = 0;  // the admin pool, all uids
    size_t shim_of_uid = 0;
    size_t user_of_uid = 0;
    size_t user_total = 0;
};
Result<Pool> admit_connection(const PeerStanding &who, uint32_t uid, const PoolCounts &n,
                              const SocketLimits &limits);

// Reads /proc/PID/cgroup, bounded and not through a symlink ("" when the
// process is gone or pid <= 0).
std::string read_proc_cgroup(int32_t pid);

}  // namespace sk::agent
