#include "agent/kube_time.h"

#include <cstdio>
#include <ctime>
#include <sys/time.h>

namespace sk::agent {

std::string rfc3339(int64_t unix_s) {
    time_t t = static_cast<time_t>(unix_s);
    struct tm tm;
    gmtime_r(&t, &tm);
    char buf[32];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string micro_time(int64_t unix_us) {
    int64_t s = unix_us / 1000000, us = unix_us % 1000000;
    if (us < 0) {
        us += 1000000;
        s -= 1;
    }
    time_t t = static_cast<time_t>(s);
    struct tm tm;
    gmtime_r(&t, &tm);
    char buf[48];
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof buf - n, ".%06lldZ", static_cast<long long>(us));
    return buf;
}

int64_t parse_rfc3339(const std::string &s) {
    struct tm tm = {};
    const char *end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end) return -1;
    if (*end == '.') {
        end++;
        while (*end >= '0' && *end <= '9') end++;
    }
    if (end[0] != 'Z' || end[1] != '\0') return -1;
    return static_cast<int64_t>(timegm(&tm));
}

int64_t SystemClock::now_us() const {
    struct timeval tv;
    gettimeofday(&tv, nullptr);
    return static_cast<int64_t>(tv.tv_sec) * 1000000 + tv.tv_usec;
}

}  // namespace sk::agent
