#include "common/procfs.h"

#include "common/fs.h"
#include "common/strings.h"

namespace sk {

Result<std::string> read_proc_file(int pid, const char *name, size_t max_bytes) {
    if (pid <= 0) return fail(Error::InvalidArgument, "no process has pid " + std::to_string(pid));
    return read_file("/proc/" + std::to_string(pid) + "/" + name, max_bytes);
}

bool parse_proc_stat(std::string_view text, ProcStat *out) {
    auto paren = text.rfind(')');
    if (paren == std::string_view::npos || paren + 1 >= text.size() || text[paren + 1] != ' ')
        return false;
    // Fields 3.. are separated by single spaces; the last ends the line.
    auto fields = split(trim(text.substr(paren + 2)), ' ');
    constexpr size_t kState = 0, kPpid = 4 - 3, kStartTime = 22 - 3;
    if (fields.size() <= kStartTime || fields[kState].size() != 1) return false;
    auto start = parse_uint(fields[kStartTime], "starttime");
    auto ppid = parse_uint(fields[kPpid], "ppid", INT32_MAX);
    if (!start || !ppid) return false;
    *out = ProcStat{fields[kState][0], *start, static_cast<int>(*ppid)};
    return true;
}

bool read_proc_stat(int pid, ProcStat *out) {
    // A stat line is a few hundred bytes; the bound only refuses nonsense.
    auto text = read_proc_file(pid, "stat", 4096);
    return text && parse_proc_stat(*text, out);
}

uint64_t proc_start_ticks(int pid) {
    ProcStat st;
    if (!read_proc_stat(pid, &st) || st.state == 'Z' || st.state == 'X') return 0;
    return st.start_ticks;
}

bool process_gone(int pid, uint64_t start_ticks) {
    uint64_t now = proc_start_ticks(pid);
    return now == 0 || now != start_ticks;
}

namespace {
std::string unescape_octal(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' &&
            s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
            out +=
                static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        } else {
            out += s[i];
        }
    }
    return out;
}
}  // namespace

std::vector<MountInfo> parse_mountinfo(std::string_view text) {
    // id parent major:minor root mount_point options [optional...] - fstype source super
    std::vector<MountInfo> out;
    for (const auto &line : split(text, '\n')) {
        auto f = split(line, ' ');
        size_t dash = 0;
        for (size_t i = 6; i < f.size(); i++)
            if (f[i] == "-") {
                dash = i;
                break;
            }
        if (!dash || dash + 2 >= f.size()) continue;
        auto id = parse_uint(f[0], "mount id", INT32_MAX);
        if (!id) continue;
        out.push_back({static_cast<int>(*id), unescape_octal(f[4]), f[dash + 1],
                       unescape_octal(f[dash + 2])});
    }
    return out;
}

}  // namespace sk
