#include "common/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sys/time.h>

#include "common/rfc3339.h"

namespace sk::log {
namespace {

char g_component[64] = "slurm-k8s";
std::atomic<int> g_level{static_cast<int>(Level::Info)};
std::atomic<Sink> g_sink{nullptr};
std::atomic<bool> g_timestamps{false};

void stderr_sink(Level lvl, const char *line) {
    char ts[40] = "";
    if (g_timestamps.load()) {
        struct timeval tv;
        gettimeofday(&tv, nullptr);
        snprintf(
            ts, sizeof ts, "%s ",
            format_rfc3339(tv.tv_sec, static_cast<int64_t>(tv.tv_usec) * 1000, 3, false).c_str());
    }
    // One fprintf per line so concurrent writers do not interleave mid-line.
    fprintf(stderr, "%s%s: %s%s\n", ts, g_component,
            lvl == Level::Error     ? "error: "
            : lvl == Level::Warning ? "warning: "
                                    : "",
            line);
}

}  // namespace

void set_component(const char *name) noexcept {
    snprintf(g_component, sizeof g_component, "%s", name ? name : "slurm-k8s");
}
const char *component() noexcept {
    return g_component;
}
void set_level(Level l) noexcept {
    g_level.store(static_cast<int>(l));
}
Level level() noexcept {
    return static_cast<Level>(g_level.load());
}
bool enabled(Level l) noexcept {
    return static_cast<int>(l) <= g_level.load();
}
void set_sink(Sink sink) noexcept {
    g_sink.store(sink);
}
void set_timestamps(bool on) noexcept {
    g_timestamps.store(on);
}

const char *level_name(Level l) noexcept {
    switch (l) {
        case Level::Error:
            return "error";
        case Level::Warning:
            return "warning";
        case Level::Info:
            return "info";
        case Level::Verbose:
            return "verbose";
        case Level::Debug:
            return "debug";
    }
    return "info";
}

bool level_from_string(const std::string &name, Level *out) noexcept {
    for (int i = 0; i <= static_cast<int>(Level::Debug); i++) {
        if (name == level_name(static_cast<Level>(i))) {
            *out = static_cast<Level>(i);
            return true;
        }
    }
    return false;
}

void write(Level lvl, const char *fmt, ...) noexcept {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (static_cast<size_t>(n) >= sizeof buf) memcpy(buf + sizeof buf - 4, "...", 4);
    Sink sink = g_sink.load();
    (sink ? sink : stderr_sink)(lvl, buf);
}

}  // namespace sk::log
