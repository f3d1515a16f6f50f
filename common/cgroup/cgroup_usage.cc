#include "common/cgroup/cgroup_usage.h"

#include "common/cgroup/pod_cgroup.h"
#include "common/fs.h"
#include "common/strings.h"

namespace sk {

std::optional<uint64_t> flat_keyed_value(std::string_view text, std::string_view key) {
    for (const auto &line : split(text, '\n')) {
        auto sp = line.find(' ');
        if (sp == std::string::npos || std::string_view(line).substr(0, sp) != key) continue;
        return to_uint(trim(std::string_view(line).substr(sp + 1)));
    }
    return std::nullopt;
}

std::optional<uint64_t> single_value(std::string_view text) {
    return to_uint(trim(text));
}

JobCgroupFiles job_cgroup_files(const std::vector<CgroupLine> &job_lines, const std::string &root) {
    JobCgroupFiles f;
    for (const auto &l : job_lines) {
        if (l.controllers.empty()) {  // the unified hierarchy (kept only on a pure v2 host)
            f.v2 = true;
            f.cpu_dir = f.memory_dir = root + l.path;
            return f;
        }
        for (const auto &c : split(l.controllers, ',')) {
            if (c == "cpuacct") f.cpu_dir = root + "/" + l.controllers + l.path;
            if (c == "memory") f.memory_dir = root + "/" + l.controllers + l.path;
        }
    }
    return f;
}

std::optional<NodeUsage> cgroup_usage(bool v2, std::string_view cpu_text,
                                      std::string_view memory_usage_text,
                                      std::string_view memory_stat_text) {
    std::optional<uint64_t> cpu_ns;
    if (v2) {
        auto us = flat_keyed_value(cpu_text, "usage_usec");
        if (us && *us <= UINT64_MAX / 1000) cpu_ns = *us * 1000;
    } else {
        cpu_ns = single_value(cpu_text);
    }
    auto usage = single_value(memory_usage_text);
    auto inactive =
        flat_keyed_value(memory_stat_text, v2 ? "inactive_file" : "total_inactive_file");
    if (!cpu_ns || !usage || !inactive) return std::nullopt;
    return NodeUsage{*cpu_ns, *usage > *inactive ? *usage - *inactive : 0};
}

PodCgroupUsage read_pod_cgroup_usage(std::string_view self_cgroup_text, uint32_t job_id,
                                     const std::string &pod_uid, const std::string &root) {
    PodCgroupUsage out;
    auto name = pod_cgroup_name(pod_uid);
    auto parents =
        pod_cgroup_parents(self_cgroup_text, job_id, {"devices", "memory"}, root, {"cpuacct"});
    if (!name || !parents) return out;
    for (const auto &p : *parents) {
        std::string dir = p.dir + "/" + *name;
        if (p.unified) {  // cgroup v2: cpu.stat's usage_usec, memory.current less inactive_file
            auto cpu = read_file(dir + "/cpu.stat", kMaxCgroupFileBytes);
            auto current = read_file(dir + "/memory.current", kMaxCgroupFileBytes);
            auto stat = read_file(dir + "/memory.stat", kMaxCgroupFileBytes);
            if (cpu && current && stat)
                if (auto u = cgroup_usage(true, *cpu, *current, *stat)) {
                    out.cpu_ns = u->cpu_ns;
                    out.working_set_bytes = u->working_set_bytes;
                }
            continue;
        }
        bool cpu = false, memory = false;
        for (const auto &c : split(p.controllers, ',')) {
            cpu = cpu || c == "cpuacct";
            memory = memory || c == "memory";
        }
        if (cpu && !out.cpu_ns) {
            if (auto t = read_file(dir + "/cpuacct.usage", kMaxCgroupFileBytes))
                out.cpu_ns = single_value(*t);
        }
        if (memory && !out.working_set_bytes) {
            auto usage = read_file(dir + "/memory.usage_in_bytes", kMaxCgroupFileBytes);
            auto stat = read_file(dir + "/memory.stat", kMaxCgroupFileBytes);
            if (usage && stat) {
                uint64_t u = single_value(*usage).value_or(UINT64_MAX);
                uint64_t inactive =
                    flat_keyed_value(*stat, "total_inactive_file").value_or(UINT64_MAX);
                if (u != UINT64_MAX && inactive != UINT64_MAX)
                    out.working_set_bytes = u > inactive ? u - inactive : 0;
            }
        }
    }
    return out;
}

std::optional<NodeUsage> read_job_cgroup_usage(uint32_t job_id) {
    auto self = read_process_cgroups();
    if (!self) return std::nullopt;
    JobCgroupFiles f = job_cgroup_files(slurm_job_cgroups(*self, job_id));
    if (f.cpu_dir.empty() || f.memory_dir.empty()) return std::nullopt;
    auto cpu = read_file(f.cpu_dir + (f.v2 ? "/cpu.stat" : "/cpuacct.usage"), kMaxCgroupFileBytes);
    auto usage = read_file(f.memory_dir + (f.v2 ? "/memory.current" : "/memory.usage_in_bytes"),
                           kMaxCgroupFileBytes);
    auto stat = read_file(f.memory_dir + "/memory.stat", kMaxCgroupFileBytes);
    if (!cpu || !usage || !stat) return std::nullopt;
    return cgroup_usage(f.v2, *cpu, *usage, *stat);
}

}  // namespace sk
