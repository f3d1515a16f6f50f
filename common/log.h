// Logging with a component prefix ("slurm-k8s-agent", "spank_k8s") and
// object prefixes written by the caller ("[node slurm-n1-42] ...").
// The sink is replaceable: the SPANK plugin routes lines to slurm_info/
// slurm_error, daemons write to stderr (systemd's journal adds timestamps
// unless SK_LOG_TIMESTAMPS is set), tests capture lines.
#pragma once

#include <string>

namespace sk::log {

enum class Level { Error = 0, Warning = 1, Info = 2, Verbose = 3, Debug = 4 };

using Sink = void (*)(Level level, const char *line);

void set_component(const char *name) noexcept;  // copied; call once at start
const char *component() noexcept;
void set_level(Level level) noexcept;
Level level() noexcept;
bool enabled(Level level) noexcept;
void set_sink(Sink sink) noexcept;  // nullptr restores the stderr sink
void set_timestamps(bool on) noexcept;
// "error", "warning", "info", "verbose", "debug"; false when unknown.
bool level_from_string(const std::string &name, Level *out) noexcept;
const char *level_name(Level level) noexcept;

void write(Level level, const char *fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

}  // namespace sk::log

#define SK_LOG(lvl, ...)                                                 \
    do {                                                                 \
        if (::sk::log::enabled(lvl)) ::sk::log::write(lvl, __VA_ARGS__); \
    } while (0)
#define LOG_ERROR(...) SK_LOG(::sk::log::Level::Error, __VA_ARGS__)
#define LOG_WARN(...) SK_LOG(::sk::log::Level::Warning, __VA_ARGS__)
#define LOG_INFO(...) SK_LOG(::sk::log::Level::Info, __VA_ARGS__)
#define LOG_VERBOSE(...) SK_LOG(::sk::log::Level::Verbose, __VA_ARGS__)
#define LOG_DEBUG(...) SK_LOG(::sk::log::Level::Debug, __VA_ARGS__)
