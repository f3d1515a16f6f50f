#include "spank/hook_util.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <functional>

#include "common/log.h"
#include "spank/gpu_split.h"
#include "spank/hostlist.h"
#include "spank/shim_process.h"
#include "spank/slurm_facts.h"

namespace sk::spank {
namespace {

void slurm_sink(log::Level level, const char *line) {
    switch (level) {
        case log::Level::Error:
            slurm_error("spank_k8s: %s", line);
            break;
        case log::Level::Warning:
        case log::Level::Info:
            slurm_info("spank_k8s: %s", line);
            break;
        case log::Level::Verbose:
            slurm_verbose("spank_k8s: %s", line);
            break;
        case log::Level::Debug:
            slurm_debug("spank_k8s: %s", line);
            break;
    }
}

}  // namespace

void init_logging() noexcept {
    log::set_component("spank_k8s");
    log::set_sink(slurm_sink);
    log::set_level(log::Level::Debug);  // Slurm's own debug level filters
}

Result<PlugConfig> plugstack(int ac, char **av, const char *hook) {
    init_logging();
    auto c = parse_plugstack(ac, av);
    if (!c)
        LOG_ERROR("%s: %s (fix the spank_k8s line in plugstack.conf)", hook, c.message().c_str());
    return c;
}

int64_t monotonic_ns() noexcept {
    struct timespec ts {};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void log_hook_time(const char *hook, int64_t start_ns) noexcept {
    const char *ctx = "";
    switch (spank_context()) {
        case S_CTX_ALLOCATOR:
            ctx = "allocator";
            break;
        case S_CTX_LOCAL:
            ctx = "local";
            break;
        case S_CTX_REMOTE:
            ctx = "remote";
            break;
        case S_CTX_JOB_SCRIPT:
            ctx = "job_script";
            break;
        case S_CTX_SLURMD:
            ctx = "slurmd";
            break;
        default:
            ctx = "other";
    }
    slurm_debug("spank_k8s: hook %s (%s, pid %d): %.3f ms", hook, ctx, static_cast<int>(getpid()),
                static_cast<double>(monotonic_ns() - start_ns) / 1e6);
}

uint32_t item_u32(spank_t sp, spank_item_t item, uint32_t dflt) {
    uint32_t v = 0;
    if (spank_get_item(sp, item, &v) != ESPANK_SUCCESS) return dflt;
    return v;
}

std::string env_or(const char *name, const std::string &dflt) {
    const char *v = getenv(name);
    return v ? std::string(v) : dflt;
}

std::string step_env(spank_t sp, const char *name) {
    char buf[4096];
    if (spank_getenv(sp, name, buf, sizeof buf) == ESPANK_SUCCESS) return buf;
    return {};
}

std::string node_name_here(spank_t sp) {
    std::string n = env_or("SLURMD_NODENAME");
    return n.empty() ? step_env(sp, "SLURMD_NODENAME") : n;
}

namespace {

// Since Slurm 23.02 the API loads its plugins (auth, hash, ...) only in
// slurm_init(), no longer on first use as 22.05 did. slurmstepd's steps and
// the client commands have called it; `slurmstepd spank prolog|epilog` (the
// job_prolog/job_epilog context) never does, and there 24.11's
// slurm_load_job fatal()s ("No hash plugins loaded. Was slurm_init() called
// before calling any Slurm API functions?"): the prolog dies, slurmd drains
// the node and requeues the job (tests/slurm/newer-slurm.sh). Once per
// process, in that context only; found with dlsym as slurm_load_job is.
void init_slurm_api() {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
    static bool done = false;
    if (done || spank_context() != S_CTX_JOB_SCRIPT) return;
    done = true;
    using InitFn = void (*)(const char *);
    if (const auto init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "slurm_init")))
        init(nullptr);  // the slurm.conf the process already read (SLURM_CONF)
#endif
}

// fn(the job's own record) when slurmctld answers; false when it could not
// be asked. A heterogeneous job's leader lists every component: the job's
// own record is the one with its id.
bool with_job_record(uint32_t job_id, uint16_t show,
                     const std::function<void(const slurm_job_info_t &)> &fn) {
    using LoadFn = int (*)(job_info_msg_t **, uint32_t, uint16_t);
    using FreeFn = void (*)(job_info_msg_t *);
    static const auto load = reinterpret_cast<LoadFn>(dlsym(RTLD_DEFAULT, "slurm_load_job"));
    static const auto release =
        reinterpret_cast<FreeFn>(dlsym(RTLD_DEFAULT, "slurm_free_job_info_msg"));
    if (!load || !release) return false;
    init_slurm_api();
    job_info_msg_t *msg = nullptr;
    if (load(&msg, job_id, show) != 0 || !msg) return false;
    bool found = false;
    for (uint32_t i = 0; i < msg->record_count && !found; i++) {
        if (msg->job_array[i].job_id != job_id) continue;
        found = true;
        fn(msg->job_array[i]);
    }
    release(msg);
    return found;
}

// What the job holds on `node`. slurm_job_cpus_allocated_on_node reads the
// record's job_resrcs (sent with SHOW_DETAIL); found with dlsym as
// slurm_load_job is. Slurm 24.11 removed it from its API: there the prolog's
// SLURM_JOB_CPUS_PER_NODE (the same per-node counts, from the job's
// credential) at the node's place in the job's node list says it.
NodeShare node_share(const slurm_job_info_t &j, const std::string &node) {
    using CpusFn = int (*)(job_resources_t *, const char *);
    static const auto cpus_on =
        reinterpret_cast<CpusFn>(dlsym(RTLD_DEFAULT, "slurm_job_cpus_allocated_on_node"));
    NodeShare out;
    if (cpus_on && j.job_resrcs) {
        int n = cpus_on(j.job_resrcs, node.c_str());
        if (n > 0) out.cpus = static_cast<uint32_t>(n);
    } else if (!cpus_on) {
        auto nodes = expand_hostlist(j.nodes ? j.nodes : "");
        if (nodes)
            for (size_t i = 0; i < nodes->size(); i++)
                if ((*nodes)[i] == node) {
                    out.cpus = cpus_per_node_at(env_or("SLURM_JOB_CPUS_PER_NODE"), i);
                    break;
                }
    }
    uint64_t mem = j.pn_min_memory;
    if (mem == NO_VAL64 || mem == INFINITE64) return out;
    if (mem & MEM_PER_CPU)
        out.memory_mib = out.cpus ? (mem & ~MEM_PER_CPU) * out.cpus : 0;
    else
        out.memory_mib = mem;
    return out;
}

}  // namespace

SlurmJobFacts slurm_job_facts(uint32_t job_id, const std::string &node,
                              const std::vector<int> &lent) {
    SlurmJobFacts out;
    auto is_id = [](uint32_t v) { return v != 0 && v != NO_VAL; };
    with_job_record(job_id, SHOW_ALL | SHOW_DETAIL, [&](const slurm_job_info_t &j) {
        if (is_id(j.array_job_id) && j.array_task_id != NO_VAL) {
            out.array_job_id = j.array_job_id;
            out.array_task_id = j.array_task_id;
        }
        if (is_id(j.het_job_id) && j.het_job_offset != NO_VAL) {
            out.het_job_id = j.het_job_id;
            out.het_offset = j.het_job_offset;
        }
        out.held = node_share(j, node);
        if (lent.empty()) return;
        auto nodes = expand_hostlist(j.nodes ? j.nodes : "");
        if (!nodes) return;
        for (size_t i = 0; i < nodes->size() && i < j.gres_detail_cnt; i++)
            if ((*nodes)[i] == node && j.gres_detail_str && j.gres_detail_str[i])
                out.gpu_type =
                    lent_gpu_type(gpu_types_from_gres_detail(j.gres_detail_str[i]), lent);
    });
    return out;
}

SlurmJobNow slurm_job_now(uint32_t job_id) {
    SlurmJobNow out;
    with_job_record(job_id, SHOW_ALL, [&](const slurm_job_info_t &j) {
        out.known = true;
        out.base = j.job_state & JOB_STATE_BASE;
        out.completing = (j.job_state & JOB_COMPLETING) != 0;
        out.requeued = (j.job_state & (JOB_REQUEUE | JOB_REQUEUE_HOLD | JOB_SPECIAL_EXIT)) != 0;
    });
    return out;
}

bool slurm_job_running(const SlurmJobNow &j, uint32_t job_id, int squeue_timeout_ms) {
    if (j.known) return j.base == JOB_RUNNING && !j.completing;
    return slurm_job_state(job_id, squeue_timeout_ms) == "RUNNING";
}

const char *job_end_reason(const SlurmJobNow &j) {
    if (!j.known) return "JobEnded";
    // A requeued job is PENDING under COMPLETING: it runs again later, with
    // the same id, maybe on other nodes.
    if (j.requeued || j.base == JOB_PENDING) return "Requeued";
    switch (j.base) {
        case JOB_COMPLETE:
            return "JobCompleted";
        case JOB_FAILED:
        case JOB_OOM:
            return "JobFailed";
        case JOB_CANCELLED:
            return "JobCancelled";
        case JOB_TIMEOUT:
            return "TimeLimit";
        case JOB_NODE_FAIL:
            return "NodeFail";
        case JOB_PREEMPTED:
            return "Preempted";
        default:  // DEADLINE, BOOT_FAIL, or still RUNNING (an epilog retry)
            return "JobEnded";
    }
}

}  // namespace sk::spank
