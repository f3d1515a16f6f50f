#include "common/rfc3339.h"

#include <cstdio>
#include <ctime>

namespace sk {

namespace {

constexpr int64_t kNsPerSec = 1000000000;
// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
constexpr int64_t kMinUnixS = -62167219200, kMaxUnixS = 253402300799;

// Floor division, so that instants before the epoch get a fraction in 0..d-1.
void split_units(int64_t v, int64_t per_sec, int64_t *sec, int64_t *rest) {
    *sec = v / per_sec;
    *rest = v % per_sec;
    if (*rest < 0) {
        *rest += per_sec;
        *sec -= 1;
    }
}

}  // namespace

std::string format_rfc3339(int64_t unix_s, int64_t nanos, int digits, bool trim_zeros) {
    if (nanos < 0 || nanos >= kNsPerSec) nanos = 0;
    if (unix_s < kMinUnixS) {
        unix_s = kMinUnixS;
        nanos = 0;
    } else if (unix_s > kMaxUnixS) {
        unix_s = kMaxUnixS;
        nanos = kNsPerSec - 1;
    }
    if (digits < 0) digits = 0;
    if (digits > 9) digits = 9;
    time_t t = static_cast<time_t>(unix_s);
    struct tm tm {};
    gmtime_r(&t, &tm);
    char buf[48];
    int n = snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    std::string out(buf, n > 0 ? static_cast<size_t>(n) : 0);
    if (digits > 0) {
        char frac[16];
        snprintf(frac, sizeof frac, "%09lld", static_cast<long long>(nanos));
        size_t len = static_cast<size_t>(digits);
        if (trim_zeros)
            while (len > 0 && frac[len - 1] == '0')
                len--;
        if (len > 0) out.append(".").append(frac, len);
    }
    out += 'Z';
    return out;
}

std::string rfc3339(int64_t unix_s) {
    return format_rfc3339(unix_s, 0, 0, false);
}

std::string micro_time(int64_t unix_us) {
    int64_t s, us;
    split_units(unix_us, 1000000, &s, &us);
    return format_rfc3339(s, us * 1000, 6, false);
}

std::string format_rfc3339nano(int64_t unix_ns, bool fixed_width) {
    int64_t s, ns;
    split_units(unix_ns, kNsPerSec, &s, &ns);
    return format_rfc3339(s, ns, 9, !fixed_width);
}

int64_t parse_rfc3339(const std::string &s) {
    struct tm tm = {};
    const char *end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end) return -1;
    if (*end == '.') {
        end++;
        while (*end >= '0' && *end <= '9')
            end++;
    }
    if (end[0] != 'Z' || end[1] != '\0') return -1;
    return static_cast<int64_t>(timegm(&tm));
}

}  // namespace sk
