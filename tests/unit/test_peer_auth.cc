// agent/core/peer_auth: who may send which op on the agent socket, and a shim's
// attach by uid and cgroup; which connection pool a peer gets
// (admit_connection).
#include <cstdint>
#include <string>

#include "agent/core/peer_auth.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

struct OpCase {
    const char *op;
    uint32_t uid;
    bool allowed;
};
static const OpCase kOps[] = {
    {"register", 0, true},       {"register", 1000, false}, {"deregister", 64030, true},
    {"deregister", 1000, false}, {"status", 1000, true},    {"list", 0, true},
    {"list", 1000, true},        {"attach", 1000, true},    {"pod_run", 0, false},
    {"shutdown", 0, false},
};
START_TEST(op_authorization) {
    const auto &c = kOps[_i];
    Status st = authorize_op(c.op, PeerCred{123, c.uid, c.uid}, {0, 64030});
    ck_assert_msg(st.ok() == c.allowed, "%s by uid %u", c.op, c.uid);
    if (!st.ok()) ck_assert(st.error() == Error::Forbidden);
}
END_TEST

struct AttachCase {
    uint32_t uid;
    ShimAuth mode;
    const char *cgroup;
    bool allowed;
    const char *message_has;
};
static const AttachCase kAttach[] = {
    {1000, ShimAuth::Cgroup, "0::/system.slice/slurmstepd.scope/job_42/step_extern/user/task_0\n",
     true, ""},
    {1000, ShimAuth::Cgroup, "5:devices:/slurm/uid_1000/job_42/step_extern\n", true, ""},
    {1000, ShimAuth::Cgroup, "0::/system.slice/slurmstepd.scope/job_420/step_extern\n", false,
     "cgroup"},
    {1000, ShimAuth::Cgroup, "0::/user.slice/user-1000.slice/session-3.scope\n", false, "cgroup"},
    {1000, ShimAuth::Cgroup, "", false, "cannot read"},
    {1001, ShimAuth::Cgroup, "0::/x/job_42/step_extern\n", false, "not the job's user"},
    {1001, ShimAuth::Uid, "", false, "not the job's user"},
    {1000, ShimAuth::Uid, "", true, ""},
};
START_TEST(attach_authorization) {
    const auto &c = kAttach[_i];
    Status st = authorize_attach(PeerCred{77, c.uid, c.uid}, 42, 1000, c.mode, c.cgroup);
    ck_assert_msg(st.ok() == c.allowed, "case %d", _i);
    if (!st.ok())
        ck_assert_msg(st.message().find(c.message_has) != std::string::npos, "%s",
                      st.message().c_str());
}
END_TEST

struct AdmitCase {
    bool admin;
    size_t jobs;
    PoolCounts n;  // admin, shim_of_uid, user_of_uid, user_total
    Pool pool;     // None: refused
    const char *message_has;
};
static const AdmitCase kAdmit[] = {
    {true, 0, {0, 0, 0, 0}, Pool::Admin, ""},
    {true, 0, {64, 0, 0, 10}, Pool::User, ""},    // admins spill over into the users' pool
    {true, 0, {64, 0, 999, 10}, Pool::User, ""},  // with no per-uid bound
    {true, 0, {64, 0, 0, 256}, Pool::None, "admin_connections=64 and max_connections=256"},
    {false, 1, {0, 0, 16, 256}, Pool::Shim, ""},  // a job's user: its shim's slot, whatever else
    {false, 2, {0, 1, 0, 0}, Pool::Shim, ""},
    {false, 1, {0, 1, 3, 3}, Pool::User, ""},
    {false, 0, {0, 0, 15, 255}, Pool::User, ""},
    {false, 0, {0, 0, 16, 20}, Pool::None, "from uid 77 (max_connections_per_uid=16)"},
    {false, 0, {0, 0, 2, 256}, Pool::None, "(max_connections=256 in use by users)"},
    {false, 0, {0, 0, 0, 0}, Pool::User, ""},  // admins' connections never count here
};
START_TEST(admission) {
    const auto &c = kAdmit[_i];
    PeerStanding who;
    who.admin = c.admin;
    who.jobs = c.jobs;
    auto r = admit_connection(who, 77, c.n, SocketLimits{});
    if (c.pool == Pool::None) {
        ck_assert_msg(!r.ok(), "case %d admitted", _i);
        ck_assert(r.error() == Error::Unavailable);
        ck_assert_msg(r.message().find(c.message_has) != std::string::npos, "case %d: %s", _i,
                      r.message().c_str());
    } else {
        ck_assert_msg(r.ok(), "case %d: %s", _i, r.ok() ? "" : r.message().c_str());
        ck_assert_msg(*r == c.pool, "case %d: pool %d", _i, static_cast<int>(*r));
    }
}
END_TEST

// The admin socket: admins only, in their own pool, never spilling over.
static const AdmitCase kAdmitAdminSocket[] = {
    {true, 0, {0, 0, 0, 0}, Pool::Admin, ""},
    {true, 0, {63, 0, 0, 256}, Pool::Admin, ""},  // a full users' pool is not its business
    {true, 0, {64, 0, 0, 0}, Pool::None, "admin_connections=64 in use on the admin socket"},
    {false, 0, {0, 0, 0, 0}, Pool::None, "the admin socket is root's and the SlurmUser's"},
    {false, 3, {0, 0, 0, 0}, Pool::None, "use the agent socket"},  // not even a job's shim
};
START_TEST(admission_admin_socket) {
    const auto &c = kAdmitAdminSocket[_i];
    PeerStanding who;
    who.admin = c.admin;
    who.jobs = c.jobs;
    SocketLimits limits;
    limits.admin_only = true;
    auto r = admit_connection(who, 77, c.n, limits);
    if (c.pool == Pool::None) {
        ck_assert_msg(!r.ok(), "case %d admitted", _i);
        ck_assert(r.error() == (c.admin ? Error::Unavailable : Error::Forbidden));
        ck_assert_msg(r.message().find(c.message_has) != std::string::npos, "case %d: %s", _i,
                      r.message().c_str());
    } else {
        ck_assert_msg(r.ok(), "case %d: %s", _i, r.ok() ? "" : r.message().c_str());
        ck_assert_msg(*r == c.pool, "case %d: pool %d", _i, static_cast<int>(*r));
    }
}
END_TEST

int main() {
    Suite *s = suite_create("peer_auth");
    TCase *tc = tcase_create("peer_auth");
    tcase_add_loop_test(tc, op_authorization, 0, TABLE_SIZE(kOps));
    tcase_add_loop_test(tc, attach_authorization, 0, TABLE_SIZE(kAttach));
    tcase_add_loop_test(tc, admission, 0, TABLE_SIZE(kAdmit));
    tcase_add_loop_test(tc, admission_admin_socket, 0, TABLE_SIZE(kAdmitAdminSocket));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
