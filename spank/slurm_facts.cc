#include "spank/slurm_facts.h"

#include <algorithm>
#include <cctype>

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
    const std::string comp = "/job_" + std::to_string(job_id);
    for (const auto &line : split(text, '\n')) {
        auto c1 = line.find(':');
        if (c1 == std::string::npos) continue;
        auto c2 = line.find(':', c1 + 1);
        if (c2 == std::string::npos) continue;
        std::string ctrls = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
        if (ctrls.empty() || starts_with(ctrls, "name=")) continue;
        size_t p = 0;
        for (;;) {
            p = path.find(comp, p);
            if (p == std::string::npos) break;
            size_t end = p + comp.size();
            if (end == path.size() || path[end] == '/') {
                out.push_back(root + "/" + ctrls + path.substr(0, end));
                break;
            }
            p = end;
        }
    }
    return out;
}

}  // namespace sk::spank
