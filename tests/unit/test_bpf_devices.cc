// common/cgroup/bpf_devices.h: the policy a cgroup v2 device program carries, and
// the program itself on this machine's kernel: a process in a cgroup with
// the program is refused (EPERM) the devices it denies and opens the others.
// The kernel part needs root and a cgroup2 mount (a pure v2 host or a hybrid
// one's "unified" mount: device programs run on both); without them it says
// so and is skipped, in the suite the VM layer covers v2 (tests/vm/smoke.sh).
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/cgroup/bpf_devices.h"
#include "tests/unit/check_main.h"

using namespace sk;

namespace {

CharDevice gpu(int index, unsigned minor) {
    return CharDevice{index, "/dev/nvidia" + std::to_string(index), 195, minor};
}

// The first cgroup2 mount point, "" when none.
std::string cgroup2_mount() {
    std::ifstream m("/proc/self/mounts");
    std::string dev, dir, type, rest;
    while (m >> dev >> dir >> type && std::getline(m, rest))
        if (type == "cgroup2") return dir;
    return "";
}

// Runs open(path) in a child moved into cgroup dir: 0 when it opened, else errno.
int open_in(const std::string &dir, const char *path) {
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(pipefd[1]);
        char c;
        if (read(pipefd[0], &c, 1) != 1) _exit(100);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        _exit(fd >= 0 ? 0 : errno);
    }
    close(pipefd[0]);
    {
        std::ofstream procs(dir + "/cgroup.procs");
        procs << pid << std::endl;
        ck_assert_msg(procs.good(), "cannot move pid %d into %s", pid, dir.c_str());
    }
    ck_assert_int_eq(write(pipefd[1], "x", 1), 1);
    close(pipefd[1]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

struct Cgroup {
    std::string dir;
    int fd = -1;
    Cgroup(const std::string &parent, const std::string &name) : dir(parent + "/" + name) {
        ck_assert_msg(mkdir(dir.c_str(), 0755) == 0, "mkdir %s: %s", dir.c_str(), strerror(errno));
        fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
    }
    ~Cgroup() {
        close(fd);
        rmdir(dir.c_str());
    }
};

}  // namespace

// The GPU policy: own GPUs allowed, others of the job denied, any other
// minor 0-253 of the GPUs' major denied (a GPU outside the job), control
// devices and everything else allowed.
START_TEST(gpu_policy_decides) {
    DevicePolicy p = gpu_policy({gpu(1, 1)}, {gpu(0, 0), gpu(2, 2)});
    ck_assert(policy_allows(p, 195, 1));
    ck_assert(!policy_allows(p, 195, 0));
    ck_assert(!policy_allows(p, 195, 2));
    ck_assert(!policy_allows(p, 195, 3));    // not the job's
    ck_assert(!policy_allows(p, 195, 253));  // the last GPU minor
    ck_assert(policy_allows(p, 195, 254));   // nvidia-modeset
    ck_assert(policy_allows(p, 195, 255));   // nvidiactl
    ck_assert(policy_allows(p, 1, 3));       // /dev/null
    ck_assert(policy_allows(p, 510, 0));     // nvidia-uvm's dynamic major
    // No GPU at all: nothing of major 195 is known, nothing denied.
    ck_assert(policy_allows(gpu_policy({}, {}), 195, 0));
    // Only denied ones: the rest of their major's GPUs too.
    DevicePolicy d = gpu_policy({}, {gpu(0, 0)});
    ck_assert(!policy_allows(d, 195, 0));
    ck_assert(!policy_allows(d, 195, 7));
    ck_assert(policy_allows(d, 195, 255));
}
END_TEST

// The program's shape: the header, one block per rule whose tests skip to
// the next rule, the default; 8 bytes an instruction.
START_TEST(program_shape) {
    DevicePolicy p;
    p.rules = {{195, 0, 0, false}, {195, 2, 5, true}};
    p.default_allow = true;
    auto prog = device_program(p);
    // 5 header + (3 for minor 0: JNE, JGT, MOV, EXIT = 4) + (JNE, JLT, JGT, MOV, EXIT = 5) + 2
    ck_assert_uint_eq(prog.size(), 5 + 4 + 5 + 2);
    // The type test (5th instruction) skips all 9 rule instructions.
    int16_t off;
    std::memcpy(&off, reinterpret_cast<const char *>(&prog[4]) + 2, sizeof off);
    ck_assert_int_eq(off, 9);
    // The last instruction is EXIT (BPF_JMP | BPF_EXIT = 0x95).
    ck_assert_uint_eq(prog.back() & 0xff, 0x95);
}
END_TEST

// On this kernel: a program denying /dev/null (1:3) on a new cgroup; a child
// there is refused /dev/null and opens /dev/zero; attaching again replaces
// the program; a descendant's own program overrides an override one; below
// a program attached with no flag nothing attaches.
START_TEST(kernel_enforces) {
    std::string mnt = cgroup2_mount();
    if (geteuid() != 0 || mnt.empty()) {
        fprintf(stderr, "SKIP kernel_enforces: needs root and a cgroup2 mount\n");
        return;
    }
    Cgroup cg(mnt, "sk_bpf_test_" + std::to_string(getpid()));
    DevicePolicy deny_null;
    deny_null.rules = {{1, 3, 3, false}};
    Status st = attach_device_policy(cg.fd, cg.dir, deny_null, "sk_test", true);
    ck_assert_msg(st.ok(), "%s", st.message().c_str());
    auto q = attached_device_programs(cg.fd, cg.dir);
    ck_assert_msg(q.ok(), "%s", q.message().c_str());
    ck_assert_uint_eq(q->ids.size(), 1);
    ck_assert(q->override);
    ck_assert_int_eq(open_in(cg.dir, "/dev/null"), EPERM);
    ck_assert_int_eq(open_in(cg.dir, "/dev/zero"), 0);

    // Attached again (same flags): replaces it.
    DevicePolicy deny_zero;
    deny_zero.rules = {{1, 5, 5, false}};
    ck_assert(attach_device_policy(cg.fd, cg.dir, deny_zero, "sk_test", true).ok());
    q = attached_device_programs(cg.fd, cg.dir);
    ck_assert_uint_eq(q->ids.size(), 1);
    ck_assert_int_eq(open_in(cg.dir, "/dev/null"), 0);
    ck_assert_int_eq(open_in(cg.dir, "/dev/zero"), EPERM);

    {
        // A child without a program has its parent's; with one, its own only.
        Cgroup child(cg.dir, "child");
        ck_assert_int_eq(open_in(child.dir, "/dev/zero"), EPERM);
        ck_assert(attach_device_policy(child.fd, child.dir, deny_null, "sk_test", false).ok());
        ck_assert_int_eq(open_in(child.dir, "/dev/zero"), 0);
        ck_assert_int_eq(open_in(child.dir, "/dev/null"), EPERM);
        // No flag: nothing below may attach.
        Cgroup grandchild(child.dir, "g");
        Status below = attach_device_policy(grandchild.fd, grandchild.dir, deny_zero, "t", true);
        ck_assert(!below.ok());
        ck_assert_msg(below.message().find("attaching") != std::string::npos, "%s",
                      below.message().c_str());
        // The processes of child and g are gone (waited for): rmdir works.
    }
}
END_TEST

int main() {
    Suite *s = suite_create("bpf_devices");
    TCase *tc = tcase_create("bpf_devices");
    tcase_add_test(tc, gpu_policy_decides);
    tcase_add_test(tc, program_shape);
    tcase_add_test(tc, kernel_enforces);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
