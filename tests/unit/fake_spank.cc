#include "tests/unit/fake_spank.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace fake_spank {

static State g_state;
State &state() {
    return g_state;
}
void reset() {
    g_state = State();
}
spank_t handle() {
    return reinterpret_cast<spank_t>(&g_state);
}

// The callers are the fakes of Slurm's printf-like logging functions (their
// format attributes in spank.h), hence the attribute here too.
__attribute__((format(printf, 2, 0))) static void vlog(const char *level, const char *fmt,
                                                       va_list ap) {
    char buf[4096];
    vsnprintf(buf, sizeof buf, fmt, ap);
    g_state.log.push_back(std::string(level) + ": " + buf);
}

}  // namespace fake_spank

using fake_spank::g_state;

extern "C" {

const char *spank_strerror(spank_err_t err) {
    switch (static_cast<int>(err)) {
        case static_cast<int>(ESPANK_SUCCESS):
            return "Success";
        case static_cast<int>(ESPANK_BAD_ARG):
            return "Bad argument";
        case static_cast<int>(ESPANK_NOT_AVAIL):
            return "Item not available from this callback";
        case static_cast<int>(ESPANK_ENV_NOEXIST):
            return "No such environment variable";
        case static_cast<int>(ESPANK_NOT_REMOTE):
            return "Valid only in remote context";
        default:
            return "Generic error";
    }
}

int spank_symbol_supported(const char *) {
    return 1;
}
int spank_remote(spank_t) {
    return g_state.remote ? 1 : 0;
}
spank_context_t spank_context(void) {
    return g_state.context;
}

spank_err_t spank_option_register(spank_t, struct spank_option *opt) {
    if (!opt || !opt->name || strlen(opt->name) > 75)
        return static_cast<spank_err_t>(ESPANK_BAD_ARG);
    g_state.registered.push_back(*opt);
    return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_option_getopt(spank_t, struct spank_option *opt, char **optarg) {
    auto it = g_state.getopt.find(opt->name);
    if (it == g_state.getopt.end()) return static_cast<spank_err_t>(ESPANK_ERROR);
    if (optarg) *optarg = const_cast<char *>(it->second.c_str());
    return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

// Slurm's prototype (spank.h) puts an enum before the `...`: clang calls its
// va_start undefined (-Wvarargs: an enum is promoted), as it would Slurm's own
// implementation of it; the ABIs pass it as an int. This fake keeps the prototype.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wvarargs"
#endif
spank_err_t spank_get_item(spank_t, spank_item_t item, ...) {
    va_list ap;
    va_start(ap, item);
    spank_err_t rc = static_cast<spank_err_t>(ESPANK_SUCCESS);
    switch (item) {
        case S_JOB_UID:
            *va_arg(ap, uid_t *) = g_state.uid;
            break;
        case S_JOB_GID:
            *va_arg(ap, gid_t *) = g_state.gid;
            break;
        case S_JOB_ID:
            *va_arg(ap, uint32_t *) = g_state.job_id;
            break;
        case S_JOB_STEPID:
            *va_arg(ap, uint32_t *) = g_state.step_id;
            break;
        case S_JOB_NNODES:
            *va_arg(ap, uint32_t *) = g_state.nnodes;
            break;
        case S_JOB_NODEID:
            *va_arg(ap, uint32_t *) = g_state.nodeid;
            break;
        default:
            rc = static_cast<spank_err_t>(ESPANK_NOT_AVAIL);
            break;
    }
    va_end(ap);
    return rc;
}
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

spank_err_t spank_getenv(spank_t, const char *var, char *buf, int len) {
    if (!g_state.remote) return static_cast<spank_err_t>(ESPANK_NOT_REMOTE);
    auto it = g_state.env.find(var);
    if (it == g_state.env.end()) return static_cast<spank_err_t>(ESPANK_ENV_NOEXIST);
    if (static_cast<int>(it->second.size()) >= len) return static_cast<spank_err_t>(ESPANK_NOSPACE);
    memcpy(buf, it->second.c_str(), it->second.size() + 1);
    return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_setenv(spank_t, const char *var, const char *val, int overwrite) {
    if (!g_state.remote) return static_cast<spank_err_t>(ESPANK_NOT_REMOTE);
    if (!overwrite && g_state.env.count(var)) return static_cast<spank_err_t>(ESPANK_ENV_EXISTS);
    g_state.env[var] = val;
    return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_unsetenv(spank_t, const char *var) {
    if (!g_state.remote) return static_cast<spank_err_t>(ESPANK_NOT_REMOTE);
    g_state.env.erase(var);
    return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_job_control_setenv(spank_t, const char *name, const char *value, int overwrite) {
    if (!overwrite && g_state.job_control.count(name))
        return static_cast<spank_err_t>(ESPANK_ENV_EXISTS);
    g_state.job_control[name] = value;
    return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_job_control_getenv(spank_t, const char *name, char *buf, int len) {
    auto it = g_state.job_control.find(name);
    if (it == g_state.job_control.end()) return static_cast<spank_err_t>(ESPANK_ENV_NOEXIST);
    if (static_cast<int>(it->second.size()) >= len) return static_cast<spank_err_t>(ESPANK_NOSPACE);
    memcpy(buf, it->second.c_str(), it->second.size() + 1);
    return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_job_control_unsetenv(spank_t, const char *name) {
    g_state.job_control.erase(name);
    return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

#define FAKE_LOG(fn, level)               \
    void fn(const char *fmt, ...) {       \
        va_list ap;                       \
        va_start(ap, fmt);                \
        fake_spank::vlog(level, fmt, ap); \
        va_end(ap);                       \
    }
FAKE_LOG(slurm_info, "info")
FAKE_LOG(slurm_error, "error")
FAKE_LOG(slurm_verbose, "verbose")
FAKE_LOG(slurm_debug, "debug")
FAKE_LOG(slurm_debug2, "debug2")
FAKE_LOG(slurm_debug3, "debug3")
FAKE_LOG(slurm_spank_log, "spank")

}  // extern "C"
