// The plugin's pure logic: plugstack config, option validation and policy,
// GPU request detection, GPU split and trainer env edits, host lists, the
// run-file format, slurm.conf and /proc/PID/cgroup readers.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/strings.h"
#include "spank/device_cgroup.h"
#include "spank/gpu_split.h"
#include "spank/hostlist.h"
#include "spank/options.h"
#include "spank/plugstack.h"
#include "spank/runfile.h"
#include "spank/shim_keeper.h"
#include "spank/shim_process.h"
#include "spank/slurm_facts.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::spank;

static Result<PlugConfig> cfg_of(std::vector<const char *> args) {
    return parse_plugstack(static_cast<int>(args.size()), args.data());
}

// ---- plugstack.conf ----
struct PlugCase {
    std::vector<const char *> args;
    bool ok;
    const char *in_message;  // when !ok: the key and the value are named
};
static const PlugCase kPlug[] = {
    {{}, true, ""},
    {{"socket=/run/x.sock", "timeout=2", "grace=10s", "on_agent_error=fail"}, true, ""},
    {{"allowed_namespaces=rl,infer", "label_prefixes=example.com"}, true, ""},
    {{"default_taint="}, true, ""},
    {{"bogus=1"}, false, "bogus"},
    {{"timeout=abc"}, false, "abc"},
    {{"timeout=0"}, false, "timeout"},
    {{"socket=relative.sock"}, false, "socket"},
    {{"on_agent_error=maybe"}, false, "maybe"},
    {{"allowed_namespaces=Bad_NS"}, false, "Bad_NS"},
    {{"default_taint=nocolon"}, false, "nocolon"},
    {{"max_gpus_per_node=x"}, false, "max_gpus_per_node"},
    {{"noequals"}, false, "noequals"},
    {{"timeout=1", "timeout=2"}, false, "timeout"},
    {{"shim_nice=-10"}, true, ""},
    {{"shim_nice=20"}, false, "shim_nice='20' is not a nice value"},
    {{"runtime_config=/etc/slurm-k8s/runtime.conf"}, true, ""},
    {{"runtime_config=runtime.conf"}, false, "runtime_config"},
    {{"gpu_device=/dev/dri/card{index}"}, true, ""},
    {{"gpu_device=dev/nvidia{index}"}, false, "gpu_device='dev/nvidia{index}'"},
    {{"gpu_device=/dev/nvidia"}, false, "holds {index} once"},
    {{"gpu_device=/dev/{index}/x"}, false, "last component"},
    {{"gpu_device=/dev/n{index}{index}"}, false, "gpu_device"},
};
START_TEST(plugstack_table) {
    const auto &c = kPlug[_i];
    auto r = cfg_of(c.args);
    ck_assert_msg(r.ok() == c.ok, "case %d: %s", _i, r.ok() ? "ok" : r.message().c_str());
    if (!c.ok)
        ck_assert_msg(r.message().find(c.in_message) != std::string::npos, "'%s' lacks '%s'",
                      r.message().c_str(), c.in_message);
}
END_TEST

START_TEST(plugstack_values) {
    auto r = cfg_of({"socket=/s", "timeout=2", "grace=1m", "on_agent_error=fail",
                     "allowed_namespaces=a,b", "max_gpus_per_node=4"});
    ck_assert(r.ok());
    ck_assert_sstr_eq(r->socket, "/s");
    ck_assert_uint_eq(r->timeout_s, 2);
    ck_assert_uint_eq(r->grace_s, 60);
    ck_assert(r->fail_on_agent_error);
    ck_assert_uint_eq(r->allowed_namespaces.size(), 2);
    ck_assert(!cfg_of({})->fail_on_agent_error);  // default warn
    ck_assert_int_eq(cfg_of({})->shim_nice, -5);  // the shim ahead of its pods
    ck_assert_int_eq(cfg_of({"shim_nice=3"})->shim_nice, 3);
    ck_assert(cfg_of({})->runtime_config.empty());  // the process runtime only
    ck_assert_sstr_eq(cfg_of({"runtime_config=/r.conf"})->runtime_config, "/r.conf");
    ck_assert_sstr_eq(cfg_of({})->gpu_device, "/dev/nvidia{index}");
    auto t = default_taints_for(*cfg_of({}), 42);
    ck_assert(t.ok() && t->size() == 1);
    ck_assert_sstr_eq(k8s::format_taint((*t)[0]), "slurm-k8s/job=42:NoSchedule");
    ck_assert(default_taints_for(*cfg_of({"default_taint="}), 42)->empty());
    ck_assert_sstr_eq(socket_for(*r, "n1"), "/s");
    ck_assert_sstr_eq(socket_for(*cfg_of({"socket=/run/{node}/a-{node}.sock"}), "n2"),
                      "/run/n2/a-n2.sock");
    // The plugin's own calls go to the admin socket beside it (as the
    // agent's default admin_socket_path), or to admin_socket=.
    ck_assert_sstr_eq(admin_socket_for(*cfg_of({}), "n1"), "/run/slurm-k8s/admin/agent.sock");
    ck_assert_sstr_eq(admin_socket_for(*cfg_of({"socket=/run/{node}/a-{node}.sock"}), "n2"),
                      "/run/n2/admin/a-n2.sock");
    ck_assert_sstr_eq(admin_socket_for(*cfg_of({"admin_socket=/r/{node}.sock"}), "n3"),
                      "/r/n3.sock");
}
END_TEST

// ---- options ----
struct OptCase {
    const char *gpus, *nodes, *labels, *taints, *ns, *mem, *wait;
    bool ok;
    const char *in_message;
};
static const OptCase kOpt[] = {
    {"2", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, true, ""},
    {"all", nullptr, "team=rl,tier=a", "gpu=yes:NoSchedule", "rl", "16G", "", true, ""},
    {nullptr, "1", nullptr, nullptr, nullptr, nullptr, "120", true, ""},
    {"abc", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, false, "--k8s-gpus=abc"},
    {"0", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, false, "--k8s-gpus=0"},
    {"-1", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, false, "or 'all'"},
    {"9", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, false, "at most 8"},
    {nullptr, "0", nullptr, nullptr, nullptr, nullptr, nullptr, false, "--k8s-nodes=0"},
    {"1", nullptr, "a", nullptr, nullptr, nullptr, nullptr, false, "--k8s-labels=a"},
    {"1", nullptr, "slurm-k8s/job-id=1", nullptr, nullptr, nullptr, nullptr, false, "reserved"},
    {"1", nullptr, "node.kubernetes.io/x=1", nullptr, nullptr, nullptr, nullptr, false, "reserved"},
    {"1", nullptr, "other.org/x=1", nullptr, nullptr, nullptr, nullptr, false, "not allowed"},
    {"1", nullptr, "example.com/x=1", nullptr, nullptr, nullptr, nullptr, true, ""},
    {"1", nullptr, nullptr, "k=v", nullptr, nullptr, nullptr, false, "--k8s-taints=k=v"},
    {"1", nullptr, nullptr, "k=v:Sometimes", nullptr, nullptr, nullptr, false, "--k8s-taints"},
    {"1", nullptr, nullptr, "k8s.io/x=v:NoSchedule", nullptr, nullptr, nullptr, false, "reserved"},
    {"1", nullptr, nullptr, nullptr, "prod", nullptr, nullptr, false, "allowed: rl,default"},
    {"1", nullptr, nullptr, nullptr, "Bad", nullptr, nullptr, false, "not a namespace"},
    {"1", nullptr, nullptr, nullptr, nullptr, "lots", nullptr, false, "--k8s-mem=lots"},
    {"1", nullptr, nullptr, nullptr, nullptr, nullptr, "never", false, "--k8s-wait=never"},
    {nullptr, nullptr, "a=b", nullptr, nullptr, nullptr, nullptr, false, "need something to lend"},
};
START_TEST(options_table) {
    const auto &c = kOpt[_i];
    auto cfg = cfg_of(
        {"max_gpus_per_node=8", "allowed_namespaces=rl,default", "label_prefixes=example.com"});
    ck_assert(cfg.ok());
    RawOptions raw;
    auto set = [](std::optional<std::string> *d, const char *v) {
        if (v) *d = v;
    };
    set(&raw.gpus, c.gpus);
    set(&raw.nodes, c.nodes);
    set(&raw.labels, c.labels);
    set(&raw.taints, c.taints);
    set(&raw.namespaces, c.ns);
    set(&raw.mem, c.mem);
    set(&raw.wait, c.wait);
    auto r = parse_options(raw, *cfg);
    ck_assert_msg(r.ok() == c.ok, "case %d: %s", _i, r.ok() ? "ok" : r.message().c_str());
    if (!c.ok)
        ck_assert_msg(r.message().find(c.in_message) != std::string::npos, "'%s' lacks '%s'",
                      r.message().c_str(), c.in_message);
}
END_TEST

START_TEST(options_values) {
    RawOptions raw;
    raw.gpus = "all";
    raw.mem = "2G";
    raw.wait = "";
    raw.namespaces = "rl,rl,infer";
    auto r = parse_options(raw, *cfg_of({}));
    ck_assert(r.ok());
    ck_assert(r->gpus_all);
    ck_assert_uint_eq(r->mem_mib, 2048);
    ck_assert_uint_eq(r->wait_s, 300);  // wait_default
    ck_assert_sstr_eq(join(r->namespaces, ","), "rl,infer");
    ck_assert_int_eq(r->drain_before_s, -1);  // absent: the agent's drain_before_end
}
END_TEST

// srun inside an allocation: a flag whose value is the job's (its
// environment form) came from the job; any other came from srun's command line.
START_TEST(flag_given_to_step_cases) {
    std::map<std::string, std::string> env = {
        {"SLURM_SPANK__SLURM_SPANK_OPTION_spank_k8s_k8s_gpus", "2"},
        {"SLURM_SPANK__SLURM_SPANK_OPTION_spank_k8s_k8s_wait", ""}};
    auto env_of = [&](const std::string &n) -> const char * {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    RawOptions raw;
    ck_assert(!flag_given_to_step(raw, env_of));  // srun without flags
    raw.gpus = "2";
    raw.wait = "";
    ck_assert(!flag_given_to_step(raw, env_of));  // the job's own, through the environment
    raw.gpus = "1";
    auto g = flag_given_to_step(raw, env_of);
    ck_assert(g.has_value());
    ck_assert_sstr_eq(g->c_str(), "--k8s-gpus=1");
    raw.gpus = "2";
    raw.drain_before = "60";  // not a flag of the job at all
    g = flag_given_to_step(raw, env_of);
    ck_assert(g.has_value());
    ck_assert_sstr_eq(g->c_str(), "--k8s-drain-before=60");
    ck_assert_sstr_eq(flag_env_name(flag_table()[0]).c_str(),
                      "SLURM_SPANK__SLURM_SPANK_OPTION_spank_k8s_k8s_gpus");
}
END_TEST

// Slurm's GRES detail of a job on a node -> the type of each GPU index.
START_TEST(gpu_types_from_detail) {
    auto t = gpu_types_from_gres_detail("gpu:a100:3(IDX:0-1,3)");
    ck_assert_uint_eq(t.size(), 3);
    ck_assert_sstr_eq(t[3].c_str(), "a100");
    ck_assert(!t.count(2));
    ck_assert_sstr_eq(lent_gpu_type(t, {3}).c_str(), "a100");
    ck_assert_sstr_eq(lent_gpu_type(t, {1, 3}).c_str(), "a100");
    ck_assert_sstr_eq(lent_gpu_type(t, {2}).c_str(), "");  // not the job's
    ck_assert_sstr_eq(lent_gpu_type(t, {}).c_str(), "");
    // Two types on one node: only a lent set of one type has a product.
    t = gpu_types_from_gres_detail("gpu:a100:1(IDX:0),gpu:v100:2(IDX:2-3)");
    ck_assert_sstr_eq(lent_gpu_type(t, {2, 3}).c_str(), "v100");
    ck_assert_sstr_eq(lent_gpu_type(t, {0, 3}).c_str(), "");
    // Untyped, other GRES, a count left out, unreadable entries.
    ck_assert_sstr_eq(lent_gpu_type(gpu_types_from_gres_detail("gpu:4(IDX:0-3)"), {3}).c_str(), "");
    t = gpu_types_from_gres_detail("mps:100(0),gpu:h100(IDX:1)");
    ck_assert_sstr_eq(lent_gpu_type(t, {1}).c_str(), "h100");
    ck_assert(gpu_types_from_gres_detail("gpu:a100:2(IDX:N/A)").empty());
    ck_assert(gpu_types_from_gres_detail("gpu:a100:2").empty());
    ck_assert(gpu_types_from_gres_detail("").empty());
}
END_TEST

// --k8s-drain-before: seconds (or 5m) up to a day; 0 turns a site default off.
START_TEST(options_drain_before) {
    struct {
        const char *v;
        int64_t want;  // -2: refused
    } cases[] = {{"120", 120},  {"5m", 300},  {"0", 0},   {"86400", 86400},
                 {"86401", -2}, {"soon", -2}, {"-5", -2}, {"", -2}};
    for (const auto &c : cases) {
        RawOptions raw;
        raw.gpus = "1";
        raw.drain_before = c.v;
        auto r = parse_options(raw, *cfg_of({}));
        if (c.want == -2) {
            ck_assert_msg(!r.ok(), "'%s' accepted", c.v);
            ck_assert_msg(r.message().find(std::string("--k8s-drain-before=") + c.v) == 0, "%s",
                          r.message().c_str());
        } else {
            ck_assert_msg(r.ok(), "'%s': %s", c.v, r.ok() ? "" : r.message().c_str());
            ck_assert_int_eq(r->drain_before_s, c.want);
        }
    }
}
END_TEST

// ---- what the job asked Slurm for ----
struct ReqCase {
    std::vector<std::string> args;
    const char *script;
    const char *gres_env;
    const char *k8s_gpus;
    bool ok;
    const char *in_message;
};
static const ReqCase kReq[] = {
    {{"--gres=gpu:4", "job.sh"}, "", nullptr, "2", true, ""},
    {{"--gres=gpu:4", "job.sh"}, "", nullptr, "6", false, "requests only 4 GPUs"},
    {{"--gres", "gpu:a100:2", "job.sh"}, "", nullptr, "2", true, ""},
    {{"--gres=gpu:a100:2", "job.sh"}, "", nullptr, "3", false, "only 2"},
    {{"--gpus-per-node=4", "job.sh"}, "", nullptr, "4", true, ""},
    {{"-N", "3", "job.sh"}, "#!/bin/bash\n#SBATCH --gres=gpu:2\necho\n", nullptr, "2", true, ""},
    {{"-N", "3", "job.sh"}, "#!/bin/bash\n#SBATCH --gres=gpu:2\n", nullptr, "3", false, "only 2"},
    {{"--gres=gpu:4", "job.sh"}, "#!/bin/bash\n#SBATCH --gres=gpu:1\n", nullptr, "3", true, ""},
    {{"job.sh"}, "#!/bin/bash\necho\n#SBATCH --gres=gpu:8\n", nullptr, "2", false, "requests none"},
    {{"job.sh"}, "", "gpu:2", "2", true, ""},
    {{"job.sh"}, "", nullptr, "1", false, "requests none"},
    {{"-G", "8", "job.sh"}, "", nullptr, "2", true, ""},  // total: not countable per node
    {{"job.sh", "--gres=gpu:8"}, "", nullptr, "2", false, "requests none"},  // script's args
    {{"--gres=gpu:0", "job.sh"}, "", nullptr, "1", false, "0 GPUs"},
};
START_TEST(gpu_request_table) {
    const auto &c = kReq[_i];
    std::map<std::string, std::string> env;
    if (c.gres_env) env["SBATCH_GRES"] = c.gres_env;
    size_t at = c.args.size();
    for (size_t i : script_candidates(c.args))
        if (c.args[i] == "job.sh") at = i;
    auto req = gpu_request(c.args, at, c.script, env);
    RawOptions raw;
    raw.gpus = c.k8s_gpus;
    auto o = parse_options(raw, *cfg_of({}));
    ck_assert(o.ok());
    auto s = check_against_request(*o, req, 0);
    ck_assert_msg(s.ok() == c.ok, "case %d: %s", _i, s.ok() ? "ok" : s.message().c_str());
    if (!c.ok)
        ck_assert_msg(s.message().find(c.in_message) != std::string::npos, "'%s' lacks '%s'",
                      s.message().c_str(), c.in_message);
}
END_TEST

START_TEST(job_total_limit) {
    auto cfg = cfg_of({"max_gpus_per_job=8"});
    JobOptions o;
    o.gpus = 2;
    ck_assert(check_job_total(o, 4, 4, *cfg).ok());   // 8
    ck_assert(!check_job_total(o, 5, 4, *cfg).ok());  // 10
    o.gpus = 0;
    o.nodes = 3;
    auto s = check_job_total(o, 4, 4, *cfg);  // 12
    ck_assert(!s.ok());
    ck_assert(s.message().find("at most 8") != std::string::npos);
}
END_TEST

// The virtual node's CPUs and memory: the job's share on the node unless
// --k8s-cpus/--k8s-mem name a part of it, which may not exceed it.
START_TEST(lent_share_checked) {
    JobOptions o;
    NodeShare held{4, 8000};
    auto all = lent_share(o, held, 7, "n1");
    ck_assert(all.ok());
    ck_assert_uint_eq(all->cpus, 4);
    ck_assert_uint_eq(all->memory_mib, 8000);
    o.cpus = 2;
    o.mem_mib = 1000;
    auto part = lent_share(o, held, 7, "n1");
    ck_assert(part.ok());
    ck_assert_uint_eq(part->cpus, 2);
    ck_assert_uint_eq(part->memory_mib, 1000);
    o.cpus = 5;
    auto cpus = lent_share(o, held, 7, "n1");
    ck_assert(!cpus.ok());
    ck_assert_sstr_eq(cpus.message(),
                      "--k8s-cpus=5 is more than the 4 CPUs job 7 holds on n1; lend at most that "
                      "many, or ask Slurm for more CPUs per node (--cpus-per-task, "
                      "--ntasks-per-node)");
    o.cpus = 4;
    o.mem_mib = 9000;
    auto mem = lent_share(o, held, 7, "n1");
    ck_assert(!mem.ok());
    ck_assert(mem.message().find("--k8s-mem=9000M is more than the 8000M of memory job 7 holds "
                                 "on n1") == 0);
    // Slurm named no memory (the whole node) or could not be asked: the
    // request stands, unchecked where unknown.
    auto free = lent_share(o, NodeShare{4, 0}, 7, "n1");
    ck_assert(free.ok());
    ck_assert_uint_eq(free->memory_mib, 9000);
    o = JobOptions{};
    auto unknown = lent_share(o, NodeShare{}, 7, "n1");
    ck_assert(unknown.ok());
    ck_assert_uint_eq(unknown->cpus, 0);  // the agent then offers the host's
    ck_assert_uint_eq(unknown->memory_mib, 0);
}
END_TEST

// ---- GPU split ----
struct LentCase {
    const char *job_gpus;
    bool all;
    uint32_t want;
    bool ok;
    const char *lent;
};
static const LentCase kLent[] = {
    {"0,1,2,3", false, 2, true, "2,3"},
    {"4,5,6,7", false, 1, true, "7"},
    {"0,1,2,3", true, 0, true, "0,1,2,3"},
    {"0,1", false, 0, true, ""},
    {"1,3", false, 2, true, "1,3"},
    {"0,1", false, 3, false, ""},
    {"", false, 1, false, ""},
};
START_TEST(lent_table) {
    const auto &c = kLent[_i];
    auto g = parse_index_list(c.job_gpus, "x");
    std::vector<int> gpus = g.ok() ? *g : std::vector<int>{};
    auto r = choose_lent(gpus, c.all, c.want);
    ck_assert_msg(r.ok() == c.ok, "case %d", _i);
    if (c.ok)
        ck_assert_sstr_eq(format_index_list(*r), c.lent);
    else
        ck_assert(r.message().find("only") != std::string::npos);
}
END_TEST

struct EnvCase {
    std::map<std::string, std::string> env;
    const char *lent;
    bool ok;
    std::map<std::string, std::string> want;
};
static const EnvCase kEnv[] = {
    // no renumbering: CUDA_VISIBLE_DEVICES holds global indices
    {{{"CUDA_VISIBLE_DEVICES", "4,5,6,7"},
      {"SLURM_JOB_GPUS", "4,5,6,7"},
      {"SLURM_GPUS_ON_NODE", "4"}},
     "6,7",
     true,
     {{"CUDA_VISIBLE_DEVICES", "4,5"}, {"SLURM_JOB_GPUS", "4,5"}, {"SLURM_GPUS_ON_NODE", "2"}}},
    // ConstrainDevices renumbering: 0..n-1, positions map to SLURM_JOB_GPUS
    {{{"CUDA_VISIBLE_DEVICES", "0,1,2,3"},
      {"GPU_DEVICE_ORDINAL", "0,1,2,3"},
      {"ROCR_VISIBLE_DEVICES", "0,1,2,3"},
      {"SLURM_JOB_GPUS", "4,5,6,7"}},
     "6,7",
     true,
     {{"CUDA_VISIBLE_DEVICES", "0,1"},
      {"GPU_DEVICE_ORDINAL", "0,1"},
      {"ROCR_VISIBLE_DEVICES", "0,1"},
      {"SLURM_JOB_GPUS", "4,5"}}},
    // srun step with a subset: SLURM_STEP_GPUS is the reference
    {{{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_STEP_GPUS", "1,3"}, {"SLURM_JOB_GPUS", "0,1,2,3"}},
     "2,3",
     true,
     {{"CUDA_VISIBLE_DEVICES", "0"}, {"SLURM_STEP_GPUS", "1"}, {"SLURM_JOB_GPUS", "0,1"}}},
    // all lent: the trainer sees no GPU
    {{{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_JOB_GPUS", "0,1"}, {"ZE_AFFINITY_MASK", "0,1"}},
     "0,1",
     true,
     {{"CUDA_VISIBLE_DEVICES", ""}, {"SLURM_JOB_GPUS", ""}, {"ZE_AFFINITY_MASK", ""}}},
    // none lent here
    {{{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_JOB_GPUS", "0,1"}},
     "",
     true,
     {{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_JOB_GPUS", "0,1"}}},
    // no GPUs in this step: nothing to edit
    {{{"PATH", "/bin"}}, "2,3", true, {}},
    // lists that cannot be matched
    {{{"CUDA_VISIBLE_DEVICES", "0,1,2"}, {"SLURM_JOB_GPUS", "0,1"}}, "1", false, {}},
};
START_TEST(env_table) {
    const auto &c = kEnv[_i];
    auto lent = parse_index_list(c.lent, "lent");
    auto r = trainer_gpu_env(c.env, lent.ok() ? *lent : std::vector<int>{});
    ck_assert_msg(r.ok() == c.ok, "case %d: %s", _i, r.ok() ? "ok" : r.message().c_str());
    if (!c.ok) return;
    ck_assert_uint_eq(r->size(), c.want.size());
    for (const auto &kv : c.want) {
        ck_assert_msg(r->count(kv.first), "case %d: %s not set", _i, kv.first.c_str());
        ck_assert_sstr_eq(r->at(kv.first), kv.second);
    }
}
END_TEST

// ---- host lists ----
struct HostCase {
    const char *in;
    bool ok;
    const char *out;
};
static const HostCase kHost[] = {
    {"n1", true, "n1"},
    {"n[1-3]", true, "n1 n2 n3"},
    {"n[1-2,5],gpu[08-10],login", true, "n1 n2 n5 gpu08 gpu09 gpu10 login"},
    {"n[3-1]", false, ""},
    {"n[1-", false, ""},
    {"n1,,n2", false, ""},
};
START_TEST(hostlist_table) {
    const auto &c = kHost[_i];
    auto r = expand_hostlist(c.in);
    ck_assert_msg(r.ok() == c.ok, "'%s'", c.in);
    if (c.ok) ck_assert_sstr_eq(join(*r, " "), c.out);
}
END_TEST

// ---- run file ----
START_TEST(runfile_roundtrip) {
    RunFile r;
    r.job_id = 42;
    r.slurm_node = "n1";
    r.uid = 2001;
    r.gid = 2001;
    r.user = "u";
    r.gpus = {2, 3};
    r.job_gpus = {0, 1, 2, 3};
    r.namespaces = {"rl"};
    r.node_name = "slurm-n1-42";
    r.registered = true;
    r.wait_s = 60;
    r.note = "no namespace";
    char dir[] = "/tmp/sk-runfile-XXXXXX";
    ck_assert(mkdtemp(dir));
    std::string rundir = std::string(dir) + "/jobs";
    ck_assert(write_run_file(rundir, r).ok());
    ck_assert_sstr_eq(run_file_path(rundir, 42, "n1"), rundir + "/job_42_n1.json");
    auto back = read_run_file(rundir, 42, "n1");
    ck_assert_msg(back.ok(), "%s", back.ok() ? "" : back.message().c_str());
    ck_assert_sstr_eq(format_index_list(back->gpus), "2,3");
    ck_assert_sstr_eq(format_index_list(back->job_gpus), "0,1,2,3");
    ck_assert_sstr_eq(back->node_name, "slurm-n1-42");
    ck_assert(back->registered);
    ck_assert_uint_eq(back->wait_s, 60);
    ck_assert_sstr_eq(back->note, "no namespace");
    ck_assert(read_run_file(rundir, 42, "n2").error() == Error::NotFound);  // keyed by node
    remove_run_file(rundir, 42, "n1");
    ck_assert(read_run_file(rundir, 42, "n1").error() == Error::NotFound);
    rmdir(rundir.c_str());
    rmdir(dir);
}
END_TEST

static const char *const kBadRun[] = {
    "",
    "{}",
    "[1]",
    "{\"job_id\":\"x\",\"slurm_node\":\"n1\",\"uid\":1,\"gid\":1}",
    "{\"job_id\":1,\"slurm_node\":\"n1\",\"uid\":1,\"gid\":1,\"gpus\":[\"a\"]}",
};
START_TEST(runfile_bad) {
    ck_assert(!decode_run_file(kBadRun[_i]).ok());
}
END_TEST

// ---- slurm.conf and /proc/PID/cgroup ----
struct ConfCase {
    const char *text;
    bool contain;
};
static const ConfCase kConf[] = {
    {"PrologFlags=Alloc,Contain\n", true}, {"prologflags = contain # extern step\n", true},
    {"PrologFlags=Alloc\n", false},        {"", false},
    {"#PrologFlags=Contain\n", false},     {"PrologFlags=Contain\nPrologFlags=Alloc\n", false},
};
START_TEST(conf_table) {
    ck_assert_int_eq(prolog_flags_contain(kConf[_i].text), kConf[_i].contain);
}
END_TEST

START_TEST(cgroup_dirs) {
    const char *text =
        "12:freezer:/slurm_n1/uid_2001/job_7\n"
        "11:devices:/slurm_n1/uid_2001/job_7/step_extern\n"
        "10:cpuset:/slurm_n1/uid_2001/job_7/step_extern\n"
        "9:memory:/\n"
        "8:cpu,cpuacct:/slurm/uid_2001/job_77/step_0\n"
        "1:name=systemd:/slurm_n1/uid_2001/job_7\n"
        "0::/\n";
    auto d = job_cgroup_dirs(text, 7, "/cg");
    ck_assert_sstr_eq(join(d, " "),
                      "/cg/freezer/slurm_n1/uid_2001/job_7 /cg/devices/slurm_n1/uid_2001/job_7 "
                      "/cg/cpuset/slurm_n1/uid_2001/job_7");
    ck_assert(job_cgroup_dirs(text, 8, "/cg").empty());
}
END_TEST

// SLURM_JOB_CPUS_PER_NODE as Slurm writes it: "N" or "N(xM)" per run of nodes.
struct CpusCase {
    const char *text;
    size_t node;
    uint32_t cpus;
};
static const CpusCase kCpus[] = {
    {"4", 0, 4},       {"4", 1, 0},     {"4(x2),2", 0, 4}, {"4(x2),2", 1, 4}, {"4(x2),2", 2, 2},
    {"4(x2),2", 3, 0}, {"1,2,3", 2, 3}, {"2(x3)", 2, 2},   {"", 0, 0},        {"x", 0, 0},
    {"4(x0)", 0, 0},   {"4(x2", 0, 0},  {"4(xa),2", 0, 0}, {" 3 , 5 ", 1, 5}, {"-1", 0, 0},
};
START_TEST(cpus_per_node_table) {
    ck_assert_uint_eq(cpus_per_node_at(kCpus[_i].text, kCpus[_i].node), kCpus[_i].cpus);
}
END_TEST

// ---- GPUs denied at the device (spank/device_cgroup.h) ----
// Recorded /proc/self/cgroup of an extern slurmstepd on Slurm 22.05 with
// cgroup v1 (this project's harness) and of one on a pure v2 host.
static const char kStepdV1[] =
    "12:pids:/\n"
    "11:freezer:/slurm_n1/uid_2001/job_7/step_extern\n"
    "10:devices:/slurm_n1/uid_2001/job_7/step_extern/slurm\n"
    "9:cpu,cpuacct:/slurm_n1/uid_2001/job_7/step_extern\n"
    "4:memory:/init.scope/12\n"
    "1:name=systemd:/\n"
    "0::/\n";
static const char kStepdV2[] = "0::/system.slice/n1_slurmstepd.scope/job_7/step_extern/slurm\n";

START_TEST(devices_dir_of_step) {
    auto d = step_devices_dir(kStepdV1, 7, "step_batch", "/cg");
    ck_assert_msg(d.ok(), "%s", d.ok() ? "" : d.message().c_str());
    ck_assert_sstr_eq(*d, "/cg/devices/slurm_n1/uid_2001/job_7/step_batch");
    auto other = step_devices_dir(kStepdV1, 8, "step_0", "/cg");  // not this job's
    ck_assert(!other.ok() && other.error() == Error::NotFound);
    ck_assert_msg(other.message().find("ConstrainDevices=yes") != std::string::npos, "%s",
                  other.message().c_str());
    // The devices hierarchy at the root: Slurm does not constrain devices.
    auto none =
        step_devices_dir("10:devices:/\n9:freezer:/slurm/uid_1/job_7/step_0\n", 7, "step_0", "/cg");
    ck_assert(!none.ok() && none.error() == Error::NotFound);
    // A hierarchy listing devices with another controller still counts.
    auto joined = step_devices_dir("3:devices,pids:/slurm/uid_1/job_7/step_0\n", 7, "step_0", "/c");
    ck_assert(joined.ok());
    ck_assert_sstr_eq(*joined, "/c/devices,pids/slurm/uid_1/job_7/step_0");
    ck_assert(!step_devices_dir("3:nodevices:/slurm/uid_1/job_7/step_0\n", 7, "step_0", "/c").ok());
    auto v2 = step_devices_dir(kStepdV2, 7, "step_extern", "/cg");
    ck_assert(!v2.ok() && v2.error() == Error::Unavailable);
    ck_assert_msg(v2.message().find("cgroup v2") != std::string::npos, "%s", v2.message().c_str());
    // cgroup v2: the job's directory from the stepd's own line; none for
    // another job; Unavailable on a v1 host (the devices hierarchy there).
    auto job = v2_job_dir(kStepdV2, 7, "/cg");
    ck_assert_msg(job.ok(), "%s", job.ok() ? "" : job.message().c_str());
    ck_assert_sstr_eq(*job, "/cg/system.slice/n1_slurmstepd.scope/job_7");
    auto not_job = v2_job_dir(kStepdV2, 70, "/cg");
    ck_assert(!not_job.ok() && not_job.error() == Error::NotFound);
    ck_assert(v2_job_dir(kStepdV1, 7, "/cg").error() == Error::Unavailable);
    ck_assert(v2_job_dir("0::/\n", 7, "/cg").error() == Error::NotFound);
    ck_assert_sstr_eq(step_component(0), "step_0");
    ck_assert_sstr_eq(step_component(12), "step_12");
    ck_assert_sstr_eq(step_component(0xfffffffb), "step_batch");
    ck_assert_sstr_eq(step_component(0xfffffffc), "step_extern");
    ck_assert_sstr_eq(step_component(0xfffffffa), "step_interactive");
    ck_assert_sstr_eq(format_index_list(indices_without({0, 1, 2, 3}, {2, 3})), "0,1");
    ck_assert(indices_without({2, 3}, {2, 3}).empty());
}
END_TEST

// The device numbers come from the nodes themselves (lstat, no symlink
// followed); /dev/ttyN are character devices on every Linux host.
START_TEST(gpu_devices_from_nodes) {
    auto d = gpu_char_devices("/dev/tty{index}", {1, 2});
    ck_assert_msg(d.ok(), "%s", d.ok() ? "" : d.message().c_str());
    ck_assert_uint_eq(d->size(), 2);
    ck_assert_sstr_eq((*d)[1].path, "/dev/tty2");
    ck_assert_uint_eq((*d)[0].major, 4);  // the virtual consoles' major
    ck_assert_uint_eq((*d)[0].minor, 1);
    ck_assert_uint_eq((*d)[1].minor, 2);
    ck_assert_int_eq((*d)[1].index, 2);
    char tmpl[] = "/tmp/sk-gpunode-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    std::string dir = tmpl;
    FILE *f = fopen((dir + "/gpu0").c_str(), "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(symlink("/dev/tty1", (dir + "/gpu1").c_str()), 0);
    auto plain = gpu_char_devices(dir + "/gpu{index}", {0});
    ck_assert(!plain.ok() && plain.message().find("not a character device") != std::string::npos);
    auto link = gpu_char_devices(dir + "/gpu{index}", {1});
    ck_assert(!link.ok() && link.message().find("symlink is not followed") != std::string::npos);
    auto missing = gpu_char_devices(dir + "/gpu{index}", {2});
    ck_assert(!missing.ok() && missing.error() == Error::NotFound);
    ck_assert_msg(missing.message().find("gres.conf") != std::string::npos, "%s",
                  missing.message().c_str());
    ck_assert(!gpu_char_devices("/dev/tty", {1}).ok());
    ck_assert(gpu_char_devices("/dev/tty{index}", {}).ok());
    unlink((dir + "/gpu0").c_str());
    unlink((dir + "/gpu1").c_str());
    rmdir(dir.c_str());
}
END_TEST

// One write per rule into the step's devices.deny (a regular file here, so
// the writes stand end to end); a symlinked step directory is not entered.
START_TEST(deny_writes_one_rule_each) {
    char tmpl[] = "/tmp/sk-devcg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    std::string dir = tmpl;
    std::string step = dir + "/step_0";
    ck_assert_int_eq(mkdir(step.c_str(), 0700), 0);
    FILE *f = fopen((step + "/devices.deny").c_str(), "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    std::vector<CharDevice> devs(2);
    devs[0].major = 195;
    devs[0].minor = 2;
    devs[1].major = 195;
    devs[1].minor = 3;
    ck_assert(deny_devices(step, devs).ok());
    auto text = read_file(step + "/devices.deny", 4096);
    ck_assert(text.ok());
    ck_assert_sstr_eq(*text, "c 195:2 rwmc 195:3 rwm");
    ck_assert(deny_devices(step, {}).ok());  // nothing to deny: nothing opened
    ck_assert_int_eq(symlink(step.c_str(), (dir + "/link").c_str()), 0);
    auto via_link = deny_devices(dir + "/link", devs);
    ck_assert(!via_link.ok() && via_link.error() == Error::Io);
    auto absent = deny_devices(dir + "/step_9", devs);
    ck_assert(!absent.ok() && absent.message().find("step_9") != std::string::npos);
    ck_assert_int_eq(mkdir((dir + "/nofile").c_str(), 0700), 0);
    auto nofile = deny_devices(dir + "/nofile", devs);
    ck_assert(!nofile.ok() && nofile.message().find("devices.deny") != std::string::npos);
    unlink((step + "/devices.deny").c_str());
    unlink((dir + "/link").c_str());
    rmdir(step.c_str());
    rmdir((dir + "/nofile").c_str());
    rmdir(dir.c_str());
}
END_TEST

// The shim inherits none of slurmstepd's descriptors (slurmstepd has many
// without O_CLOEXEC), only stdin from /dev/null and the log as stdout/stderr;
// the environment is exactly the spec's. Needs root (setgroups).
START_TEST(spawn_inherits_nothing) {
    if (geteuid() != 0) {
        fprintf(stderr, "spawn_inherits_nothing: skipped (needs root)\n");
        return;
    }
    char dir[] = "/tmp/sk-spawn-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int low = open("/dev/null", O_RDONLY);  // no O_CLOEXEC: slurmstepd style
    int high = fcntl(low, F_DUPFD, 900);    // far above the first free descriptor
    ck_assert_int_ge(high, 900);
    ShimSpec spec;
    spec.path = "/bin/sh";
    spec.argv = {"sh", "-c",
                 "for f in 3 4 5 6 7 8 9 " + std::to_string(low) + " " + std::to_string(high) +
                     "; do [ -e /proc/$$/fd/$f ] && echo open $f; done; echo env $SK_X; "
                     "[ -t 0 ] || read -r x || echo stdin-eof; "
                     "echo nice $(cut -d' ' -f19 /proc/$$/stat)"};
    spec.env = {"SK_X=1", "PATH=/bin:/usr/bin"};
    spec.uid = getuid();
    spec.gid = getgid();
    spec.home = dir;
    spec.log_path = std::string(dir) + "/shim.log";
    spec.nice = -7;  // set while still root: the shim runs ahead of its pods
    auto pid = spawn_shim(spec);
    ck_assert_msg(pid.ok(), "%s", pid.message().c_str());
    int st = 0;
    ck_assert_int_eq(waitpid(*pid, &st, 0), *pid);
    ck_assert(WIFEXITED(st));
    std::ifstream in(spec.log_path);
    std::stringstream out;
    out << in.rdbuf();
    ck_assert_sstr_eq(out.str(), "env 1\nstdin-eof\nnice -7\n");
    close(high);
    close(low);
    unlink(spec.log_path.c_str());
    rmdir(dir);
}
END_TEST

// A binary that cannot be started is an error that names it, not a pid.
START_TEST(spawn_missing_binary) {
    if (geteuid() != 0) return;
    ShimSpec spec;
    spec.path = "/nonexistent/slurm-k8s-shim";
    spec.argv = {spec.path};
    spec.uid = getuid();
    spec.gid = getgid();
    spec.log_path = "/dev/null";
    auto pid = spawn_shim(spec);
    ck_assert(!pid.ok());
    ck_assert_ptr_nonnull(strstr(pid.message().c_str(), "/nonexistent/slurm-k8s-shim"));
}
END_TEST

// The shim keeper (spank/shim_keeper.h) with a stand-in shim, a shell that
// records its pid and sleeps: a shim killed while watched is replaced from
// the same spec after the back-off, again for the next one; stop() during a
// back-off starts none and returns the shim of the moment; a shim running at
// stop() is left running (the exit hook stops it). Needs root (setgroups).
static std::vector<pid_t> recorded_pids(const std::string &file) {
    std::vector<pid_t> out;
    std::ifstream in(file);
    long p;
    while (in >> p)
        out.push_back(static_cast<pid_t>(p));
    return out;
}

static bool wait_until(const std::function<bool()> &pred, int ms) {
    for (int i = 0; i < ms / 10; i++) {
        if (pred()) return true;
        usleep(10000);
    }
    return pred();
}

START_TEST(keeper_restarts_a_dead_shim) {
    if (geteuid() != 0) {
        fprintf(stderr, "keeper_restarts_a_dead_shim: skipped (needs root)\n");
        return;
    }
    char dir[] = "/tmp/sk-keeper-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    std::string pids = std::string(dir) + "/pids";
    ShimSpec spec;
    spec.path = "/bin/sh";
    spec.argv = {"sh", "-c", "echo $$ >> " + pids + "; exec sleep 600"};
    spec.env = {"PATH=/bin:/usr/bin"};
    spec.uid = getuid();
    spec.gid = getgid();
    spec.home = dir;
    spec.log_path = std::string(dir) + "/shim.log";
    auto first = spawn_shim(spec);
    ck_assert_msg(first.ok(), "%s", first.message().c_str());
    ShimKeeper keeper(spec, "test", ShimKeeper::RestartPolicy{100, 300, 60000});
    ck_assert(keeper.start(*first).ok());
    ck_assert(wait_until([&] { return recorded_pids(pids).size() == 1; }, 5000));
    ck_assert_int_eq(keeper.pid(), *first);

    for (int n = 1; n <= 2; n++) {
        pid_t dying = keeper.pid();
        kill(dying, SIGKILL);
        // The new shim may record its pid before the keeper counts it.
        ck_assert_msg(wait_until(
                          [&] {
                              return recorded_pids(pids).size() == size_t(n) + 1 &&
                                     keeper.restarts() == n;
                          },
                          10000),
                      "restart %d: no new shim (%zu pids recorded, %d restarts)", n,
                      recorded_pids(pids).size(), keeper.restarts());
        ck_assert_int_ne(keeper.pid(), dying);
        ck_assert_int_eq(keeper.pid(), recorded_pids(pids).back());
        ck_assert_int_eq(kill(keeper.pid(), 0), 0);
    }
    // Killed during the stop: no restart once stop() returned, and the dead
    // shim is the one reported (the exit hook stops the shim of the moment).
    pid_t last = keeper.pid();
    kill(last, SIGKILL);
    usleep(50000);  // seen dead, its back-off (300 ms) under way
    ck_assert_int_eq(keeper.stop(), last);
    usleep(600000);
    ck_assert_uint_eq(recorded_pids(pids).size(), 3);
    ck_assert_int_eq(keeper.restarts(), 2);

    // A keeper stopped while its shim runs leaves it running.
    auto other = spawn_shim(spec);
    ck_assert(other.ok());
    {
        ShimKeeper k2(spec, "test", ShimKeeper::RestartPolicy{100, 300, 60000});
        ck_assert(k2.start(*other).ok());
        ck_assert_int_eq(k2.stop(), *other);
    }
    ck_assert_int_eq(kill(*other, 0), 0);
    kill(*other, SIGKILL);
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    unlink(pids.c_str());
    unlink(spec.log_path.c_str());
    rmdir(dir);
}
END_TEST

// slurm_job_state over a fake squeue first in PATH: its output trimmed, or
// "" when it failed, hung past the timeout or printed without bound.
struct StateCase {
    const char *name;
    const char *script;  // body of the fake squeue
    const char *want;
};
static const StateCase kState[] = {
    {"running", "echo RUNNING", "RUNNING"},
    {"completing", "printf 'COMPLETING\\n'", "COMPLETING"},
    {"failed query", "echo 'slurm_load_jobs error' >&2; exit 1", ""},
    {"hung query", "exec sleep 30", ""},
    {"flood", "head -c 1000000 /dev/zero | tr '\\0' x", nullptr},
};
START_TEST(job_state_query) {
    const StateCase &c = kState[_i];
    char tmpl[] = "/tmp/sk-squeue-XXXXXX";
    std::string dir = mkdtemp(tmpl);
    std::string exe = dir + "/squeue";
    std::ofstream(exe) << "#!/bin/sh\necho \"$@\" > " << dir << "/args\n" << c.script << "\n";
    chmod(exe.c_str(), 0755);
    const char *env_path = getenv("PATH");
    std::string old_path = env_path ? env_path : "";
    setenv("PATH", (dir + ":" + old_path).c_str(), 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    std::string got = slurm_job_state(42, 500);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    setenv("PATH", old_path.c_str(), 1);
    double s = static_cast<double>(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    std::ifstream a(dir + "/args");
    std::string args;
    std::getline(a, args);
    ck_assert_msg(args == "-h -j 42 -o %T", "%s: args '%s'", c.name, args.c_str());
    if (c.want)
        ck_assert_msg(got == c.want, "%s: '%s'", c.name, got.c_str());
    else
        ck_assert_msg(got.size() <= 512, "%s: %zu bytes kept", c.name, got.size());
    ck_assert_msg(s < 5, "%s: took %.1f s", c.name, s);
    unlink((dir + "/args").c_str());
    unlink(exe.c_str());
    rmdir(dir.c_str());
}
END_TEST

int main() {
    Suite *s = suite_create("spank_logic");
    TCase *tc = tcase_create("logic");
    tcase_add_loop_test(tc, plugstack_table, 0, TABLE_SIZE(kPlug));
    tcase_add_test(tc, plugstack_values);
    tcase_add_loop_test(tc, options_table, 0, TABLE_SIZE(kOpt));
    tcase_add_test(tc, options_values);
    tcase_add_test(tc, options_drain_before);
    tcase_add_test(tc, lent_share_checked);
    tcase_add_test(tc, flag_given_to_step_cases);
    tcase_add_test(tc, gpu_types_from_detail);
    tcase_add_loop_test(tc, gpu_request_table, 0, TABLE_SIZE(kReq));
    tcase_add_test(tc, job_total_limit);
    tcase_add_loop_test(tc, lent_table, 0, TABLE_SIZE(kLent));
    tcase_add_loop_test(tc, env_table, 0, TABLE_SIZE(kEnv));
    tcase_add_loop_test(tc, hostlist_table, 0, TABLE_SIZE(kHost));
    tcase_add_test(tc, runfile_roundtrip);
    tcase_add_loop_test(tc, runfile_bad, 0, TABLE_SIZE(kBadRun));
    tcase_add_loop_test(tc, conf_table, 0, TABLE_SIZE(kConf));
    tcase_add_test(tc, cgroup_dirs);
    tcase_add_loop_test(tc, cpus_per_node_table, 0, TABLE_SIZE(kCpus));
    tcase_add_test(tc, devices_dir_of_step);
    tcase_add_test(tc, gpu_devices_from_nodes);
    tcase_add_test(tc, deny_writes_one_rule_each);
    tcase_add_test(tc, spawn_inherits_nothing);
    tcase_add_test(tc, spawn_missing_binary);
    tcase_add_test(tc, keeper_restarts_a_dead_shim);
    tcase_add_loop_test(tc, job_state_query, 0, TABLE_SIZE(kState));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
