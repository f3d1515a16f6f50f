// common/procfs: /proc/<pid>/stat parsing (hostile command names included), mountinfo
// and the identity of a process by pid and start time.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/procfs.h"
#include "tests/unit/check_main.h"

using namespace sk;

struct StatCase {
    const char *text;
    bool ok;
    char state;
    uint64_t start;
    int ppid;
};
// Fields 1..22: pid (comm) state ppid pgrp session tty tpgid flags minflt
// cminflt majflt cmajflt utime stime cutime cstime priority nice threads
// itrealvalue starttime ...
static const StatCase kStat[] = {
    {"1234 (sleep) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 1000 200\n", true,
     'S', 98765, 1},
    // A command name with spaces and ')' cannot shift the fields.
    {"1234 (a) Z 9 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 ) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 "
     "16 17 18 777 1 2\n",
     true, 'R', 777, 1},
    {"1234 (x) Z 7 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", true, 'Z', 5, 7},
    {"1234 (x) S -1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", false, 0, 0, 0},  // ppid signed
    {"1234 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0", false, 0, 0, 0},         // no field 22
    {"1234 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 0", false, 0, 0, 0},    // signed
    {"1234 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5x 0", false, 0, 0, 0},    // garbage
    {"1234 (x)S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0", false, 0, 0, 0},  // no space after ')'
    {"1234 (x) SS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0", false, 0, 0,
     0},  // state not a letter
    {"1234 (x", false, 0, 0, 0},
    {"", false, 0, 0, 0},
};
START_TEST(stat_table) {
    const auto &c = kStat[_i];
    ProcStat st{'?', 1, 3};
    ck_assert_msg(parse_proc_stat(c.text, &st) == c.ok, "case %d", _i);
    ck_assert_int_eq(st.state, c.ok ? c.state : '?');  // untouched on failure
    ck_assert_uint_eq(st.start_ticks, c.ok ? c.start : 1);
    ck_assert_int_eq(st.ppid, c.ok ? c.ppid : 3);
}
END_TEST

START_TEST(live_process_identity) {
    uint64_t me = proc_start_ticks(getpid());
    ck_assert(me > 0);
    ProcStat st;
    ck_assert(read_proc_stat(getpid(), &st));
    ck_assert_uint_eq(st.start_ticks, me);
    ck_assert_int_eq(st.ppid, getppid());
    ck_assert(!process_gone(getpid(), me));
    ck_assert(process_gone(getpid(), me + 1));  // a reused pid
    ck_assert(process_gone(getpid(), 0));       // never known
    ck_assert(process_gone(0x3ffffff, 1));      // no such process
    ck_assert_uint_eq(proc_start_ticks(0), 0);
    ck_assert_uint_eq(proc_start_ticks(-1), 0);
    auto refused = read_proc_file(-1, "stat");
    ck_assert(!refused.ok() && refused.error() == Error::InvalidArgument);
    auto gone = read_proc_file(0x3ffffff, "stat");
    ck_assert(!gone.ok() && gone.error() == Error::NotFound);
    auto cg = read_proc_file(getpid(), "cgroup");
    ck_assert(cg.ok() && !cg->empty());
    auto small = read_proc_file(getpid(), "stat", 8);
    ck_assert(!small.ok() && small.error() == Error::TooLarge);
}
END_TEST

// A zombie counts as gone: its pid must not be signalled as the process it was.
START_TEST(zombie_is_gone) {
    pid_t child = fork();
    ck_assert(child >= 0);
    if (child == 0) _exit(0);
    ProcStat st;
    bool ok = read_proc_stat(child, &st);
    for (int i = 0; i < 200 && ok && st.state != 'Z'; i++) {
        usleep(10000);
        ok = read_proc_stat(child, &st);
    }
    ck_assert(ok && st.state == 'Z');
    ck_assert_uint_eq(proc_start_ticks(child), 0);
    ck_assert(process_gone(child, st.start_ticks));
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
}
END_TEST

// mountinfo: optional fields before " - ", escapes decoded, junk skipped;
// this process's own has its root.
START_TEST(mountinfo_parsed) {
    auto m = parse_mountinfo(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "40 22 0:35 / /run/a\\040b rw master:3 shared:7 - tmpfs slurm-k8s:job_1_n1:u rw,size=8k\n"
        "x y\n"
        "41 22 0:36 / /no-dash rw tmpfs src\n");
    ck_assert_uint_eq(m.size(), 2);
    ck_assert_int_eq(m[0].id, 22);
    ck_assert_sstr_eq(m[1].mount_point, "/run/a b");
    ck_assert_sstr_eq(m[1].fstype, "tmpfs");
    ck_assert_sstr_eq(m[1].source, "slurm-k8s:job_1_n1:u");
    auto self = read_proc_file(getpid(), "mountinfo", size_t{16} << 20);
    ck_assert(self.ok());
    bool root = false;
    for (const auto &e : parse_mountinfo(*self))
        root = root || e.mount_point == "/";
    ck_assert(root);
}
END_TEST

int main() {
    Suite *s = suite_create("procfs");
    TCase *tc = tcase_create("procfs");
    tcase_add_loop_test(tc, stat_table, 0, TABLE_SIZE(kStat));
    tcase_add_test(tc, live_process_identity);
    tcase_add_test(tc, zombie_is_gone);
    tcase_add_test(tc, mountinfo_parsed);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
