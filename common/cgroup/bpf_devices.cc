#include "common/cgroup/bpf_devices.h"

#include <errno.h>
#include <linux/bpf.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace sk {
namespace {

bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    return i;
}

// Registers: r1 the context (struct bpf_cgroup_dev_ctx), r2 the device type,
// r3 the major, r4 the minor, r0 the verdict.
constexpr uint8_t kLoadWord = BPF_LDX | BPF_W | BPF_MEM;
constexpr uint8_t kAndImm = BPF_ALU64 | BPF_AND | BPF_K;
constexpr uint8_t kMovImm = BPF_ALU64 | BPF_MOV | BPF_K;
constexpr uint8_t kJneImm = BPF_JMP | BPF_JNE | BPF_K;
constexpr uint8_t kJltImm = BPF_JMP | BPF_JLT | BPF_K;
constexpr uint8_t kJgtImm = BPF_JMP | BPF_JGT | BPF_K;
constexpr uint8_t kExit = BPF_JMP | BPF_EXIT;

std::vector<bpf_insn> compile(const DevicePolicy &policy) {
    std::vector<bpf_insn> rules;
    for (const auto &r : policy.rules) {
        // [major !=] [minor <] [minor >] r0 = verdict; exit: each test skips
        // to the next rule.
        std::vector<bpf_insn> tests;
        tests.push_back(insn(kJneImm, 3, 0, 0, static_cast<int32_t>(r.major)));
        if (r.minor_lo > 0)
            tests.push_back(insn(kJltImm, 4, 0, 0, static_cast<int32_t>(r.minor_lo)));
        tests.push_back(insn(kJgtImm, 4, 0, 0, static_cast<int32_t>(r.minor_hi)));
        const size_t len = tests.size() + 2;
        for (size_t i = 0; i < tests.size(); i++) {
            tests[i].off = static_cast<int16_t>(len - i - 1);
            rules.push_back(tests[i]);
        }
        rules.push_back(insn(kMovImm, 0, 0, 0, r.allow ? 1 : 0));
        rules.push_back(insn(kExit, 0, 0, 0, 0));
    }
    std::vector<bpf_insn> p;
    p.push_back(insn(kLoadWord, 2, 1, offsetof(bpf_cgroup_dev_ctx, access_type), 0));
    p.push_back(insn(kAndImm, 2, 0, 0, 0xffff));
    p.push_back(insn(kLoadWord, 3, 1, offsetof(bpf_cgroup_dev_ctx, major), 0));
    p.push_back(insn(kLoadWord, 4, 1, offsetof(bpf_cgroup_dev_ctx, minor), 0));
    // Not a char device: the default.
    p.push_back(insn(kJneImm, 2, 0, static_cast<int16_t>(rules.size()), BPF_DEVCG_DEV_CHAR));
    p.insert(p.end(), rules.begin(), rules.end());
    p.push_back(insn(kMovImm, 0, 0, 0, policy.default_allow ? 1 : 0));
    p.push_back(insn(kExit, 0, 0, 0, 0));
    return p;
}

long sys_bpf(int cmd, bpf_attr *attr) {
    return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

}  // namespace

DevicePolicy gpu_policy(const std::vector<CharDevice> &allowed,
                        const std::vector<CharDevice> &denied) {
    DevicePolicy p;
    std::vector<unsigned> majors;
    for (const auto &d : allowed) {
        p.rules.push_back({d.major, d.minor, d.minor, true});
        majors.push_back(d.major);
    }
    for (const auto &d : denied) {
        p.rules.push_back({d.major, d.minor, d.minor, false});
        majors.push_back(d.major);
    }
    std::sort(majors.begin(), majors.end());
    majors.erase(std::unique(majors.begin(), majors.end()), majors.end());
    for (unsigned m : majors)
        p.rules.push_back({m, 0, kGpuMinorMax, false});
    p.default_allow = true;
    return p;
}

std::vector<uint64_t> device_program(const DevicePolicy &policy) {
    auto p = compile(policy);
    std::vector<uint64_t> out(p.size());
    static_assert(sizeof(bpf_insn) == sizeof(uint64_t), "a BPF instruction is 8 bytes");
    std::memcpy(out.data(), p.data(), p.size() * sizeof(bpf_insn));
    return out;
}

bool policy_allows(const DevicePolicy &policy, unsigned major, unsigned minor) {
    for (const auto &r : policy.rules)
        if (r.major == major && minor >= r.minor_lo && minor <= r.minor_hi) return r.allow;
    return policy.default_allow;
}

Status attach_device_policy(int cgroup_dir_fd, const std::string &what, const DevicePolicy &policy,
                            const std::string &name, bool override) {
    auto prog = compile(policy);
    static const char license[] = "GPL";  // the kernel asks one; no GPL-only helper is called
    std::string log(16384, '\0');
    bpf_attr load{};
    load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    load.insns = reinterpret_cast<uintptr_t>(prog.data());
    load.insn_cnt = static_cast<uint32_t>(prog.size());
    load.license = reinterpret_cast<uintptr_t>(license);
    load.log_buf = reinterpret_cast<uintptr_t>(log.data());
    load.log_size = static_cast<uint32_t>(log.size());
    load.log_level = 1;
    std::strncpy(load.prog_name, name.c_str(), sizeof(load.prog_name) - 1);
    int fd = static_cast<int>(sys_bpf(BPF_PROG_LOAD, &load));
    if (fd < 0) {
        int e = errno;
        log.resize(strnlen(log.c_str(), log.size()));
        return fail(Error::Io, what + ": loading the device program: " + strerror(e) +
                                   (log.empty() ? "" : " (verifier: " + log.substr(0, 400) + ")") +
                                   (e == EPERM ? " (needs root: CAP_SYS_ADMIN)" : ""));
    }
    bpf_attr at{};
    at.target_fd = static_cast<uint32_t>(cgroup_dir_fd);
    at.attach_bpf_fd = static_cast<uint32_t>(fd);
    at.attach_type = BPF_CGROUP_DEVICE;
    at.attach_flags = override ? BPF_F_ALLOW_OVERRIDE : 0;
    long rc = sys_bpf(BPF_PROG_ATTACH, &at);
    int e = errno;
    close(fd);  // the cgroup holds the program from now on
    if (rc != 0)
        return fail(Error::Io,
                    what + ": attaching the device program: " + strerror(e) +
                        (e == EPERM ? " (a program attached above with no override flag, or "
                                      "one here attached with other flags)"
                                    : ""));
    return {};
}

Result<AttachedPrograms> attached_device_programs(int cgroup_dir_fd, const std::string &what) {
    uint32_t ids[64];
    bpf_attr q{};
    q.query.target_fd = static_cast<uint32_t>(cgroup_dir_fd);
    q.query.attach_type = BPF_CGROUP_DEVICE;
    q.query.prog_ids = reinterpret_cast<uintptr_t>(ids);
    q.query.prog_cnt = 64;
    if (sys_bpf(BPF_PROG_QUERY, &q) != 0)
        return fail(Error::Io, what + ": querying its device programs: " + strerror(errno));
    AttachedPrograms out;
    out.ids.assign(ids, ids + std::min<uint32_t>(q.query.prog_cnt, 64));
    out.override = (q.query.attach_flags & BPF_F_ALLOW_OVERRIDE) != 0;
    return out;
}

}  // namespace sk
