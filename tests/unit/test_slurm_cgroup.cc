// common/cgroup/slurm_cgroup: the Slurm job of a process from /proc/<pid>/cgroup.
// The agent authenticates shims with it, so the table holds the forgeries a
// job's user could make as well as Slurm's real layouts.
#include <string>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "common/fs.h"
#include "common/cgroup/pod_cgroup.h"
#include "common/cgroup/slurm_cgroup.h"
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

// ---- pods' own cgroups (common/cgroup/pod_cgroup.h) ----
// The shim's /proc/<pid>/cgroup as Slurm 22.05 (cgroup v1) leaves it in the
// extern step.
static const char kShimV1[] =
    "12:pids:/\n"
    "11:freezer:/slurm_n1/uid_2001/job_7/step_extern\n"
    "10:devices:/slurm_n1/uid_2001/job_7/step_extern\n"
    "9:cpu,cpuacct:/slurm_n1/uid_2001/job_7/step_0\n"
    "4:memory:/init.scope/12\n"
    "1:name=systemd:/\n"
    "0::/\n";

START_TEST(pod_parents) {
    auto p = pod_cgroup_parents(kShimV1, 7, {"devices"}, "/cg");
    ck_assert_msg(p.ok(), "%s", p.ok() ? "" : p.message().c_str());
    ck_assert_uint_eq(p->size(), 1);
    ck_assert_sstr_eq((*p)[0].controllers, "devices");
    ck_assert_sstr_eq((*p)[0].dir, "/cg/devices/slurm_n1/uid_2001/job_7/step_extern");
    // cpu,cpuacct places the shim in another step: no parent there; memory
    // and pids are outside the job.
    auto more = pod_cgroup_parents(kShimV1, 7, {"devices", "cpu", "memory", "pids"}, "/cg");
    ck_assert(more.ok() && more->size() == 1);
    auto other = pod_cgroup_parents(kShimV1, 8, {"devices"}, "/cg");
    ck_assert(!other.ok() && other.error() == Error::NotFound);
    ck_assert_msg(other.message().find("ConstrainDevices=yes") != std::string::npos, "%s",
                  other.message().c_str());
    // cgroup v2: the one parent, the extern step's directory, for the
    // shim in its "slurm" leaf (the measured layout); wanted does not apply.
    auto v2 = pod_cgroup_parents("0::/system.slice/n1_slurmstepd.scope/job_7/step_extern/slurm\n",
                                 7, {"devices"}, "/cg", {"cpu"});
    ck_assert_msg(v2.ok(), "%s", v2.ok() ? "" : v2.message().c_str());
    ck_assert_uint_eq(v2->size(), 1);
    ck_assert((*v2)[0].unified && !(*v2)[0].own);
    ck_assert_sstr_eq((*v2)[0].controllers, "");
    ck_assert_sstr_eq((*v2)[0].dir, "/cg/system.slice/n1_slurmstepd.scope/job_7/step_extern");
    // Another step, another job, a look-alike job: none.
    for (const char *no : {"0::/system.slice/s.scope/job_7/step_batch/user/task_0\n",
                           "0::/system.slice/s.scope/job_70/step_extern/slurm\n",
                           "0::/system.slice/s.scope/job_7/step_externx\n", "0::/\n"}) {
        auto r = pod_cgroup_parents(no, 7, {"devices"}, "/cg");
        ck_assert_msg(!r.ok() && r.error() == Error::NotFound, "%s", no);
    }
    // A deeper path below step_extern still names step_extern; a step
    // named step_externx does not.
    ck_assert_sstr_eq((*pod_cgroup_parents("3:devices:/s/uid_1/job_7/step_extern/slurm\n", 7,
                                           {"devices"}, "/c"))[0]
                          .dir,
                      "/c/devices/s/uid_1/job_7/step_extern");
    ck_assert(
        !pod_cgroup_parents("3:devices:/s/uid_1/job_7/step_externx\n", 7, {"devices"}, "/c").ok());
    // With ConstrainRAMSpace the shim is in the extern step's memory cgroup too.
    std::string both = kShimV1;
    both.replace(both.find("4:memory:/init.scope/12"), 23,
                 "4:memory:/slurm_n1/uid_2001/job_7/step_extern");
    auto mem = pod_cgroup_parents(both, 7, {"devices", "memory"}, "/cg");
    ck_assert(mem.ok() && mem->size() == 2);
    ck_assert_sstr_eq((*mem)[1].dir, "/cg/memory/slurm_n1/uid_2001/job_7/step_extern");
    ck_assert(unified_only(parse_proc_cgroup("0::/a\n")));
    ck_assert(!unified_only(parse_proc_cgroup(kShimV1)));
    ck_assert(!unified_only(parse_proc_cgroup("")));
    ck_assert_sstr_eq(*pod_cgroup_name("0a1b-2c"), "k8s_pod_0a1b-2c");
    for (const char *bad : {"", "../x", "A", "a/b", "a.b"})
        ck_assert_msg(!pod_cgroup_name(bad).ok(), "%s", bad);
    ck_assert(!pod_cgroup_name(std::string(65, 'a')).ok());
}
END_TEST

// cpu, cpuacct and pids: the project's own tree of the job, in each v1
// hierarchy naming one of them, once the job has a Slurm parent.
START_TEST(pod_own_parents) {
    auto p = pod_cgroup_parents(kShimV1, 7, {"devices"}, "/cg", {"cpu", "cpuacct", "pids"});
    ck_assert_msg(p.ok(), "%s", p.ok() ? "" : p.message().c_str());
    ck_assert_uint_eq(p->size(), 3);
    ck_assert(!(*p)[0].own);
    ck_assert_sstr_eq((*p)[1].controllers, "pids");
    ck_assert_sstr_eq((*p)[1].dir, "/cg/pids/slurm_k8s_n1/job_7");
    ck_assert((*p)[1].own);
    ck_assert_sstr_eq((*p)[2].controllers, "cpu,cpuacct");  // one dir for the co-mounted pair
    ck_assert_sstr_eq((*p)[2].dir, "/cg/cpu,cpuacct/slurm_k8s_n1/job_7");
    // No Slurm parent (the job is not confined): no own tree either.
    auto none = pod_cgroup_parents(kShimV1, 8, {"devices"}, "/cg", {"cpu", "pids"});
    ck_assert(!none.ok() && none.error() == Error::NotFound);
    // The sweep's list ignores named hierarchies and the unified line.
    auto dirs = own_job_cgroup_dirs(kShimV1, 7, {"cpu", "pids"}, "/cg");
    ck_assert_uint_eq(dirs.size(), 2);
    ck_assert_sstr_eq(dirs[0], "/cg/pids/slurm_k8s_n1/job_7");
    ck_assert(own_job_cgroup_dirs("1:name=systemd:/\n0::/\n", 7, {"cpu"}, "/cg").empty());
    // One tree per slurmd: two nodes of a job on one host (multiple slurmd,
    // "/slurm_<node>") never share a directory, so one node's end-of-job
    // sweep cannot kill the other's pods; Slurm's default "/slurm" keeps
    // the plain name.
    std::string n2(kShimV1);
    for (size_t at; (at = n2.find("slurm_n1")) != std::string::npos;)
        n2.replace(at, 8, "slurm_n2");
    ck_assert_sstr_eq(own_job_cgroup_dirs(n2, 7, {"pids"}, "/cg")[0],
                      "/cg/pids/slurm_k8s_n2/job_7");
    std::string plain(kShimV1);
    for (size_t at; (at = plain.find("slurm_n1")) != std::string::npos;)
        plain.replace(at, 8, "slurm");
    ck_assert_sstr_eq(own_job_cgroup_dirs(plain, 7, {"pids"}, "/cg")[0],
                      "/cg/pids/slurm_k8s/job_7");
    ck_assert_sstr_eq(own_cgroup_tree("3:devices:/slurm_../uid_1/job_7/step_extern\n", 7),
                      "slurm_k8s");  // not a name: the plain tree
    // As the kubelet turns CPU into cgroup values.
    ck_assert_int_eq(cpu_quota_for(500), 50000);
    ck_assert_int_eq(cpu_quota_for(2000), 200000);
    ck_assert_int_eq(cpu_quota_for(1), 1000);  // the kernel's minimum
    ck_assert_int_eq(cpu_quota_for(0), 0);
    ck_assert_int_eq(cpu_shares_for(250), 256);
    ck_assert_int_eq(cpu_shares_for(0), 2);
    ck_assert_int_eq(cpu_shares_for(1000000), 262144);
}
END_TEST

// A pod's memory limit as the kubelet sizes its cgroup.
START_TEST(cpu_weight_from_shares) {
    // The kubelet's conversion: 2 -> 1, 1024 (one CPU) -> 39, 262144 -> 10000.
    ck_assert_int_eq(cpu_weight_for_shares(2), 1);
    ck_assert_int_eq(cpu_weight_for_shares(1024), 39);
    ck_assert_int_eq(cpu_weight_for_shares(262144), 10000);
    ck_assert_int_eq(cpu_weight_for_shares(0), 1);
}
END_TEST

START_TEST(pod_memory_limits) {
    const int64_t Mi = 1 << 20;
    ck_assert_int_eq(pod_memory_limit({64 * Mi, 32 * Mi}, {}, 0), 96 * Mi);
    ck_assert_int_eq(pod_memory_limit({64 * Mi}, {128 * Mi, 16 * Mi}, 0), 128 * Mi);
    // A container without a limit: the node's lent memory, or none.
    ck_assert_int_eq(pod_memory_limit({64 * Mi, 0}, {}, 1024 * Mi), 1024 * Mi);
    ck_assert_int_eq(pod_memory_limit({64 * Mi}, {0}, 0), 0);
    ck_assert_int_eq(pod_memory_limit({}, {}, 5), 5);
}
END_TEST

// ---- cgroup v2 on a real kernel (the QEMU guest of tests/vm runs it:
// tests/vm/smoke.sh; elsewhere it skips, saying so) ----

static std::string slurp(const std::string &path) {
    std::ifstream f(path);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    while (!s.empty() && s.back() == '\n')
        s.pop_back();
    return s;
}

static bool put(const std::string &path, const std::string &text) {
    std::ofstream f(path);
    f << text << std::flush;
    return f.good();
}

// The errno of open(path) by pid's cgroup: the child opens on a byte from
// the pipe and exits with 0 or errno.
struct Opener {
    pid_t pid = -1;
    int to = -1, from = -1;
    Opener() {
        int a[2], b[2];
        ck_assert(pipe(a) == 0 && pipe(b) == 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(a[1]);
            close(b[0]);
            char path[64];
            for (;;) {
                ssize_t n = read(a[0], path, sizeof path - 1);
                if (n <= 0) _exit(0);
                path[n] = 0;
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                unsigned char r = fd >= 0 ? 0 : static_cast<unsigned char>(errno);
                if (fd >= 0) close(fd);
                if (write(b[1], &r, 1) != 1) _exit(1);
            }
        }
        close(a[0]);
        close(b[1]);
        to = a[1];
        from = b[0];
    }
    int open_errno(const char *path) {
        ck_assert(write(to, path, strlen(path)) == static_cast<ssize_t>(strlen(path)));
        unsigned char r = 255;
        ck_assert_int_eq(read(from, &r, 1), 1);
        return r;
    }
    ~Opener() {
        close(to);
        close(from);
        if (pid > 0) waitpid(pid, nullptr, 0);
    }
};

// Slurm's layout of a job on v2 (cpuset cpu memory below the job, no pids;
// the stepd in step_extern/slurm), then a pod's cgroup by the agent's
// function: its limits, pids enabled below the job, the pods' caps on
// step_extern, and its device program deciding for a process in it
// (/dev/zero stands for the pod's GPU, /dev/null for a GPU it was not given:
// both of major 1, so every other minor 0-253 of it, /dev/full, is denied).
START_TEST(pod_enter_v2_kernel) {
    std::string self = slurp("/proc/self/cgroup");
    if (geteuid() != 0 || self.rfind("0::", 0) != 0 || self.find('\n') != std::string::npos) {
        fprintf(stderr, "SKIP pod_enter_v2_kernel: needs root on a pure cgroup v2 host\n");
        return;
    }
    const std::string root = "/sys/fs/cgroup";
    ck_assert(put(root + "/cgroup.subtree_control", "+cpu +memory +pids"));
    std::string base = root + "/sk_unit_" + std::to_string(getpid());
    std::string job = base + "/job_7", step = job + "/step_extern";
    ck_assert(mkdir(base.c_str(), 0755) == 0);
    // (cluster.sh enables pids on the node's scope, as systemd does)
    ck_assert(put(base + "/cgroup.subtree_control", "+cpu +memory +pids"));
    ck_assert(mkdir(job.c_str(), 0755) == 0);
    ck_assert(put(job + "/cgroup.subtree_control", "+cpu +memory"));
    ck_assert(mkdir(step.c_str(), 0755) == 0);
    ck_assert(put(step + "/cgroup.subtree_control", "+cpu +memory"));
    ck_assert(mkdir((step + "/slurm").c_str(), 0755) == 0);
    Opener stepd;  // stands for the slurmstepd in step_extern/slurm
    ck_assert(put(step + "/slurm/cgroup.procs", std::to_string(stepd.pid)));

    std::string shim_line = "0::" + step.substr(root.size()) + "/slurm\n";
    auto parents = pod_cgroup_parents(shim_line, 7, {"devices", "memory"}, root);
    ck_assert_msg(parents.ok(), "%s", parents.ok() ? "" : parents.message().c_str());
    ck_assert_sstr_eq((*parents)[0].dir, step);

    struct stat zero, null;
    ck_assert(stat("/dev/zero", &zero) == 0 && stat("/dev/null", &null) == 0);
    PodCgroupSettings set;
    set.gpus = {CharDevice{0, "/dev/zero", major(zero.st_rdev), minor(zero.st_rdev)}};
    set.deny = {CharDevice{1, "/dev/null", major(null.st_rdev), minor(null.st_rdev)}};
    set.memory_limit = 64 << 20;
    set.cpu_quota_us = 50000;
    set.cpu_shares = 1024;
    set.pids_max = 32;
    set.pods_memory_limit = 512 << 20;
    set.pods_cpu_quota_us = 200000;
    set.container = "main";
    set.container_memory_limit = 32 << 20;
    set.container_cpu_quota_us = 20000;
    Opener pod;
    Status st = enter_pod_cgroup(*parents, "uid-1", set, pod.pid);
    ck_assert_msg(st.ok(), "%s", st.message().c_str());
    std::string dir = step + "/k8s_pod_uid-1";
    ck_assert_sstr_eq(slurp("/proc/" + std::to_string(pod.pid) + "/cgroup"),
                      "0::" + dir.substr(root.size()) + "/ctr_main");
    ck_assert_sstr_eq(slurp(dir + "/ctr_main/memory.max"), std::to_string(32 << 20));
    ck_assert_sstr_eq(slurp(dir + "/ctr_main/cpu.max"), "20000 100000");
    ck_assert_sstr_eq(slurp(dir + "/memory.max"), std::to_string(64 << 20));
    ck_assert_sstr_eq(slurp(dir + "/cpu.max"), "50000 100000");
    ck_assert_sstr_eq(slurp(dir + "/cpu.weight"), "39");
    ck_assert_sstr_eq(slurp(dir + "/pids.max"), "32");
    ck_assert_sstr_eq(slurp(step + "/memory.max"),
                      std::to_string((512 << 20) + kShimMemoryHeadroom));
    ck_assert_sstr_eq(slurp(step + "/cpu.max"), "200000 100000");
    ck_assert_msg(slurp(job + "/cgroup.subtree_control").find("pids") != std::string::npos,
                  "pids not enabled below the job: %s",
                  slurp(job + "/cgroup.subtree_control").c_str());
    ck_assert_int_eq(pod.open_errno("/dev/zero"), 0);
    ck_assert_int_eq(pod.open_errno("/dev/null"), EPERM);
    ck_assert_int_eq(pod.open_errno("/dev/full"), EPERM);
    ck_assert_int_ne(pod.open_errno("/dev/tty"), EPERM);
    ck_assert_int_eq(stepd.open_errno("/dev/null"), 0);  // the rest of the job: untouched
    // A supervisor of the pod's other container: a directory of its own.
    Opener second;
    set.container = "side";
    set.container_memory_limit = 0;
    st = enter_pod_cgroup(*parents, "uid-1", set, second.pid);
    ck_assert_msg(st.ok(), "%s", st.message().c_str());
    ck_assert_int_eq(second.open_errno("/dev/null"), EPERM);
    ck_assert_sstr_eq(slurp(dir + "/ctr_side/memory.max"), "max");
    auto uids = pod_cgroup_uids(*parents);
    ck_assert(uids.size() == 1 && uids[0] == "uid-1");
    // Busy while a process is in it (each container's directory, then the
    // pod's, which still holds them); gone once none is.
    ck_assert_uint_eq(remove_pod_cgroup(*parents, "uid-1").size(), 3);
    kill(pod.pid, SIGKILL);
    kill(second.pid, SIGKILL);
    kill(stepd.pid, SIGKILL);
    waitpid(pod.pid, nullptr, 0);
    waitpid(second.pid, nullptr, 0);
    waitpid(stepd.pid, nullptr, 0);
    pod.pid = second.pid = stepd.pid = -1;
    std::vector<std::string> left;
    for (int i = 0; i < 100; i++) {  // the kernel frees an emptied cgroup asynchronously
        left = remove_pod_cgroup(*parents, "uid-1");
        if (left.empty()) break;
        usleep(20000);
    }
    ck_assert_msg(left.empty(), "%s", left.empty() ? "" : left[0].c_str());
    for (const std::string &d : {step + "/slurm", step, job, base})
        ck_assert_msg(rmdir(d.c_str()) == 0, "rmdir %s: %s", d.c_str(), strerror(errno));
}
END_TEST

static void touch(const std::string &path) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

// On a fake hierarchy (plain directories and files): the pod's directory is
// made under the parent, the deny rules go to its devices.deny and the pid to
// its cgroup.procs; listing and removal find it; a symlinked parent is not
// entered; a bad uid makes nothing.
START_TEST(pod_enter_and_remove) {
    char tmpl[] = "/tmp/sk-podcg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    std::string root = tmpl;
    std::string step = root + "/devices/job_7/step_extern";
    ck_assert_int_eq(mkdir((root + "/devices").c_str(), 0755), 0);
    ck_assert_int_eq(mkdir((root + "/devices/job_7").c_str(), 0755), 0);
    ck_assert_int_eq(mkdir(step.c_str(), 0755), 0);
    std::vector<PodCgroupParent> parents = {{"devices", step}};
    // A fresh directory of a real cgroupfs has its files; this one has none,
    // so the first write fails, naming the file, after the mkdir.
    PodCgroupSettings deny;
    deny.deny.resize(2);
    deny.deny[0].major = deny.deny[1].major = 195;
    deny.deny[0].minor = 0;
    deny.deny[1].minor = 3;
    deny.memory_limit = 64 << 20;
    deny.container = "main";
    auto st = enter_pod_cgroup(parents, "u1", deny, 4242);
    ck_assert(!st.ok() && st.message().find("k8s_pod_u1/devices.deny") != std::string::npos);
    std::string pod = step + "/k8s_pod_u1";
    touch(pod + "/devices.deny");
    // Then the container's directory below it, where the pid goes.
    st = enter_pod_cgroup(parents, "u1", deny, 4242);
    ck_assert(!st.ok() &&
              st.message().find("k8s_pod_u1/ctr_main/cgroup.procs") != std::string::npos);
    touch(pod + "/ctr_main/cgroup.procs");
    st = enter_pod_cgroup(parents, "u1", deny, 4242);
    ck_assert_msg(st.ok(), "%s", st.ok() ? "" : st.message().c_str());
    ck_assert_sstr_eq(*read_file(pod + "/devices.deny", 4096), "c 195:0 rwmc 195:3 rwm");
    ck_assert_sstr_eq(*read_file(pod + "/ctr_main/cgroup.procs", 4096), "4242");
    // Its own memory limit on the container's directory, the pod's on the pod's.
    PodCgroupSettings ctr = deny;
    ctr.container_memory_limit = 32 << 20;
    std::vector<PodCgroupParent> ctr_mem = {{"memory", step}};
    touch(pod + "/memory.limit_in_bytes");
    ck_assert(!enter_pod_cgroup(ctr_mem, "u1", ctr, 4242).ok());  // no file in ctr_main yet
    touch(pod + "/ctr_main/memory.limit_in_bytes");
    ck_assert(enter_pod_cgroup(ctr_mem, "u1", ctr, 4242).ok());
    ck_assert_sstr_eq(*read_file(pod + "/ctr_main/memory.limit_in_bytes", 64), "33554432");
    ck_assert_sstr_eq(*read_file(pod + "/memory.limit_in_bytes", 64), "67108864");
    unlink((pod + "/ctr_main/memory.limit_in_bytes").c_str());
    unlink((pod + "/memory.limit_in_bytes").c_str());
    // A container name that is no DNS label makes no directory.
    PodCgroupSettings bad = deny;
    bad.container = "../x";
    ck_assert(!enter_pod_cgroup(parents, "u1", bad, 4242).ok());
    // Another hierarchy than devices gets no rules, only the pid; memory
    // its limit (and none when the pod has none: the job's applies).
    std::vector<PodCgroupParent> cpu = {{"cpu,cpuacct", step}};
    touch(pod + "/devices.deny");
    ck_assert(enter_pod_cgroup(cpu, "u1", deny, 7).ok());
    ck_assert_sstr_eq(*read_file(pod + "/devices.deny", 4096), "");
    std::vector<PodCgroupParent> mem = {{"memory", step}};
    ck_assert(!enter_pod_cgroup(mem, "u1", deny, 7).ok());  // no memory.limit_in_bytes yet
    touch(pod + "/memory.limit_in_bytes");
    ck_assert(enter_pod_cgroup(mem, "u1", deny, 7).ok());
    ck_assert_sstr_eq(*read_file(pod + "/memory.limit_in_bytes", 4096), "67108864");
    ck_assert_sstr_eq(*read_file(pod + "/devices.deny", 4096), "");
    // All pods together: the extern step's limit, the lent memory plus the
    // shim's headroom.
    PodCgroupSettings capped;
    capped.container = "main";
    capped.pods_memory_limit = 512 << 20;
    ck_assert(!enter_pod_cgroup(mem, "u1", capped, 7).ok());  // the step has no limit file here
    touch(step + "/memory.limit_in_bytes");
    ck_assert(enter_pod_cgroup(mem, "u1", capped, 7).ok());
    ck_assert_sstr_eq(*read_file(step + "/memory.limit_in_bytes", 64),
                      std::to_string((512 << 20) + kShimMemoryHeadroom).c_str());
    unlink((step + "/memory.limit_in_bytes").c_str());
    touch(pod + "/memory.limit_in_bytes");
    PodCgroupSettings plain;
    plain.container = "main";
    ck_assert(enter_pod_cgroup(mem, "u1", plain, 7).ok());
    ck_assert_sstr_eq(*read_file(pod + "/memory.limit_in_bytes", 4096), "");
    unlink((pod + "/memory.limit_in_bytes").c_str());
    ck_assert(!enter_pod_cgroup(parents, "../u1", deny, 1).ok());
    ck_assert_int_eq(symlink(step.c_str(), (root + "/link").c_str()), 0);
    ck_assert(!enter_pod_cgroup({{"devices", root + "/link"}}, "u1", deny, 1).ok());
    auto uids = pod_cgroup_uids(parents);
    ck_assert_uint_eq(uids.size(), 1);
    ck_assert_sstr_eq(uids[0], "u1");
    // Still holding files (a busy cgroup on a real cgroupfs): not removed,
    // the container's nor the pod's.
    ck_assert_uint_eq(remove_pod_cgroup(parents, "u1").size(), 2);
    unlink((pod + "/devices.deny").c_str());
    unlink((pod + "/ctr_main/cgroup.procs").c_str());
    ck_assert(remove_pod_cgroup(parents, "u1").empty());
    ck_assert(remove_pod_cgroup(parents, "u1").empty());  // already gone
    ck_assert(pod_cgroup_uids(parents).empty());
    unlink((root + "/link").c_str());

    // The own tree: made on first use below the hierarchy's root, the CPU
    // quota, period, shares and pids.max written; a symlink on the way is not
    // followed; the job directory goes once empty.
    ck_assert_int_eq(mkdir((root + "/cpu,cpuacct").c_str(), 0755), 0);
    std::vector<PodCgroupParent> own = {
        {"cpu,cpuacct", root + "/cpu,cpuacct/slurm_k8s/job_7", true}};
    PodCgroupSettings cpu_set;
    cpu_set.cpu_quota_us = 50000;
    cpu_set.cpu_shares = 256;
    cpu_set.pids_max = 64;
    cpu_set.container = "main";
    st = enter_pod_cgroup(own, "u2", cpu_set, 9);
    ck_assert(!st.ok() && st.message().find("k8s_pod_u2/cpu.cfs_period_us") != std::string::npos);
    std::string own_pod = root + "/cpu,cpuacct/slurm_k8s/job_7/k8s_pod_u2";
    for (const char *f :
         {"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.shares", "ctr_main/cgroup.procs"}) {
        mkdir((own_pod + "/ctr_main").c_str(), 0755);
        touch(own_pod + "/" + f);
    }
    st = enter_pod_cgroup(own, "u2", cpu_set, 9);
    ck_assert_msg(st.ok(), "%s", st.ok() ? "" : st.message().c_str());
    ck_assert_sstr_eq(*read_file(own_pod + "/cpu.cfs_period_us", 64), "100000");
    ck_assert_sstr_eq(*read_file(own_pod + "/cpu.cfs_quota_us", 64), "50000");
    ck_assert_sstr_eq(*read_file(own_pod + "/cpu.shares", 64), "256");
    ck_assert_sstr_eq(*read_file(own_pod + "/ctr_main/cgroup.procs", 64), "9");
    ck_assert_int_eq(mkdir((root + "/pids").c_str(), 0755), 0);
    ck_assert_int_eq(
        symlink((root + "/cpu,cpuacct/slurm_k8s").c_str(), (root + "/pids/slurm_k8s").c_str()), 0);
    std::vector<PodCgroupParent> pids = {{"pids", root + "/pids/slurm_k8s/job_7", true}};
    ck_assert(!enter_pod_cgroup(pids, "u2", cpu_set, 9).ok());
    unlink((root + "/pids/slurm_k8s").c_str());
    st = enter_pod_cgroup(pids, "u2", cpu_set, 9);  // the fresh dir has no pids.max
    ck_assert(!st.ok() && st.message().find("k8s_pod_u2/pids.max") != std::string::npos);
    touch(root + "/pids/slurm_k8s/job_7/k8s_pod_u2/pids.max");
    mkdir((root + "/pids/slurm_k8s/job_7/k8s_pod_u2/ctr_main").c_str(), 0755);
    touch(root + "/pids/slurm_k8s/job_7/k8s_pod_u2/ctr_main/cgroup.procs");
    ck_assert(enter_pod_cgroup(pids, "u2", cpu_set, 9).ok());
    ck_assert_sstr_eq(*read_file(root + "/pids/slurm_k8s/job_7/k8s_pod_u2/pids.max", 64), "64");
    // All pods together: the own cpu parent's quota (the job's lent CPUs).
    cpu_set.pods_cpu_quota_us = 400000;
    st = enter_pod_cgroup(own, "u2", cpu_set, 9);  // the job dir has no cpu files yet
    ck_assert(!st.ok() && st.message().find("job_7/cpu.cfs_period_us") != std::string::npos);
    touch(root + "/cpu,cpuacct/slurm_k8s/job_7/cpu.cfs_period_us");
    touch(root + "/cpu,cpuacct/slurm_k8s/job_7/cpu.cfs_quota_us");
    ck_assert(enter_pod_cgroup(own, "u2", cpu_set, 9).ok());
    ck_assert_sstr_eq(*read_file(root + "/cpu,cpuacct/slurm_k8s/job_7/cpu.cfs_quota_us", 64),
                      "400000");
    unlink((root + "/cpu,cpuacct/slurm_k8s/job_7/cpu.cfs_period_us").c_str());
    unlink((root + "/cpu,cpuacct/slurm_k8s/job_7/cpu.cfs_quota_us").c_str());
    cpu_set.pods_cpu_quota_us = 0;
    ck_assert(remove_own_job_cgroups(own).empty());  // still holds the pod's: kept
    ck_assert_int_eq(access((root + "/cpu,cpuacct/slurm_k8s/job_7").c_str(), F_OK), 0);
    for (const char *f :
         {"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.shares", "ctr_main/cgroup.procs"})
        unlink((own_pod + "/" + f).c_str());
    ck_assert(remove_pod_cgroup(own, "u2").empty());
    ck_assert(remove_own_job_cgroups(own).empty());
    ck_assert_int_ne(access((root + "/cpu,cpuacct/slurm_k8s/job_7").c_str(), F_OK), 0);
    unlink((root + "/pids/slurm_k8s/job_7/k8s_pod_u2/pids.max").c_str());
    unlink((root + "/pids/slurm_k8s/job_7/k8s_pod_u2/ctr_main/cgroup.procs").c_str());
    remove_pod_cgroup(pids, "u2");
    remove_own_job_cgroups(pids);
    for (const char *d : {"/cpu,cpuacct/slurm_k8s", "/cpu,cpuacct", "/pids/slurm_k8s", "/pids"})
        rmdir((root + d).c_str());
    rmdir(step.c_str());
    rmdir((root + "/devices/job_7").c_str());
    rmdir((root + "/devices").c_str());
    rmdir(root.c_str());
}
END_TEST

int main() {
    Suite *s = suite_create("slurm_cgroup");
    TCase *tc = tcase_create("slurm_cgroup");
    tcase_add_loop_test(tc, job_dir_table, 0, TABLE_SIZE(kDir));
    tcase_add_loop_test(tc, job_cgroups_table, 0, TABLE_SIZE(kJob));
    tcase_add_test(tc, parse_lines);
    tcase_add_test(tc, pod_parents);
    tcase_add_test(tc, pod_own_parents);
    tcase_add_test(tc, pod_enter_and_remove);
    tcase_add_test(tc, pod_memory_limits);
    tcase_add_test(tc, cpu_weight_from_shares);
    tcase_add_test(tc, pod_enter_v2_kernel);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
