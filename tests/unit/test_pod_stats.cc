// k8s-shim/pod_stats: /proc/<pid>/stat usage fields (hostile command names
// included), the process tree below a supervisor, the cgroup files' figures
// (v1 and v2) and where they are.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "k8s-shim/pod_stats.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
// cmajflt utime stime cutime cstime priority nice threads itrealvalue
// starttime vsize rss ...
START_TEST(usage_fields) {
    ProcUsage u;
    ck_assert(parse_proc_usage(
        "77 (py) R 5 77 77 0 -1 0 0 0 0 0 120 30 7 3 20 0 4 0 999 1000 250 18446744073709551615\n",
        &u));
    ck_assert_int_eq(u.ppid, 5);
    ck_assert_uint_eq(u.utime, 120);
    ck_assert_uint_eq(u.stime, 30);
    ck_assert_uint_eq(u.cutime, 7);
    ck_assert_uint_eq(u.cstime, 3);
    ck_assert_uint_eq(u.rss_pages, 250);
    ck_assert_sstr_eq(u.comm, "py");
    // A command name with spaces and ')' cannot shift the fields.
    ck_assert(parse_proc_usage(
        "77 (a) 1 2 3 4 5 6 7 8 9 10 11 12 13 ) S 9 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 6 7",
        &u));
    ck_assert_int_eq(u.ppid, 9);
    ck_assert_sstr_eq(u.comm, "a) 1 2 3 4 5 6 7 8 9 10 11 12 13 ");
    ck_assert_uint_eq(u.utime + u.stime + u.cutime + u.cstime, 10);
    ck_assert_uint_eq(u.rss_pages, 7);
}
END_TEST

static const char *const kBadUsage[] = {
    "",
    "77 (x",
    "77 (x) S 1 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 6",              // no rss (field 24)
    "77 (x) S 1 1 1 0 -1 0 0 0 0 0 1 2 -3 4 20 0 1 0 5 6 7",           // negative cutime
    "77 (x) S -1 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 6 7",           // negative ppid
    "77 (x) S 1 1 1 0 -1 0 0 0 0 0 1x 2 3 4 20 0 1 0 5 6 7",           // garbage
    "77 (x)S 1 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 6 7",             // no space after ')'
    "77 (x) S 99999999999 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 6 7",  // ppid over int
};
START_TEST(usage_refused) {
    ProcUsage u{3, 1, 1, 1, 1, 1, "x"};
    ck_assert_msg(!parse_proc_usage(kBadUsage[_i], &u), "case %d", _i);
    ck_assert_int_eq(u.ppid, 3);  // untouched
    ck_assert_uint_eq(u.rss_pages, 1);
}
END_TEST

static ProcUsage proc(int ppid, uint64_t ticks, uint64_t rss, uint64_t reaped = 0,
                      const char *comm = "sh") {
    return ProcUsage{ppid, ticks, 0, reaped, 0, rss, comm};
}

// An image container: the supervisor (10), the --podman-main wrapper and
// `podman run` below it, conmon reparented to it, the container's processes
// below conmon. Only those count.
START_TEST(image_container_counts_its_own_processes) {
    ProcessTable t;
    t[10] = proc(1, 5, 100);
    t[11] = proc(10, 3, 400, 0, "slurm-k8s-shim");  // the wrapper
    t[12] = proc(11, 300, 9000, 0, "podman");       // podman run, waiting
    t[13] = proc(10, 20, 300, 0, "conmon");
    t[14] = proc(13, 100, 1000, 0, "sh");    // the container's main
    t[15] = proc(14, 50, 500, 0, "python");  // its child
    t[16] = proc(10, 1, 1, 0, "conmon");     // a conmon whose container has no process (yet)
    t[17] = proc(1, 1, 1, 0, "conmon");      // another job's
    TreeUsage u = image_container_usage(t, 10);
    ck_assert_uint_eq(u.processes, 2);
    ck_assert_uint_eq(u.cpu_ticks, 150);
    ck_assert_uint_eq(u.rss_pages, 1500);
    ck_assert_uint_eq(image_container_usage(t, 99).processes, 0);
    ck_assert_uint_eq(image_container_usage(t, 0).processes, 0);
}
END_TEST

START_TEST(tree_sums_descendants) {
    ProcessTable t;
    t[10] = proc(1, 5, 100, 40);  // the supervisor: its reaped children's 40 ticks count
    t[11] = proc(10, 100, 1000);  // the main
    t[12] = proc(11, 50, 500);    // a child of the main
    t[13] = proc(10, 7, 70);      // a daemon reparented to the supervisor
    t[20] = proc(1, 999, 9999);   // another container
    t[21] = proc(20, 999, 9999);
    TreeUsage u = tree_usage(t, 10);
    ck_assert_uint_eq(u.processes, 4);
    ck_assert_uint_eq(u.cpu_ticks, 5 + 40 + 100 + 50 + 7);
    ck_assert_uint_eq(u.rss_pages, 100 + 1000 + 500 + 70);
    ck_assert_uint_eq(tree_usage(t, 12).processes, 1);
    ck_assert_uint_eq(tree_usage(t, 99).processes, 0);  // gone
    ck_assert_uint_eq(tree_usage(t, 0).processes, 0);
    // A parent link back to the root (a pid reused while the table was read)
    // does not loop.
    t[10].ppid = 12;
    ck_assert_uint_eq(tree_usage(t, 10).processes, 4);
}
END_TEST

START_TEST(cgroup_figures) {
    // v2: cpu.stat usage_usec, memory.current minus inactive_file.
    auto v2 = cgroup_usage(true, "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n", "10000\n",
                           "anon 4000\nfile 6000\ninactive_file 2500\nactive_file 3500\n");
    ck_assert(v2.has_value());
    ck_assert_uint_eq(v2->cpu_ns, 1500000);
    ck_assert_uint_eq(v2->working_set_bytes, 7500);
    // v1: cpuacct.usage (ns), memory.usage_in_bytes minus total_inactive_file
    // (the hierarchy's, not the cgroup's own inactive_file).
    auto v1 = cgroup_usage(false, "987654321\n", "8192\n",
                           "inactive_file 1\ntotal_inactive_file 4096\ntotal_active_file 5\n");
    ck_assert(v1.has_value());
    ck_assert_uint_eq(v1->cpu_ns, 987654321);
    ck_assert_uint_eq(v1->working_set_bytes, 4096);
    // Never below 0.
    ck_assert_uint_eq(
        cgroup_usage(true, "usage_usec 1", "10", "inactive_file 20")->working_set_bytes, 0);
    // Missing or malformed figures: none.
    ck_assert(!cgroup_usage(true, "user_usec 1\n", "10", "inactive_file 1").has_value());
    ck_assert(!cgroup_usage(false, "x\n", "10", "total_inactive_file 1").has_value());
    ck_assert(!cgroup_usage(false, "1", "10", "inactive_file 1").has_value());
    ck_assert(!cgroup_usage(true, "usage_usec 1", "max", "inactive_file 1").has_value());
    ck_assert(
        !cgroup_usage(true, "usage_usec 99999999999999999999", "1", "inactive_file 1").has_value());
    ck_assert(!flat_keyed_value("usage_usecs 5\n", "usage_usec").has_value());
    ck_assert(flat_keyed_value("a 1\nusage_usec 5\n", "usage_usec") == 5u);
}
END_TEST

// A pod's own cgroups on a fake hierarchy: CPU from the agent's tree's
// cpuacct cgroup, the working set from the extern step's memory cgroup.
START_TEST(pod_cgroup_figures) {
    char tmpl[] = "/tmp/sk-podstats-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    std::string root = tmpl;
    std::string self =
        "9:cpuacct:/\n8:memory:/slurm_n1/uid_1/job_42/step_extern/slurm\n"
        "7:devices:/slurm_n1/uid_1/job_42/step_extern/slurm\n";
    auto none = read_pod_cgroup_usage(self, 42, "u1", root);
    ck_assert(!none.cpu_ns && !none.working_set_bytes);  // nothing there yet
    std::string cpu = root + "/cpuacct/slurm_k8s_n1/job_42/k8s_pod_u1";
    std::string mem = root + "/memory/slurm_n1/uid_1/job_42/step_extern/k8s_pod_u1";
    std::vector<std::string> dirs;  // made from the top, removed from the bottom
    for (const std::string &leaf : {cpu, mem})
        for (size_t at = root.size() + 1; at != std::string::npos;) {
            at = leaf.find('/', at + 1);
            std::string d = leaf.substr(0, at);
            if (mkdir(d.c_str(), 0755) == 0) dirs.push_back(d);
        }
    auto put = [](const std::string &path, const char *text) {
        FILE *f = fopen(path.c_str(), "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
    };
    put(cpu + "/cpuacct.usage", "123456789\n");
    put(mem + "/memory.usage_in_bytes", "10000\n");
    put(mem + "/memory.stat", "cache 1\ntotal_inactive_file 4000\n");
    auto u = read_pod_cgroup_usage(self, 42, "u1", root);
    ck_assert(u.cpu_ns && *u.cpu_ns == 123456789);
    ck_assert(u.working_set_bytes && *u.working_set_bytes == 6000);
    // Another job's, or a uid that is no name, reads nothing.
    ck_assert(!read_pod_cgroup_usage(self, 43, "u1", root).cpu_ns);
    ck_assert(!read_pod_cgroup_usage(self, 42, "../u1", root).cpu_ns);
    for (const std::string &f :
         {cpu + "/cpuacct.usage", mem + "/memory.usage_in_bytes", mem + "/memory.stat"})
        ck_assert_int_eq(unlink(f.c_str()), 0);
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it)
        ck_assert_int_eq(rmdir(it->c_str()), 0);
    ck_assert_int_eq(rmdir(root.c_str()), 0);
}
END_TEST

START_TEST(cgroup_dirs) {
    auto v2 =
        job_cgroup_files(slurm_job_cgroups("0::/system.slice/slurmstepd.scope/job_42/step_0\n", 42),
                         "/sys/fs/cgroup");
    ck_assert(v2.v2);
    ck_assert_sstr_eq(v2.cpu_dir, "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42");
    ck_assert_sstr_eq(v2.memory_dir, v2.cpu_dir);
    auto v1 = job_cgroup_files(slurm_job_cgroups("12:memory:/slurm/uid_1000/job_42/step_0\n"
                                                 "4:cpu,cpuacct:/slurm/uid_1000/job_42/step_0\n"
                                                 "1:name=systemd:/user.slice/job_42\n"
                                                 "0::/user.slice\n",
                                                 42),
                               "/sys/fs/cgroup");
    ck_assert(!v1.v2);
    ck_assert_sstr_eq(v1.cpu_dir, "/sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000/job_42");
    ck_assert_sstr_eq(v1.memory_dir, "/sys/fs/cgroup/memory/slurm/uid_1000/job_42");
    // Another job's cgroup, or none: nothing to read.
    auto other = job_cgroup_files(slurm_job_cgroups("0::/system.slice/job_7\n", 42));
    ck_assert(other.cpu_dir.empty() && other.memory_dir.empty());
}
END_TEST

START_TEST(own_process_measured) {
    ProcessTable t = read_process_table();
    ck_assert(t.count(getpid()));
    ck_assert_int_eq(t[getpid()].ppid, getppid());
    ck_assert(t[getpid()].rss_pages > 0);
    volatile uint64_t x = 0;  // some CPU of our own
    // Burn a little, then look again (the table is read only between rounds:
    // walking it on every iteration made the loop slower than its timeout).
    for (int round = 0; round < 400 && tree_usage(t, getpid()).cpu_ticks == 0; round++) {
        for (uint64_t i = 0; i < 5000000; i++)
            x = x + i;
        t = read_process_table();
    }
    ck_assert(tree_usage(t, getpid()).cpu_ticks > 0);
    ck_assert_uint_eq(ticks_to_ns(1) * static_cast<uint64_t>(sysconf(_SC_CLK_TCK)), 1000000000);
    ck_assert_uint_eq(pages_to_bytes(2), 2 * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
}
END_TEST

namespace {

std::string make_tree() {
    char tmpl[] = "/tmp/sk-du-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    return tmpl;
}

void write(const std::string &path, size_t bytes) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    std::string data(bytes, 'x');
    ck_assert_int_eq(::write(fd, data.data(), data.size()), static_cast<ssize_t>(bytes));
    fsync(fd);
    close(fd);
}

}  // namespace

// A pod's directory as the shim keeps it: each entry's subtree apart (a
// container's logs), each inode once, symlinks counted as themselves and
// never followed (a link to a big file or to / adds nothing of theirs).
START_TEST(disk_use_of_a_tree) {
    std::string d = make_tree();
    std::string big = d + "-big";
    write(big, 1 << 20);
    ck_assert_int_eq(mkdir((d + "/main").c_str(), 0755), 0);
    write(d + "/main/0.log", 20000);
    write(d + "/main/0.log.1", 5000);
    ck_assert_int_eq(link((d + "/main/0.log").c_str(), (d + "/main/again").c_str()), 0);
    ck_assert_int_eq(symlink(big.c_str(), (d + "/main/1.log").c_str()), 0);
    ck_assert_int_eq(symlink("/", (d + "/root").c_str()), 0);
    write(d + "/pod.json", 100);

    auto du = dir_disk_use(d);
    ck_assert_msg(du.ok(), "%s", du.message().c_str());
    ck_assert(!du->capped);
    ck_assert_uint_eq(du->entries, 7);
    const proto::DiskUse &main = du->by_child["main"];
    // main, 0.log (= again), 0.log.1, the link 1.log: 4 inodes.
    ck_assert_uint_eq(main.inodes, 4);
    ck_assert_uint_ge(main.bytes, 25000);
    ck_assert_uint_lt(main.bytes, 1 << 20);  // the big file is not counted
    ck_assert_uint_eq(du->by_child["root"].inodes, 1);
    ck_assert_uint_eq(du->total.inodes, 1 + 4 + 1 + 1);
    ck_assert_uint_lt(du->total.bytes, 1 << 20);
    ck_assert_uint_ge(du->total.bytes, main.bytes + du->by_child["pod.json"].bytes);

    // The directory itself a symlink: refused, not followed.
    ck_assert_int_eq(symlink(d.c_str(), (d + "-link").c_str()), 0);
    auto via_link = dir_disk_use(d + "-link");
    ck_assert(!via_link.ok() && via_link.error() == Error::Io);
    ck_assert(dir_disk_use(d + "-none").error() == Error::NotFound);
    // NOLINTNEXTLINE(cert-env33-c): rm -rf of the test's own mkdtemp directories
    ck_assert_int_eq(system(("rm -rf " + d + " " + d + "-big " + d + "-link").c_str()), 0);
}
END_TEST

// Bounded: a tree with more entries or levels than allowed is counted up
// to the bound and says so.
START_TEST(disk_use_bounded) {
    std::string d = make_tree();
    for (int i = 0; i < 50; i++)
        write(d + "/f" + std::to_string(i), 1);
    auto du = dir_disk_use(d, {10, 16});
    ck_assert(du.ok() && du->capped);
    ck_assert_uint_eq(du->entries, 10);
    ck_assert_uint_eq(du->total.inodes, 11);  // the directory and 10 files
    du = dir_disk_use(d, {50, 16});
    ck_assert(du.ok() && !du->capped);

    std::string deep = d + "/a";
    for (int i = 0; i < 5; i++, deep += "/a")
        ck_assert_int_eq(mkdir(deep.c_str(), 0755), 0);
    du = dir_disk_use(d, {1000, 3});
    ck_assert(du.ok() && du->capped);
    du = dir_disk_use(d, {1000, 5});
    ck_assert(du.ok() && !du->capped);
    ck_assert_uint_eq(du->by_child["a"].inodes, 5);
    // NOLINTNEXTLINE(cert-env33-c): rm -rf of the test's own mkdtemp directory
    ck_assert_int_eq(system(("rm -rf " + d).c_str()), 0);
}
END_TEST

int main() {
    Suite *s = suite_create("pod_stats");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, usage_fields);
    tcase_add_loop_test(tc, usage_refused, 0, TABLE_SIZE(kBadUsage));
    tcase_add_test(tc, tree_sums_descendants);
    tcase_add_test(tc, image_container_counts_its_own_processes);
    tcase_add_test(tc, cgroup_figures);
    tcase_add_test(tc, cgroup_dirs);
    tcase_add_test(tc, pod_cgroup_figures);
    tcase_add_test(tc, own_process_measured);
    tcase_add_test(tc, disk_use_of_a_tree);
    tcase_add_test(tc, disk_use_bounded);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
