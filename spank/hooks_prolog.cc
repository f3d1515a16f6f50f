// job_prolog / job_epilog: root, one `slurmstepd spank prolog|epilog`
// process per node, no slurm_spank_init before them, no PATH, no state kept
// between the two (plugstack arguments are parsed in each). Never call
// spank_job_control_getenv here: it crashes Slurm 22.05 (spank/README.md, "Slurm facts").
//
// Failure modes (spank.8): a non-zero return from job_prolog fails the prolog
// -> slurmctld drains the node and requeues/holds the job; from job_epilog it
// drains the node. Hence both return 0 for every problem except an
// unreachable/failing agent when the admin set on_agent_error=fail. A user
// error found only here (GPUs the node does not have, a bypassed client
// check) is reported to the job through the run file, not by draining.

#include "common/fs.h"
#include "common/plugin_wire.h"
#include "common/log.h"
#include "common/strings.h"
#include "spank/gpu_split.h"
#include "spank/hook_util.h"
#include "spank/hostlist.h"
#include "spank/runfile.h"
#include "spank/slurm_facts.h"

namespace sk::spank {
namespace {

struct PrologEnv {
    uint32_t job_id = 0, uid = 0, gid = 0, nnodes = 0;
    std::string node, user, partition, cluster, nodelist, job_gpus;
};

PrologEnv read_env(spank_t sp) {
    PrologEnv e;
    e.job_id = item_u32(sp, S_JOB_ID, 0);
    e.uid = item_u32(sp, S_JOB_UID, 0);
    e.gid = static_cast<uint32_t>(std::strtoul(env_or("SLURM_JOB_GID", "0").c_str(), nullptr, 10));
    e.nnodes = static_cast<uint32_t>(
        std::strtoul(env_or("SLURM_JOB_NUM_NODES", "1").c_str(), nullptr, 10));
    e.node = env_or("SLURMD_NODENAME");
    e.user = env_or("SLURM_JOB_USER");
    e.partition = env_or("SLURM_JOB_PARTITION");
    e.cluster = env_or("SLURM_CLUSTER_NAME");
    e.nodelist = env_or("SLURM_JOB_NODELIST", env_or("SLURM_NODELIST"));
    e.job_gpus = env_or("SLURM_JOB_GPUS");
    return e;
}

// Unknown (unreadable slurm.conf) counts as on: the extern step then reports.
bool contain_enabled() {
    auto conf =
        read_file(env_or("SLURM_CONF", "/etc/slurm/slurm.conf"), size_t{16} << 20, Links::Follow);
    if (!conf) return true;
    return prolog_flags_contain(*conf);
}

// Lent GPUs on this node: whole node when it is one of the last --k8s-nodes.
Result<std::vector<int>> lent_here(const JobOptions &o, const PrologEnv &e,
                                   const std::vector<int> &job_gpus) {
    if (o.nodes > 0) {
        auto nodes = expand_hostlist(e.nodelist);
        if (!nodes) return nodes.failure();
        size_t n = nodes->size(), m = std::min<size_t>(o.nodes, n);
        for (size_t i = n - m; i < n; i++)
            if ((*nodes)[i] == e.node) return job_gpus;
    }
    return choose_lent(job_gpus, o.gpus_all, o.gpus);
}

proto::RegisterRequest make_request(const PrologEnv &e, const PlugConfig &cfg,
                                    const SlurmJobFacts &facts, const NodeShare &share,
                                    const JobOptions &o, std::vector<int> gpus,
                                    std::vector<k8s::Taint> taints) {
    proto::RegisterRequest r;
    r.job_id = e.job_id;
    r.slurm_node = e.node;
    r.user = e.user;
    r.uid = e.uid;
    r.gid = e.gid;
    r.partition = e.partition;
    r.cluster = cfg.cluster.empty() ? e.cluster : cfg.cluster;
    r.gpus = std::move(gpus);
    r.cpus = share.cpus;
    r.memory_mib = share.memory_mib;
    r.labels = o.labels;
    r.taints = std::move(taints);
    for (const auto &t : o.taints)
        r.taints.push_back(t);
    r.namespaces = o.namespaces;
    r.drain_before_s = o.drain_before_s;
    r.gpu_type = facts.gpu_type;
    r.array_job_id = facts.array_job_id;
    r.array_task_id = facts.array_task_id;
    r.het_job_id = facts.het_job_id;
    r.het_offset = facts.het_offset;
    return r;
}

// The user error path: no registration, the steps tell the user why.
int refuse(const PlugConfig &cfg, RunFile rf, const std::string &why) {
    LOG_ERROR("prolog: job %u: node %s: not lent to Kubernetes: %s", rf.job_id,
              rf.slurm_node.c_str(), why.c_str());
    rf.error = why;
    if (auto s = write_run_file(cfg.rundir, rf); !s) LOG_ERROR("prolog: %s", s.message().c_str());
    return 0;
}

}  // namespace

int prolog(spank_t sp, int ac, char **av) {
    RawOptions raw = options_from_getopt(sp);
    if (!raw.any()) return 0;
    auto cfg = plugstack(ac, av, "prolog");
    if (!cfg) return 0;  // an admin error must not drain every node
    PrologEnv e = read_env(sp);
    RunFile rf;
    rf.job_id = e.job_id;
    rf.slurm_node = e.node;
    rf.uid = e.uid;
    rf.gid = e.gid;
    rf.user = e.user;

    auto opts = parse_options(raw, *cfg);
    if (!opts) return refuse(*cfg, rf, opts.message());
    rf.namespaces = opts->namespaces;
    rf.wait_s = opts->wait_s;
    if (!contain_enabled())
        return refuse(*cfg, rf,
                      "PrologFlags=Contain is off in slurm.conf, so no extern step can run the "
                      "pods; ask the admin to set PrologFlags=Alloc,Contain");
    auto job_gpus = parse_index_list(e.job_gpus, "SLURM_JOB_GPUS");
    if (!job_gpus) return refuse(*cfg, rf, job_gpus.message());
    auto lent = lent_here(*opts, e, *job_gpus);
    if (!lent) return refuse(*cfg, rf, lent.message());
    if (auto s = check_job_total(*opts, e.nnodes, static_cast<uint32_t>(job_gpus->size()), *cfg);
        !s)
        return refuse(*cfg, rf, s.message());
    if (lent->empty() && opts->cpus == 0 && opts->mem_mib == 0) return 0;  // not lending here
    SlurmJobFacts facts = slurm_job_facts(e.job_id, e.node, *lent);
    auto share = lent_share(*opts, facts.held, e.job_id, e.node);
    if (!share) return refuse(*cfg, rf, share.message());
    rf.gpus = *lent;
    rf.job_gpus = *job_gpus;
    auto taints = default_taints_for(*cfg, e.job_id);
    if (!taints) return refuse(*cfg, rf, taints.message());

    PluginAgentClient agent(admin_socket_for(*cfg, e.node),
                            static_cast<int>(cfg->timeout_s * 1000));
    auto reply = agent.call("register", PluginCodec::to_json(make_request(e, *cfg, facts, *share,
                                                                          *opts, *lent, *taints)));
    auto name = reply ? PluginCodec::register_reply_from_json(*reply)
                      : Result<proto::RegisterReply>(reply.failure());
    if (!name) {
        rf.error = "the slurm-k8s agent on " + e.node + " did not register the node (" +
                   name.message() + "); this job runs without its Kubernetes part";
        LOG_ERROR("prolog: job %u: node %s: register failed: %s%s", e.job_id, e.node.c_str(),
                  name.message().c_str(),
                  cfg->fail_on_agent_error ? " (on_agent_error=fail: failing the prolog)" : "");
        if (auto s = write_run_file(cfg->rundir, rf); !s)
            LOG_ERROR("prolog: %s", s.message().c_str());
        return cfg->fail_on_agent_error ? -1 : 0;
    }
    rf.registered = true;
    rf.node_name = name->node_name;
    if (name->has_namespaces) {
        rf.namespaces = name->namespaces;
        if (rf.namespaces.empty())
            rf.note =
                "no Kubernetes namespace may run pods on this job's nodes: the job named "
                "none (--k8s-namespace=NS) and this site allows none by default";
    }
    if (auto s = write_run_file(cfg->rundir, rf); !s) {
        LOG_ERROR("prolog: job %u: %s; the shim cannot start", e.job_id, s.message().c_str());
        return cfg->fail_on_agent_error ? -1 : 0;
    }
    LOG_INFO("prolog: job %u: [node %s] registered, GPUs %s lent", e.job_id, rf.node_name.c_str(),
             format_index_list(rf.gpus).c_str());
    return 0;
}

// The graceful stop normally happened in the extern step's exit, which Slurm
// runs before the epilog (see hooks_extern.cc); this deregister is the
// backstop (no extern step, or it failed) and is idempotent at the agent.
int epilog(spank_t sp, int ac, char **av) {
    auto cfg = plugstack(ac, av, "epilog");
    if (!cfg) return 0;
    uint32_t job = item_u32(sp, S_JOB_ID, 0);
    std::string node = env_or("SLURMD_NODENAME");
    auto rf = read_run_file(cfg->rundir, job, node);
    if (!rf) {
        if (rf.error() != Error::NotFound)
            LOG_ERROR("epilog: job %u: %s", job, rf.message().c_str());
        return 0;
    }
    int rc = 0;
    if (rf->registered) {
        proto::DeregisterRequest d;
        d.job_id = job;
        d.slurm_node = node;
        d.grace_s = static_cast<uint32_t>(cfg->grace_s);
        d.reason = job_end_reason(job);
        PluginAgentClient agent(admin_socket_for(*cfg, node),
                                static_cast<int>((cfg->grace_s + cfg->timeout_s) * 1000));
        auto r = agent.call("deregister", PluginCodec::to_json(d));
        if (!r && r.error() != Error::NotFound) {
            LOG_ERROR(
                "epilog: job %u: [node %s] deregister failed: %s; the agent's garbage "
                "collection removes the node later",
                job, rf->node_name.c_str(), r.message().c_str());
            if (cfg->fail_on_agent_error) rc = -1;
        }
    }
    remove_run_file(cfg->rundir, job, node);
    std::string log = run_file_path(cfg->rundir, job, node) + ".shim.log";
    unlink(log.c_str());
    return rc;
}

}  // namespace sk::spank
