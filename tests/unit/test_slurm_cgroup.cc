// common/slurm_cgroup: the Slurm job of a process from /proc/<pid>/cgroup.
// The agent authenticates shims with it, so the table holds the forgeries a
// job's user could make as well as Slurm's real layouts.
#include <string>

#include "common/slurm_cgroup.h"
#include "common/strings.h"
#include "tests/unit/check_main.h"

using namespace sk;

struct DirCase {
    const char *path;
    const char *want;  // slurm_job_dir(path, 42)
};
static const DirCase kDir[] = {
    {"/slurm/uid_1000/job_42/step_extern", "/slurm/uid_1000/job_42"},
    {"/slurm_n1/uid_1000/job_42", "/slurm_n1/uid_1000/job_42"},
    {"/system.slice/slurmstepd.scope/job_42/step_0/user/task_0",
     "/system.slice/slurmstepd.scope/job_42"},
    {"/slurm/uid_1000/job_420/step_0", ""},
    {"/slurm/uid_1000/job_4/step_0", ""},
    {"/slurm/uid_1000/job_042/step_0", ""},  // not how Slurm names job 42
    {"/slurm/uid_1000/xjob_42", ""},
    {"/slurm/uid_1000/job_42x", ""},
    {"/slurm/uid_1000/job_", ""},
    {"/slurm/uid_1000/job_+42", ""},
    {"/slurm/uid_1000/job_7/step_0/job_42", ""},                       // below another job
    {"/slurm/uid_1000/job_x/job_42", "/slurm/uid_1000/job_x/job_42"},  // job_x is no job
    {"/slurm/uid_1000/job_99999999999/job_42", "/slurm/uid_1000/job_99999999999/job_42"},
    {"/", ""},
    {"", ""},
};
START_TEST(job_dir_table) {
    ck_assert_sstr_eq(slurm_job_dir(kDir[_i].path, 42), kDir[_i].want);
}
END_TEST

static std::string describe(const std::vector<CgroupLine> &lines) {
    std::vector<std::string> parts;
    parts.reserve(lines.size());
    for (const auto &l : lines)
        parts.push_back(l.controllers + ":" + l.path);
    return join(parts, " ");
}

struct JobCase {
    const char *text;
    const char *want;  // describe(slurm_job_cgroups(text, 42))
};
static const JobCase kJob[] = {
    // Slurm cgroup/v2: the unified line.
    {"0::/system.slice/slurmstepd.scope/job_42/step_extern/user/task_0\n",
     ":/system.slice/slurmstepd.scope/job_42"},
    // Slurm cgroup/v1: the controllers; systemd's named hierarchy and the
    // unified line of a hybrid host never count.
    {"12:freezer:/slurm_n1/uid_1000/job_42\n"
     "11:devices:/slurm_n1/uid_1000/job_42/step_extern\n"
     "9:memory:/\n"
     "8:cpu,cpuacct:/slurm/uid_1000/job_77/step_0\n"
     "1:name=systemd:/slurm_n1/uid_1000/job_42\n"
     "0::/\n",
     "freezer:/slurm_n1/uid_1000/job_42 devices:/slurm_n1/uid_1000/job_42"},
    // Forgeries from a login shell: a systemd-delegated subtree named job_42.
    {"1:name=systemd:/user.slice/user-1000.slice/user@1000.service/job_42\n"
     "5:devices:/user.slice\n"
     "0::/user.slice/user-1000.slice/user@1000.service/job_42\n",
     ""},
    {"12:freezer:/\n0::/user.slice/user-1000.slice/user@1000.service/app.slice/job_42\n", ""},
    {"1:name=systemd:/user.slice/job_42\n0::/user.slice/user-1000.slice/session-3.scope\n", ""},
    // Malformed lines are skipped.
    {"garbage\n:freezer:/slurm/uid_1/job_42\n3:devices\n4:cpuset:slurm/uid_1/job_42\n", ""},
    {"", ""},
};
START_TEST(job_cgroups_table) {
    ck_assert_sstr_eq(describe(slurm_job_cgroups(kJob[_i].text, 42)), kJob[_i].want);
}
END_TEST

START_TEST(parse_lines) {
    auto lines = parse_proc_cgroup("12:cpu,cpuacct:/a/b\n0::/\n\nbad\n1:name=systemd:/c");
    ck_assert_sstr_eq(describe(lines), "cpu,cpuacct:/a/b :/ name=systemd:/c");
}
END_TEST

int main() {
    Suite *s = suite_create("slurm_cgroup");
    TCase *tc = tcase_create("slurm_cgroup");
    tcase_add_loop_test(tc, job_dir_table, 0, TABLE_SIZE(kDir));
    tcase_add_loop_test(tc, job_cgroups_table, 0, TABLE_SIZE(kJob));
    tcase_add_test(tc, parse_lines);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
