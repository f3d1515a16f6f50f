#include "spank/slurm_facts.h"

#include <algorithm>
#include <cctype>

#include "common/cgroup/slurm_cgroup.h"
#include "common/strings.h"

namespace sk::spank {
namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

}  // namespace

bool prolog_flags_contain(const std::string &text) {
    bool contain = false;
    for (const auto &raw : split(text, '\n')) {
        std::string line(trim(raw.substr(0, raw.find('#'))));
        auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        if (lower(std::string(trim(line.substr(0, eq)))) != "prologflags") continue;
        contain = false;
        for (const auto &f : split(trim(line.substr(eq + 1)), ','))
            if (lower(std::string(trim(f))) == "contain") contain = true;
    }
    return contain;
}

std::vector<std::string> job_cgroup_dirs(const std::string &text, uint32_t job_id,
                                         const std::string &root) {
    std::vector<std::string> out;
    for (const auto &l : slurm_job_cgroups(text, job_id))
        if (!l.controllers.empty()) out.push_back(root + "/" + l.controllers + l.path);
    return out;
}

uint32_t cpus_per_node_at(const std::string &text, size_t node_index) {
    size_t first = 0;  // index of the first node the item describes
    for (const auto &raw : split(text, ',')) {
        std::string item(trim(raw));
        uint64_t reps = 1;
        auto paren = item.find("(x");
        if (paren != std::string::npos) {
            if (item.back() != ')') return 0;
            auto r = parse_uint(item.substr(paren + 2, item.size() - paren - 3),
                                "SLURM_JOB_CPUS_PER_NODE", 1000000);
            if (!r || *r == 0) return 0;
            reps = *r;
            item.resize(paren);
        }
        auto cpus = parse_uint(item, "SLURM_JOB_CPUS_PER_NODE", 1u << 20);
        if (!cpus) return 0;
        if (node_index < first + reps) return static_cast<uint32_t>(*cpus);
        first += reps;
    }
    return 0;
}

}  // namespace sk::spank
