#include "common/cgroup/slurm_cgroup.h"

#include <algorithm>

#include "common/strings.h"

namespace sk {

std::vector<CgroupLine> parse_proc_cgroup(std::string_view text) {
    std::vector<CgroupLine> out;
    for (const auto &line : split(text, '\n')) {
        auto c1 = line.find(':');
        if (c1 == std::string::npos || c1 == 0) continue;
        auto c2 = line.find(':', c1 + 1);
        if (c2 == std::string::npos || c2 + 1 >= line.size() || line[c2 + 1] != '/') continue;
        out.push_back({line.substr(c1 + 1, c2 - c1 - 1), line.substr(c2 + 1)});
    }
    return out;
}

std::string slurm_job_dir(std::string_view path, uint32_t job_id) {
    size_t pos = 0;
    while (pos < path.size()) {
        size_t end = path.find('/', pos);
        if (end == std::string_view::npos) end = path.size();
        std::string_view comp = path.substr(pos, end - pos);
        if (starts_with(comp, "job_")) {
            std::string_view id = comp.substr(4);
            auto n = parse_uint(id, "job id", UINT32_MAX);
            if (n && id[0] != '0') return *n == job_id ? std::string(path.substr(0, end)) : "";
        }
        pos = end + 1;
    }
    return "";
}

std::vector<CgroupLine> slurm_job_cgroups(std::string_view text, uint32_t job_id) {
    auto lines = parse_proc_cgroup(text);
    bool v1 = false;
    for (const auto &l : lines)
        v1 |= !l.controllers.empty() && !starts_with(l.controllers, "name=");
    std::vector<CgroupLine> out;
    for (const auto &l : lines) {
        const bool counts = v1 ? !l.controllers.empty() && !starts_with(l.controllers, "name=")
                               : l.controllers.empty();
        if (!counts) continue;
        std::string dir = slurm_job_dir(l.path, job_id);
        if (!dir.empty()) out.push_back({l.controllers, std::move(dir)});
    }
    return out;
}

bool unified_only(const std::vector<CgroupLine> &lines) {
    return !lines.empty() && std::all_of(lines.begin(), lines.end(),
                                         [](const CgroupLine &l) { return l.controllers.empty(); });
}

}  // namespace sk
