#include "agent/core/slurm_time.h"

#include <cstdio>
#include <ctime>

namespace sk::agent {

int64_t parse_slurm_time(const std::string &in) {
    size_t b = in.find_first_not_of(" \t\r\n"), e = in.find_last_not_of(" \t\r\n");
    std::string s = b == std::string::npos ? "" : in.substr(b, e - b + 1);
    if (s.empty() || s == "N/A" || s == "Unknown" || s == "NONE" || s == "None") return 0;
    struct tm tm = {};
    int n = 0;
    // The widths bound every field (no overflow) and the length, separators
    // and ranges are checked here and below, which is what err34-c asks for.
    if (s.size() != 19 ||
        // NOLINTNEXTLINE(cert-err34-c): bounded widths, result fully checked
        sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
        n != 19 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':')
        return -1;
    if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
        tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_year < 1970)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;  // Slurm prints local time; let the C library decide DST
    time_t t = mktime(&tm);
    return t == static_cast<time_t>(-1) ? -1 : static_cast<int64_t>(t);
}

}  // namespace sk::agent
