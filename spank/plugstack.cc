#include "spank/plugstack.h"

#include "common/agent_call.h"
#include "common/config.h"
#include "common/strings.h"

#ifndef SK_SHIM_PATH
#define SK_SHIM_PATH "/usr/local/bin/slurm-k8s-shim"
#endif

namespace sk::spank {
namespace {

ConfigSchema schema(PlugConfig *c, std::string *on_error) {
    ConfigSchema s;
    s.add_path("socket", &c->socket, "agent socket (default /run/slurm-k8s/agent.sock)");
    s.add_path("admin_socket", &c->admin_socket,
               "the agent's admin socket, root's own (default admin/ beside socket, as the "
               "agent's admin_socket_path)");
    s.add_seconds("timeout", &c->timeout_s, 1, 300,
                  "bound on each agent call from prolog and steps, seconds (default 5)");
    s.add_seconds("grace", &c->grace_s, 0, 3600,
                  "budget for stopping pods at job end, seconds (default 30)");
    s.add_uint("max_gpus_per_node", &c->max_gpus_per_node, 0, 1024,
               "most GPUs one job may lend per node, 0 = no limit (default 0)");
    s.add_uint("max_gpus_per_job", &c->max_gpus_per_job, 0, 1u << 20,
               "most GPUs one job may lend in total, 0 = no limit (default 0)");
    s.add_list("allowed_namespaces", &c->allowed_namespaces,
               "namespaces users may name in --k8s-namespace, empty = any (default empty)");
    s.add_list("label_prefixes", &c->label_prefixes,
               "key prefixes allowed in --k8s-labels/--k8s-taints besides unprefixed keys");
    s.add_string("default_taint", &c->default_taint,
                 "taint on every virtual node, {job} = job id, empty = none "
                 "(default slurm-k8s/job={job}:NoSchedule)");
    s.add_enum("on_agent_error", on_error, {"warn", "fail"},
               "warn: an unreachable agent only logs; fail: the prolog fails (Slurm drains the "
               "node and requeues the job) (default warn)");
    s.add_path("rundir", &c->rundir,
               "root-owned directory for per-job files "
               "(default /run/slurm-k8s/jobs)");
    s.add_path("shim", &c->shim, "slurm-k8s-shim binary started in the extern step");
    s.add_enum("shim_log_level", &c->shim_log_level,
               {"error", "warning", "info", "verbose", "debug"}, "shim --log-level (default info)");
    s.add_path("runtime_config", &c->runtime_config,
               "container runtime templates the shim applies by image (etc/runtime.conf."
               "example), readable by every job's user; empty = the process runtime only");
    s.add_nice("shim_nice", &c->shim_nice,
               "the shim's CPU nice value, -20..19; its pods run at the job's own (default -5)");
    s.add_seconds("wait_default", &c->wait_default_s, 1, 86400,
                  "--k8s-wait without a value waits this long, seconds (default 300)");
    s.add_string("cluster", &c->cluster, "cluster label, default SLURM_CLUSTER_NAME");
    s.add_string("gpu_device", &c->gpu_device,
                 "device node of GPU {index}, as gres.conf File= names it; the trainer's steps "
                 "are denied the lent ones, the pods the others (default /dev/nvidia{index})");
    return s;
}

}  // namespace

Result<PlugConfig> parse_plugstack(int argc, const char *const *argv) {
    PlugConfig c;
    c.shim = SK_SHIM_PATH;
    std::string on_error = "warn";
    auto kvs = parse_kv_args(argc, argv, "plugstack.conf");
    if (!kvs) return kvs.failure();
    if (auto s = schema(&c, &on_error).apply(*kvs); !s) return s.failure();
    c.fail_on_agent_error = on_error == "fail";
    for (const auto &ns : c.allowed_namespaces)
        if (!k8s::is_dns1123_label(ns))
            return fail(Error::InvalidArgument,
                        "plugstack.conf: allowed_namespaces='" + ns + "' is not a namespace name");
    if (auto t = default_taints_for(c, 1); !t) return t.failure();
    if (c.gpu_device.empty() || c.gpu_device[0] != '/' ||
        c.gpu_device.find("{index}") == std::string::npos ||
        c.gpu_device.find("{index}") != c.gpu_device.rfind("{index}") ||
        c.gpu_device.find('/', c.gpu_device.find("{index}")) != std::string::npos)
        return fail(Error::InvalidArgument,
                    "plugstack.conf: gpu_device='" + c.gpu_device +
                        "' must be an absolute path whose last component holds {index} once "
                        "(e.g. /dev/nvidia{index})");
    return c;
}

Result<std::vector<k8s::Taint>> default_taints_for(const PlugConfig &cfg, uint32_t job_id) {
    std::string t = cfg.default_taint;
    if (t.empty()) return std::vector<k8s::Taint>{};
    for (size_t p; (p = t.find("{job}")) != std::string::npos;)
        t.replace(p, 5, std::to_string(job_id));
    auto r = k8s::parse_taint(t);
    if (!r)
        return fail(Error::InvalidArgument,
                    "plugstack.conf: default_taint='" + cfg.default_taint + "': " + r.message());
    return std::vector<k8s::Taint>{*r};
}

namespace {

std::string with_node(std::string out, const std::string &slurm_node) {
    for (size_t pos = out.find("{node}"); pos != std::string::npos;
         pos = out.find("{node}", pos + slurm_node.size()))
        out.replace(pos, 6, slurm_node);
    return out;
}

}  // namespace

std::string socket_for(const PlugConfig &cfg, const std::string &slurm_node) {
    return with_node(cfg.socket, slurm_node);
}

std::string admin_socket_for(const PlugConfig &cfg, const std::string &slurm_node) {
    return with_node(cfg.admin_socket.empty() ? sk::admin_socket_for(cfg.socket) : cfg.admin_socket,
                     slurm_node);
}

std::string plugstack_keys_doc() {
    PlugConfig c;
    std::string e;
    return schema(&c, &e).describe();
}

}  // namespace sk::spank
