// common/cgroup/cgroup_files: a process's cgroup membership, a cgroup's
// member processes and moving one in, and the OOM kill counts, on a cgroup
// tree made of plain files in a temporary directory (what the kernel's
// files say, not the kernel: the e2e and tests/vm run them on real cgroups).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/cgroup/cgroup_files.h"
#include "common/cgroup/pod_cgroup.h"
#include "tests/unit/check_main.h"

using namespace sk;

namespace {

struct Tree {
    std::string root;
    Tree() {
        char t[] = "/tmp/sk-cgfiles-XXXXXX";
        root = mkdtemp(t);
    }
    ~Tree() {
        std::error_code ec;
        std::filesystem::remove_all(root, ec);
    }
    std::string put(const std::string &rel, const std::string &text) const {
        std::string p = root + "/" + rel;
        std::filesystem::create_directories(std::filesystem::path(p).parent_path());
        std::ofstream(p) << text;
        return p;
    }
};

}  // namespace

// This process's membership reads as /proc/self/cgroup does, and by pid.
START_TEST(membership_of_self_and_pid) {
    auto self = read_process_cgroups();
    ck_assert_msg(self.ok(), "%s", self.ok() ? "" : self.message().c_str());
    ck_assert(self->find("::") != std::string::npos || self->find(':') != std::string::npos);
    auto by_pid = read_process_cgroups(getpid());
    ck_assert(by_pid.ok());
    ck_assert_str_eq(by_pid->c_str(), self->c_str());
    ck_assert(!read_process_cgroups(999999999).ok());  // no such process
}
END_TEST

// cgroup.procs: one pid per line; a missing cgroup reads as empty; a symlink
// in its place is not followed (the job's user owns what is below a job).
START_TEST(member_processes) {
    Tree t;
    t.put("job_42/cgroup.procs", "12\n345\n6789\n");
    auto pids = read_cgroup_procs(t.root + "/job_42");
    ck_assert_uint_eq(pids.size(), 3);
    ck_assert_int_eq(pids[0], 12);
    ck_assert_int_eq(pids[2], 6789);
    ck_assert_uint_eq(read_cgroup_procs(t.root + "/gone").size(), 0);
    std::filesystem::create_directories(t.root + "/job_43");
    ck_assert_int_eq(symlink((t.root + "/job_42/cgroup.procs").c_str(),
                             (t.root + "/job_43/cgroup.procs").c_str()),
                     0);
    ck_assert_uint_eq(read_cgroup_procs(t.root + "/job_43").size(), 0);
}
END_TEST

// Moving a process in writes its pid to the directory's cgroup.procs (the
// kernel's file exists; nothing is created); a missing one or a symlink is
// an error naming the file.
START_TEST(move_into_cgroup) {
    Tree t;
    std::string procs = t.put("freezer/cgroup.procs", "");
    auto st = move_to_cgroup(t.root + "/freezer", 4242);
    ck_assert_msg(st.ok(), "%s", st.ok() ? "" : st.message().c_str());
    std::ifstream in(procs);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ck_assert_str_eq(text.c_str(), "4242");
    auto missing = move_to_cgroup(t.root + "/nothing", 1);
    ck_assert(!missing.ok());
    ck_assert(missing.message().find(t.root + "/nothing/cgroup.procs") != std::string::npos);
    std::filesystem::create_directories(t.root + "/link");
    ck_assert_int_eq(symlink(procs.c_str(), (t.root + "/link/cgroup.procs").c_str()), 0);
    ck_assert(!move_to_cgroup(t.root + "/link", 7).ok());
}
END_TEST

struct OomCase {
    const char *text;  // nullptr: no file
    long long want;
};
static const OomCase kOom[] = {
    {"low 0\nhigh 0\nmax 3\noom 2\noom_kill 1\n", 1},      // v2 memory.events
    {"oom_kill_disable 0\nunder_oom 0\noom_kill 5\n", 5},  // v1 memory.oom_control
    {"low 0\nhigh 0\n", -1},                               // no such key
    {nullptr, -7},                                         // no file: `absent`
};

START_TEST(oom_kill_counts) {
    Tree t;
    const OomCase &c = kOom[_i];
    std::string path = c.text ? t.put("memory.events", c.text) : t.root + "/memory.events";
    ck_assert_int_eq(oom_kill_count(path, -7), c.want);
}
END_TEST

// A container's OOM kills: its own cgroup below its pod's when the pod has
// one (v2: the job's extern step/k8s_pod_<uid>/<container cgroup>), else the
// job's cgroup this process is in; -1 when neither is there.
START_TEST(container_oom_kills_where_they_are) {
    Tree t;
    const std::string own = "0::/system.slice/slurmstepd.scope/job_42/step_extern/slurm\n";
    auto ctr = container_cgroup_name("main");
    ck_assert(ctr.ok());
    t.put("system.slice/slurmstepd.scope/job_42/step_extern/k8s_pod_u1/" + *ctr + "/memory.events",
          "oom 1\noom_kill 3\n");
    ck_assert_int_eq(container_oom_kills(own, "u1", 42, "main", t.root), 3);
    // The pod's container cgroup not made yet: 0, not the job's figure.
    ck_assert_int_eq(container_oom_kills(own, "u1", 42, "other-name", t.root), 0);
    // No pod: this process's own v2 cgroup.
    t.put("system.slice/slurmstepd.scope/job_42/step_extern/slurm/memory.events", "oom_kill 9\n");
    ck_assert_int_eq(container_oom_kills(own, "", 42, "main", t.root), 9);
    ck_assert_int_eq(container_oom_kills("", "", 42, "main", t.root), -1);
}
END_TEST

int main() {
    Suite *s = suite_create("cgroup_files");
    TCase *tc = tcase_create("cgroup_files");
    tcase_add_test(tc, membership_of_self_and_pid);
    tcase_add_test(tc, member_processes);
    tcase_add_test(tc, move_into_cgroup);
    tcase_add_loop_test(tc, oom_kill_counts, 0, sizeof kOom / sizeof kOom[0]);
    tcase_add_test(tc, container_oom_kills_where_they_are);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
