#include "k8s-shim/confine.h"

#include <fcntl.h>
#include <errno.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "k8s-shim/mount_ns.h"

namespace sk::shim {

namespace {

constexpr int kStartFailed = 128;

// The RuntimeDefault filter: everything is allowed but the calls below,
// which fail with EPERM. A deny-list, not the container runtimes' allow-list:
// the process runs on the node as the job's user, which already bounds what
// it can do; the filter takes away the kernel interfaces an unprivileged
// process can reach that a workload has no use for and that kernel exploits
// start from, the same ones the container runtimes' default profile denies
// to a container without CAP_SYS_ADMIN.
const char *const kDenied[] = {
    // New namespaces and mounts: user namespaces open root-only kernel code
    // to any user (clone with namespace flags: below).
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig",
    "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    // Kernel keyrings: not namespaced, shared by every process of the uid.
    "add_key", "request_key", "keyctl",
    // Large attack surface, no use in a workload.
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "lookup_dcookie", "open_by_handle_at", "fanotify_init",
    // Privileged anyway: denied so that no kernel code runs for them.
    "acct", "clock_adjtime", "clock_settime", "settimeofday", "stime", "create_module",
    "init_module", "finit_module", "delete_module", "get_kernel_syms", "query_module", "kexec_load",
    "kexec_file_load", "reboot", "swapon", "swapoff", "syslog", "iopl", "ioperm", "quotactl",
    "quotactl_fd", "nfsservctl", "sysfs", "_sysctl", "uselib", "ustat", "vm86", "vm86old",
    "vhangup"};

// clone() may still make threads and processes, not namespaces.
const unsigned long kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,   CLONE_NEWUSER,
                                         CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};

struct FilterFree {
    void operator()(scmp_filter_ctx f) const { seccomp_release(f); }
};

std::string load_default_filter() {
    std::unique_ptr<void, FilterFree> f(seccomp_init(SCMP_ACT_ALLOW));
    if (!f) return "seccomp_init failed";
    // The compat ABIs too: a deny-list for the native ABI alone is bypassed
    // by calling through int 0x80 or the x32 ABI.
    uint32_t native = seccomp_arch_native();
    std::vector<uint32_t> extra;
    if (native == SCMP_ARCH_X86_64) extra = {SCMP_ARCH_X86, SCMP_ARCH_X32};
    if (native == SCMP_ARCH_AARCH64) extra = {SCMP_ARCH_ARM};
    for (uint32_t arch : extra) {
        int rc = seccomp_arch_add(f.get(), arch);
        if (rc < 0 && rc != -EEXIST) return std::string("seccomp_arch_add: ") + strerror(-rc);
    }
    for (const char *name : kDenied) {
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR) continue;  // unknown to this libseccomp: none to deny
        int rc = seccomp_rule_add(f.get(), SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (rc < 0) return std::string("seccomp rule for ") + name + ": " + strerror(-rc);
    }
    for (unsigned long flag : kNamespaceFlags) {
        int rc = seccomp_rule_add(f.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        if (rc < 0) return std::string("seccomp rule for clone: ") + strerror(-rc);
    }
    // clone3 passes its flags in memory a filter cannot read: ENOSYS makes
    // the C library fall back to clone(), which the rules above see.
    if (int rc = seccomp_rule_add(f.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc < 0)
        return std::string("seccomp rule for clone3: ") + strerror(-rc);
    if (int rc = seccomp_load(f.get()); rc < 0)
        return std::string("seccomp_load: ") + strerror(-rc);
    return "";
}

bool read_caps(__user_cap_data_struct data[2]) {
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    return syscall(SYS_capget, &h, data) == 0;
}

bool holds_any(const __user_cap_data_struct data[2]) {
    for (int i = 0; i < 2; i++)
        if (data[i].effective || data[i].permitted || data[i].inheritable) return true;
    return false;
}

// Leaves the process with empty effective, permitted, inheritable and
// ambient sets and, when it could (CAP_SETPCAP), an empty bounding set: a
// root job's process then gains nothing at exec either.
std::string drop_capabilities() {
    __user_cap_data_struct data[2] = {};
    if (!read_caps(data)) return std::string("capget: ") + strerror(errno);
    // EINVAL: a kernel without ambient capabilities, so none to clear.
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return std::string("clearing the ambient capabilities: ") + strerror(errno);
    if (!holds_any(data)) return "";
    if (data[CAP_TO_INDEX(CAP_SETPCAP)].effective & CAP_TO_MASK(CAP_SETPCAP))
        for (int cap = 0; cap < 64; cap++)
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
                if (errno == EINVAL) break;  // past the kernel's last capability
                return std::string("dropping the bounding set: ") + strerror(errno);
            }
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    if (syscall(SYS_capset, &h, none) != 0) return std::string("capset: ") + strerror(errno);
    if (!read_caps(data) || holds_any(data)) return "capabilities are still held after capset";
    return "";
}

// The pod's own network and UTS namespaces, with the user namespace that
// owns them (the job's user's: k8s-shim/sandbox.h).
std::string join_pod_network(const std::string &net_path, const std::string &uts_path) {
    int net = open(net_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int uts = open(uts_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int user = net >= 0 ? ioctl(net, NS_GET_USERNS) : -1;
    std::string err;
    if (net < 0 || uts < 0)
        err = std::string("the pod's network namespace is gone (") + net_path +
              "): " + strerror(errno);
    else if (user < 0)
        err = std::string("the owner of the pod's network namespace: ") + strerror(errno);
    else if (setns(user, CLONE_NEWUSER) != 0)
        err = std::string("joining the pod's user namespace: ") + strerror(errno);
    else if (setns(net, CLONE_NEWNET) != 0)
        err = std::string("joining the pod's network namespace: ") + strerror(errno);
    else if (setns(uts, CLONE_NEWUTS) != 0)
        err = std::string("joining the pod's UTS namespace: ") + strerror(errno);
    for (int fd : {net, uts, user})
        if (fd >= 0) close(fd);
    return err;
}

}  // namespace

int exec_confined_main(int argc, char **argv) {
    // --started-fd N: the supervisor's start report (k8s-shim/supervise.h,
    // kSuperviseStartedEnv): "F" there on every failure (each one returns),
    // closed by the command's exec.
    struct Report {
        int fd = -1;
        ~Report() {
            if (fd >= 0) (void)!write(fd, "F", 1);
        }
    } report;
    bool nnp = false, caps = false, seccomp = false;
    std::vector<BindMount> binds;
    std::vector<std::string> hidden;
    std::string scratch, cwd, net_ns, uts_ns;
    long join = 0;
    int i = 2;
    auto value = [&](int n) { return i + n < argc && strcmp(argv[i + n], "--") != 0; };
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], kNoNewPrivsFlag) == 0)
            nnp = true;
        else if (strcmp(argv[i], kDropCapsFlag) == 0)
            caps = true;
        else if (strcmp(argv[i], kSeccompDefaultFlag) == 0)
            seccomp = true;
        else if ((strcmp(argv[i], kBindFlag) == 0 || strcmp(argv[i], kBindReadOnlyFlag) == 0) &&
                 value(1) && value(2)) {
            binds.push_back({argv[i + 1], argv[i + 2], strcmp(argv[i], kBindReadOnlyFlag) == 0});
            i += 2;
        } else if (strcmp(argv[i], kHideFlag) == 0 && value(1)) {
            hidden.emplace_back(argv[++i]);
        } else if (strcmp(argv[i], kScratchFlag) == 0 && value(1)) {
            scratch = argv[++i];
        } else if (strcmp(argv[i], kChdirFlag) == 0 && value(1)) {
            cwd = argv[++i];
        } else if (strcmp(argv[i], kNetnsFlag) == 0 && value(1)) {
            net_ns = argv[++i];
        } else if (strcmp(argv[i], kUtsnsFlag) == 0 && value(1)) {
            uts_ns = argv[++i];
        } else if (strcmp(argv[i], kJoinMountsFlag) == 0 && value(1)) {
            join = strtol(argv[++i], nullptr, 10);
        } else if (strcmp(argv[i], kStartedFdFlag) == 0 && value(1)) {
            report.fd = static_cast<int>(strtol(argv[++i], nullptr, 10));
            if (report.fd < 3 || fcntl(report.fd, F_SETFD, FD_CLOEXEC) != 0) report.fd = -1;
        } else {
            fprintf(stderr, "slurm-k8s-shim %s: unknown flag %s, or a value missing\n",
                    kExecConfined, argv[i]);
            return kStartFailed;
        }
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "slurm-k8s-shim %s: no program after --\n", kExecConfined);
        return kStartFailed;
    }
    char **prog = argv + i + 1;
    std::string err;
    if (!net_ns.empty()) err = join_pod_network(net_ns, uts_ns.empty() ? net_ns : uts_ns);
    if (err.empty() && (!binds.empty() || !hidden.empty()))
        err = scratch.empty() ? "no scratch directory for the mounts"
                              : enter_own_mounts(binds, hidden, scratch);
    else if (err.empty() && join > 0)
        err = join_container_mounts(static_cast<pid_t>(join));
    if (err.empty() && !cwd.empty() && chdir(cwd.c_str()) != 0)
        err = std::string("working directory ") + cwd + ": " + strerror(errno);
    if (!err.empty()) {
        fprintf(stderr, "cannot start '%s': %s\n", prog[0], err.c_str());
        return kStartFailed;
    }
    if (caps) err = drop_capabilities();
    if (err.empty() && (nnp || seccomp) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        err = std::string("PR_SET_NO_NEW_PRIVS: ") + strerror(errno);
    if (err.empty() && seccomp) err = load_default_filter();
    if (!err.empty()) {
        fprintf(stderr, "cannot start '%s': confining it failed: %s\n", prog[0], err.c_str());
        return kStartFailed;
    }
    execvp(prog[0], prog);
    fprintf(stderr, "cannot start '%s': %s\n", prog[0], strerror(errno));
    return kStartFailed;
}

}  // namespace sk::shim
