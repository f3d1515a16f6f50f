#include "agent/core/peer_auth.h"

#include <algorithm>

#include "common/cgroup/cgroup_files.h"
#include "common/cgroup/slurm_cgroup.h"
#include "common/procfs.h"

namespace sk::agent {

bool is_admin(const PeerCred &peer, const std::vector<uint32_t> &admin_uids) {
    return std::find(admin_uids.begin(), admin_uids.end(), peer.uid) != admin_uids.end();
}

Status authorize_op(const std::string &op, const PeerCred &peer,
                    const std::vector<uint32_t> &admin_uids) {
    const bool admin = is_admin(peer, admin_uids);
    // Read-only ops are open to every user; the agent answers a non-admin
    // only about that user's own jobs (Agent::op_status, Agent::op_list).
    if (op == "status" || op == "list") return {};
    if (op == "register" || op == "deregister") {
        if (admin) return {};
        return fail(Error::Forbidden, "'" + op +
                                          "' is allowed only to root and the SlurmUser (uid " +
                                          std::to_string(peer.uid) + " is neither)");
    }
    // A shim's link and an exec session's data connection: checked against
    // the job's uid by their handlers (Agent::op_attach, StreamSessions::attach).
    // A container supervisor's request to enter its pod's cgroup: checked
    // against the attached shim by Agent::op_cgroup_enter.
    if (op == "attach" || op == "exec_attach" || op == "cgroup_enter") return {};
    return fail(Error::Forbidden, "unknown or not allowed operation '" + op + "'");
}

Status authorize_attach(const PeerCred &peer, uint32_t job_id, uint32_t job_uid, ShimAuth mode,
                        std::string_view cgroup_text) {
    if (peer.uid != job_uid)
        return fail(Error::Forbidden, "attach to job " + std::to_string(job_id) + ": uid " +
                                          std::to_string(peer.uid) +
                                          " is not the job's user (uid " + std::to_string(job_uid) +
                                          ")");
    if (mode == ShimAuth::Uid) return {};
    if (cgroup_text.empty())
        return fail(Error::Forbidden, "attach to job " + std::to_string(job_id) +
                                          ": cannot read the cgroup of pid " +
                                          std::to_string(peer.pid));
    if (slurm_job_cgroups(cgroup_text, job_id).empty())
        return fail(Error::Forbidden, "attach to job " + std::to_string(job_id) + ": pid " +
                                          std::to_string(peer.pid) +
                                          " does not run inside the job's cgroup");
    return {};
}

namespace {

std::string n_of(size_t n, const char *key) {
    return std::string(key) + "=" + std::to_string(n);
}

}  // namespace

Result<Pool> admit_connection(const PeerStanding &who, uint32_t uid, const PoolCounts &n,
                              const SocketLimits &limits) {
    if (limits.admin_only) {
        if (!who.admin)
            return fail(Error::Forbidden,
                        "uid " + std::to_string(uid) +
                            ": the admin socket is root's and the SlurmUser's; use the agent "
                            "socket (socket_path)");
        if (n.admin < limits.admin_connections) return Pool::Admin;
        return fail(Error::Unavailable, "too many connections (" +
                                            n_of(limits.admin_connections, "admin_connections") +
                                            " in use on the admin socket)");
    }
    if (who.admin) {
        if (n.admin < limits.admin_connections) return Pool::Admin;
        if (n.user_total < limits.max_connections) return Pool::User;
        return fail(Error::Unavailable,
                    "too many connections (" + n_of(limits.admin_connections, "admin_connections") +
                        " and " + n_of(limits.max_connections, "max_connections") + " in use)");
    }
    if (n.shim_of_uid < who.jobs) return Pool::Shim;
    if (n.user_of_uid >= limits.max_per_uid)
        return fail(Error::Unavailable,
                    "too many connections from uid " + std::to_string(uid) + " (" +
                        n_of(limits.max_per_uid, "max_connections_per_uid") +
                        "); close idle ones, the agent closes a connection idle for " +
                        std::to_string(limits.idle_timeout_ms / 1000) + " s");
    if (n.user_total >= limits.max_connections)
        return fail(Error::Unavailable, "too many connections (" +
                                            n_of(limits.max_connections, "max_connections") +
                                            " in use by users); try again later");
    return Pool::User;
}

std::string read_proc_cgroup(int32_t pid) {
    auto text = read_process_cgroups(pid);
    return text ? *text : std::string();
}

}  // namespace sk::agent
