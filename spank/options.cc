#include "spank/options.h"

#include <algorithm>
#include <iterator>

#include "common/strings.h"

namespace sk::spank {
namespace {

Failure bad(const char *flag, const std::string &value, const std::string &why) {
    return fail(Error::InvalidArgument, std::string("--") + flag + "=" + value + ": " + why);
}

// Kubernetes and this project own these label/taint prefixes.
bool reserved_prefix(const std::string &prefix) {
    static const char *kReserved[] = {"slurm-k8s", "kubernetes.io", "k8s.io"};
    for (const char *r : kReserved) {
        std::string rs(r);
        if (prefix == rs || ends_with(prefix, "." + rs)) return true;
    }
    return false;
}

Status check_key_prefix(const char *flag, const std::string &value, const std::string &key,
                        const PlugConfig &cfg) {
    auto slash = key.find('/');
    if (slash == std::string::npos) return {};
    std::string prefix = key.substr(0, slash);
    if (reserved_prefix(prefix))
        return bad(flag, value,
                   "key '" + key + "' uses the reserved prefix '" + prefix +
                       "/' (slurm-k8s/, kubernetes.io/ and k8s.io/ are set by the system)");
    if (std::find(cfg.label_prefixes.begin(), cfg.label_prefixes.end(), prefix) ==
        cfg.label_prefixes.end())
        return bad(
            flag, value,
            "key prefix '" + prefix + "/' is not allowed here; allowed: unprefixed keys" +
                (cfg.label_prefixes.empty() ? std::string()
                                            : " and " + join(cfg.label_prefixes, "/, ") + "/"));
    return {};
}

Status parse_gpus(const std::string &v, const PlugConfig &cfg, JobOptions *o) {
    if (v == "all") {
        o->gpus_all = true;
        return {};
    }
    auto n = parse_uint(v, "--k8s-gpus", 1024);
    if (!n || *n == 0)
        return bad("k8s-gpus", v, "expected a number of GPUs per node (1-1024) or 'all'");
    if (cfg.max_gpus_per_node && *n > cfg.max_gpus_per_node)
        return bad("k8s-gpus", v,
                   "this site allows at most " + std::to_string(cfg.max_gpus_per_node) +
                       " GPUs per node to be lent");
    o->gpus = static_cast<uint32_t>(*n);
    return {};
}

Status parse_namespaces(const std::string &v, const PlugConfig &cfg, JobOptions *o) {
    for (const auto &item : split(v, ',')) {
        std::string ns(trim(item));
        if (!k8s::is_dns1123_label(ns))
            return bad("k8s-namespace", v,
                       "'" + ns +
                           "' is not a namespace name (lowercase "
                           "letters, digits and '-', at most 63)");
        if (!cfg.allowed_namespaces.empty() &&
            std::find(cfg.allowed_namespaces.begin(), cfg.allowed_namespaces.end(), ns) ==
                cfg.allowed_namespaces.end())
            return bad("k8s-namespace", v,
                       "namespace '" + ns + "' is not allowed by this site; allowed: " +
                           join(cfg.allowed_namespaces, ","));
        if (std::find(o->namespaces.begin(), o->namespaces.end(), ns) == o->namespaces.end())
            o->namespaces.push_back(ns);
    }
    return {};
}

Status parse_nodes(const std::string &v, const PlugConfig &, JobOptions *o) {
    auto n = parse_uint(v, "--k8s-nodes", 100000);
    if (!n || *n == 0) return bad("k8s-nodes", v, "expected a number of nodes (>= 1)");
    o->nodes = static_cast<uint32_t>(*n);
    return {};
}

Status parse_cpus(const std::string &v, const PlugConfig &, JobOptions *o) {
    auto n = parse_uint(v, "--k8s-cpus", 100000);
    if (!n || *n == 0) return bad("k8s-cpus", v, "expected a number of CPUs (>= 1)");
    o->cpus = static_cast<uint32_t>(*n);
    return {};
}

Status parse_mem(const std::string &v, const PlugConfig &, JobOptions *o) {
    auto m = parse_size_mib(v, "--k8s-mem");
    if (!m || *m == 0) return bad("k8s-mem", v, "expected a size such as 16G, 512M or 2Gi");
    o->mem_mib = *m;
    return {};
}

Status parse_labels(const std::string &v, const PlugConfig &cfg, JobOptions *o) {
    auto l = k8s::parse_labels(v);
    if (!l) return bad("k8s-labels", v, l.message());
    for (const auto &kv : *l)
        if (auto s = check_key_prefix("k8s-labels", v, kv.first, cfg); !s) return s;
    o->labels = *l;
    return {};
}

Status parse_taints(const std::string &v, const PlugConfig &cfg, JobOptions *o) {
    auto t = k8s::parse_taints(v);
    if (!t) return bad("k8s-taints", v, t.message());
    for (const auto &taint : *t)
        if (auto s = check_key_prefix("k8s-taints", v, taint.key, cfg); !s) return s;
    o->taints = *t;
    return {};
}

// --k8s-wait without a value: the site's default wait.
Status parse_wait(const std::string &v, const PlugConfig &cfg, JobOptions *o) {
    if (v.empty()) {
        o->wait_s = cfg.wait_default_s;
        return {};
    }
    auto w = parse_seconds(v, "--k8s-wait");
    if (!w || *w == 0 || *w > 86400)
        return bad("k8s-wait", v, "expected seconds (1-86400), e.g. 120 or 5m");
    o->wait_s = *w;
    return {};
}

// --k8s-drain-before=0 turns a site's default drain ahead of the end off.
Status parse_drain_before(const std::string &v, const PlugConfig &, JobOptions *o) {
    auto d = parse_seconds(v, "--k8s-drain-before");
    if (!d || *d > 86400)
        return bad("k8s-drain-before", v,
                   "expected seconds before the job's end (0-86400), e.g. 120 or 5m");
    o->drain_before_s = static_cast<int64_t>(*d);
    return {};
}

// The --k8s-* flags (options.h, Flag). Slurm prints them in this order in
// `sbatch --help`; parse_options checks them in this order.
constexpr Flag kFlags[] = {
    {"k8s-gpus", "N|all", "Lend N GPUs per node (or all) of this job to Kubernetes.", 1,
     &RawOptions::gpus, parse_gpus},
    {"k8s-nodes", "M", "Lend the last M nodes of the allocation whole to Kubernetes.", 1,
     &RawOptions::nodes, parse_nodes},
    {"k8s-cpus", "N", "CPUs per node offered to Kubernetes pods.", 1, &RawOptions::cpus,
     parse_cpus},
    {"k8s-mem", "SIZE", "Memory per node offered to Kubernetes pods (e.g. 16G).", 1,
     &RawOptions::mem, parse_mem},
    {"k8s-labels", "k=v[,k=v]", "Extra labels on this job's virtual Kubernetes nodes.", 1,
     &RawOptions::labels, parse_labels},
    {"k8s-taints", "k=v:Effect[,...]", "Extra taints on this job's virtual Kubernetes nodes.", 1,
     &RawOptions::taints, parse_taints},
    {"k8s-namespace", "ns[,ns]", "Kubernetes namespaces whose pods may run on this job's nodes.", 1,
     &RawOptions::namespaces, parse_namespaces},
    {"k8s-wait", "SECONDS", "Start the batch script only once this node's virtual node is Ready.",
     2, &RawOptions::wait, parse_wait},
    {"k8s-drain-before", "SECONDS",
     "Stop the pods (SIGTERM, their grace period) this long before the job's time limit.", 1,
     &RawOptions::drain_before, parse_drain_before},
};

// "gpu:4", "gpu:a100:4", "gpu" (= 1); other GRES in a comma list are skipped.
// Returns -1 when no gpu entry, -2 when one is present but not countable.
int64_t gpus_in_gres(const std::string &gres) {
    for (const auto &item : split(gres, ',')) {
        auto parts = split(trim(item), ':');
        if (parts.empty() || parts[0] != "gpu") continue;
        if (parts.size() == 1) return 1;
        std::string count = parts.back();
        auto n = parse_uint(count, "gres", 100000);
        if (n) return static_cast<int64_t>(*n);
        if (parts.size() == 2) return 1;  // gpu:type
        return -2;
    }
    return -1;
}

// --gpus-per-node=[type:]N
int64_t gpus_per_node_value(const std::string &v) {
    auto parts = split(v, ':');
    auto n = parse_uint(parts.back(), "gpus", 100000);
    return n ? static_cast<int64_t>(*n) : -2;
}

void apply_arg(const std::string &name, const std::string &value, GpuRequest *r) {
    int64_t n = -1;
    if (name == "gres") {
        n = gpus_in_gres(value);
        if (n == -1) return;
    } else if (name == "gpus-per-node") {
        n = gpus_per_node_value(value);
    } else if (name == "gpus" || name == "G" || name == "gpus-per-task" ||
               name == "gpus-per-socket") {
        n = -2;  // totals and per-task counts cannot be turned into per-node counts here
    } else {
        return;
    }
    r->any = true;
    r->known = n >= 0;
    r->per_node = n >= 0 ? static_cast<uint32_t>(n) : 0;
}

// Walks "--name=value", "--name value", "-G N", "-GN"; stops at the script.
void scan_args(const std::vector<std::string> &args, size_t end, GpuRequest *r) {
    static const char *kWithValue[] = {"gres", "gpus-per-node", "gpus", "gpus-per-task",
                                       "gpus-per-socket"};
    for (size_t i = 0; i < args.size() && i < end; i++) {
        const std::string &a = args[i];
        if (starts_with(a, "--")) {
            std::string body = a.substr(2);
            auto eq = body.find('=');
            std::string name = body.substr(0, eq);
            bool known = std::any_of(std::begin(kWithValue), std::end(kWithValue),
                                     [&](const char *k) { return name == k; });
            if (!known) continue;
            if (eq != std::string::npos)
                apply_arg(name, body.substr(eq + 1), r);
            else if (i + 1 < args.size())
                apply_arg(name, args[++i], r);
        } else if (starts_with(a, "-G")) {
            if (a.size() > 2)
                apply_arg("G", a.substr(2), r);
            else if (i + 1 < args.size())
                apply_arg("G", args[++i], r);
        }
    }
}

}  // namespace

FlagTable flag_table() {
    return {kFlags, std::size(kFlags)};
}

bool RawOptions::any() const {
    for (const Flag &f : flag_table())
        if (this->*f.raw) return true;
    return false;
}

std::string flag_env_name(const Flag &f) {
    std::string n = std::string("SLURM_SPANK__SLURM_SPANK_OPTION_spank_k8s_") + f.name;
    for (char &c : n)
        if (c == '-') c = '_';
    return n;
}

std::optional<std::string> flag_given_to_step(
    const RawOptions &raw, const std::function<const char *(const std::string &)> &env_of) {
    for (const Flag &f : flag_table()) {
        const std::optional<std::string> &v = raw.*(f.raw);
        if (!v) continue;
        const char *e = env_of(flag_env_name(f));
        if (e && *v == e) continue;
        return "--" + std::string(f.name) + (v->empty() ? "" : "=" + *v);
    }
    return std::nullopt;
}

Result<JobOptions> parse_options(const RawOptions &raw, const PlugConfig &cfg) {
    JobOptions o;
    for (const Flag &f : flag_table())
        if (const auto &v = raw.*f.raw)
            if (auto s = f.parse(*v, cfg, &o); !s) return s.failure();
    if (raw.any() && !o.lends_anything())
        return fail(
            Error::InvalidArgument,
            "--k8s-* options need something to lend: add --k8s-gpus=N|all or --k8s-nodes=M");
    return o;
}

GpuRequest gpu_request(const std::vector<std::string> &args, size_t script_at,
                       const std::string &script, const std::map<std::string, std::string> &env) {
    GpuRequest r;
    std::vector<std::string> from_script;
    for (const auto &line : split(script, '\n')) {
        if (!starts_with(line, "#SBATCH")) {
            if (!line.empty() && line[0] != '#') break;  // sbatch stops at the first command
            continue;
        }
        for (const auto &w : split(trim(std::string_view(line).substr(7)), ' '))
            if (!w.empty()) from_script.push_back(w);
    }
    scan_args(from_script, from_script.size(), &r);
    for (const char *var : {"SBATCH_GRES", "SALLOC_GRES", "SLURM_GRES"}) {
        auto it = env.find(var);
        if (it != env.end() && !it->second.empty()) apply_arg("gres", it->second, &r);
    }
    for (const char *var :
         {"SBATCH_GPUS_PER_NODE", "SALLOC_GPUS_PER_NODE", "SLURM_GPUS_PER_NODE"}) {
        auto it = env.find(var);
        if (it != env.end() && !it->second.empty()) apply_arg("gpus-per-node", it->second, &r);
    }
    scan_args(args, script_at, &r);
    return r;
}

Status check_against_request(const JobOptions &o, const GpuRequest &r, uint32_t nnodes) {
    if (!o.gpus_all && o.gpus == 0 && o.nodes == 0) return {};
    if (!r.any)
        return fail(Error::InvalidArgument,
                    std::string("--k8s-") + (o.nodes ? "nodes" : "gpus") +
                        " lends GPUs, but the job requests none: add --gres=gpu:N (or "
                        "--gpus-per-node=N)");
    if (r.known && r.per_node == 0)
        return fail(Error::InvalidArgument,
                    "--k8s-gpus lends GPUs, but the job requests 0 GPUs per node");
    if (r.known && o.gpus > r.per_node)
        return fail(Error::InvalidArgument,
                    "--k8s-gpus=" + std::to_string(o.gpus) + ": the job requests only " +
                        std::to_string(r.per_node) + " GPUs per node; lend at most " +
                        std::to_string(r.per_node) + " or request more with --gres=gpu:N");
    if (nnodes > 0 && o.nodes > nnodes)
        return fail(Error::InvalidArgument, "--k8s-nodes=" + std::to_string(o.nodes) +
                                                ": the job has only " + std::to_string(nnodes) +
                                                " nodes");
    return {};
}

std::vector<size_t> script_candidates(const std::vector<std::string> &args) {
    std::vector<size_t> out;
    for (size_t i = 0; i < args.size(); i++)
        if (!args[i].empty() && !starts_with(args[i], "-")) out.push_back(i);
    return out;
}

Status check_job_total(const JobOptions &o, uint32_t nnodes, uint32_t gpus_on_node,
                       const PlugConfig &cfg) {
    if (!cfg.max_gpus_per_job) return {};
    uint32_t whole = std::min(o.nodes, nnodes);
    uint32_t per_node = o.gpus_all ? gpus_on_node : std::min(o.gpus, gpus_on_node);
    uint64_t total = static_cast<uint64_t>(whole) * gpus_on_node +
                     static_cast<uint64_t>(nnodes - whole) * per_node;
    if (total > cfg.max_gpus_per_job)
        return fail(Error::Refused, "the job would lend " + std::to_string(total) +
                                        " GPUs; this site allows at most " +
                                        std::to_string(cfg.max_gpus_per_job) + " per job");
    return {};
}

Result<NodeShare> lent_share(const JobOptions &o, const NodeShare &held, uint32_t job_id,
                             const std::string &node) {
    std::string where = " job " + std::to_string(job_id) + " holds on " + node;
    if (held.cpus && o.cpus > held.cpus)
        return fail(Error::Invalid,
                    "--k8s-cpus=" + std::to_string(o.cpus) + " is more than the " +
                        std::to_string(held.cpus) + " CPUs" + where +
                        "; lend at most that many, or ask Slurm for more CPUs per node "
                        "(--cpus-per-task, --ntasks-per-node)");
    if (held.memory_mib && o.mem_mib > held.memory_mib)
        return fail(Error::Invalid, "--k8s-mem=" + std::to_string(o.mem_mib) +
                                        "M is more than the " + std::to_string(held.memory_mib) +
                                        "M of memory" + where +
                                        "; lend at most that much, or ask Slurm for more (--mem)");
    NodeShare out;
    out.cpus = o.cpus ? o.cpus : held.cpus;
    out.memory_mib = o.mem_mib ? o.mem_mib : held.memory_mib;
    return out;
}

}  // namespace sk::spank
