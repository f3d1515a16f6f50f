// The plugin's plugstack.conf arguments and --k8s-* options
// (spank/plugstack.h, spank/options.h). Input: text lines.
//   line 1: plugstack.conf words after the plugin path (split on blanks);
//   "gpus=V", "nodes=V", "cpus=V", "mem=V", "labels=V", "taints=V",
//   "namespaces=V", "wait=V": the raw --k8s-* values;
//   "arg W": one sbatch argument; "env K=V": an environment variable;
//   any other line: a line of the batch script.
// Properties:
// - parse_plugstack fails with a message naming plugstack.conf; on success
//   the values are within their documented bounds, every allowed namespace is
//   a namespace name, the default taint parses, and writing the config back as
//   key=value words parses to the same config (round trip);
// - parse_options fails with a message that starts with the flag
//   ("--k8s-..."); on success the result respects the site policy (GPUs per
//   node, allowed namespaces, wait bound) and only flags that were given have
//   an effect;
// - gpu_request, script_candidates and the request/total checks never crash,
//   return indices inside the arguments and fail with a message.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "spank/options.h"
#include "spank/plugstack.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using sk::spank::PlugConfig;

std::vector<std::string> split_lines(const std::string &s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1)
        out.push_back(s.substr(start, nl - start));
    if (start < s.size()) out.push_back(s.substr(start));
    return out;
}

std::vector<std::string> words(const std::string &s) {
    std::vector<std::string> out;
    std::string w;
    for (char c : s) {
        if (c == ' ' || c == '\t') {
            if (!w.empty()) out.push_back(w);
            w.clear();
        } else {
            w += c;
        }
    }
    if (!w.empty()) out.push_back(w);
    return out;
}

std::string join(const std::vector<std::string> &v) {
    std::string out;
    for (const auto &s : v)
        out += (out.empty() ? "" : ",") + s;
    return out;
}

bool same(const PlugConfig &a, const PlugConfig &b) {
    return a.socket == b.socket && a.timeout_s == b.timeout_s && a.grace_s == b.grace_s &&
           a.max_gpus_per_node == b.max_gpus_per_node && a.max_gpus_per_job == b.max_gpus_per_job &&
           a.allowed_namespaces == b.allowed_namespaces && a.label_prefixes == b.label_prefixes &&
           a.default_taint == b.default_taint && a.fail_on_agent_error == b.fail_on_agent_error &&
           a.rundir == b.rundir && a.shim == b.shim && a.shim_log_level == b.shim_log_level &&
           a.wait_default_s == b.wait_default_s && a.cluster == b.cluster;
}

// Result<PlugConfig> from words.
sk::Result<PlugConfig> parse_words(const std::vector<std::string> &w) {
    std::vector<const char *> argv;
    argv.reserve(w.size());
    for (const auto &s : w)
        argv.push_back(s.c_str());
    return sk::spank::parse_plugstack(static_cast<int>(argv.size()), argv.data());
}

void check_config(const PlugConfig &c) {
    FUZZ_CHECK(c.timeout_s >= 1 && c.timeout_s <= 300);
    FUZZ_CHECK(c.grace_s <= 3600);
    FUZZ_CHECK(c.max_gpus_per_node <= 1024);
    FUZZ_CHECK(c.wait_default_s >= 1 && c.wait_default_s <= 86400);
    for (const auto &ns : c.allowed_namespaces)
        FUZZ_CHECK(sk::k8s::is_dns1123_label(ns));
    FUZZ_CHECK(sk::spank::default_taints_for(c, 1));
    // Round trip: the config written back as plugstack.conf words. Lists
    // whose items could not be written back (',' or blanks) are left out.
    std::vector<std::string> w = {
        "socket=" + c.socket,
        "timeout=" + std::to_string(c.timeout_s),
        "grace=" + std::to_string(c.grace_s),
        "max_gpus_per_node=" + std::to_string(c.max_gpus_per_node),
        "max_gpus_per_job=" + std::to_string(c.max_gpus_per_job),
        "on_agent_error=" + std::string(c.fail_on_agent_error ? "fail" : "warn"),
        "rundir=" + c.rundir,
        "shim=" + c.shim,
        "shim_log_level=" + c.shim_log_level,
        "wait_default=" + std::to_string(c.wait_default_s),
    };
    if (!c.default_taint.empty()) w.push_back("default_taint=" + c.default_taint);
    if (!c.cluster.empty()) w.push_back("cluster=" + c.cluster);
    if (!c.allowed_namespaces.empty())
        w.push_back("allowed_namespaces=" + join(c.allowed_namespaces));
    bool prefixes_clean = true;
    for (const auto &p : c.label_prefixes)
        prefixes_clean &= !p.empty() && p.find_first_of(", \t") == std::string::npos;
    if (!c.label_prefixes.empty() && prefixes_clean)
        w.push_back("label_prefixes=" + join(c.label_prefixes));
    for (const auto &s : w)
        if (s.find_first_of(" \t") != std::string::npos) return;  // not one word
    auto again = parse_words(w);
    FUZZ_CHECK(again);
    PlugConfig expect = c;
    if (!prefixes_clean) expect.label_prefixes.clear();
    if (c.default_taint.empty()) again->default_taint.clear();
    FUZZ_CHECK(same(*again, expect));
}

}  // namespace

SK_FUZZ_TARGET(spank_options) {
    auto lines = split_lines(std::string(reinterpret_cast<const char *>(data), size));
    if (lines.empty()) return 0;
    PlugConfig cfg;
    auto parsed = parse_words(words(lines[0]));
    if (parsed) {
        check_config(*parsed);
        cfg = *parsed;
    } else {
        FUZZ_CHECK(parsed.message().find("plugstack.conf") != std::string::npos);
    }

    sk::spank::RawOptions raw;
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string script;
    for (size_t i = 1; i < lines.size(); i++) {
        const std::string &l = lines[i];
        size_t eq = l.find('=');
        std::string key = l.substr(0, eq == std::string::npos ? 0 : eq);
        std::string val = eq == std::string::npos ? "" : l.substr(eq + 1);
        if (key == "gpus")
            raw.gpus = val;
        else if (key == "nodes")
            raw.nodes = val;
        else if (key == "cpus")
            raw.cpus = val;
        else if (key == "mem")
            raw.mem = val;
        else if (key == "labels")
            raw.labels = val;
        else if (key == "taints")
            raw.taints = val;
        else if (key == "namespaces")
            raw.namespaces = val;
        else if (key == "wait")
            raw.wait = val;
        else if (l.rfind("arg ", 0) == 0)
            args.push_back(l.substr(4));
        else if (l.rfind("env ", 0) == 0 && eq != std::string::npos)
            env[l.substr(4, eq - 4)] = val;
        else
            script += l + "\n";
    }

    auto o = sk::spank::parse_options(raw, cfg);
    if (!o) {
        FUZZ_CHECK(o.message().rfind("--k8s-", 0) == 0);
    } else {
        if (!raw.gpus) FUZZ_CHECK(!o->gpus_all && o->gpus == 0);
        if (!raw.nodes) FUZZ_CHECK(o->nodes == 0);
        if (!raw.cpus) FUZZ_CHECK(o->cpus == 0);
        if (!raw.mem) FUZZ_CHECK(o->mem_mib == 0);
        if (!raw.labels) FUZZ_CHECK(o->labels.empty());
        if (!raw.taints) FUZZ_CHECK(o->taints.empty());
        if (!raw.namespaces) FUZZ_CHECK(o->namespaces.empty());
        FUZZ_CHECK(raw.wait ? o->wait_s >= 1 && o->wait_s <= 86400 : o->wait_s == 0);
        FUZZ_CHECK(o->gpus <= 1024);
        if (cfg.max_gpus_per_node) FUZZ_CHECK(o->gpus <= cfg.max_gpus_per_node);
        if (!cfg.allowed_namespaces.empty())
            for (const auto &ns : o->namespaces)
                FUZZ_CHECK(std::find(cfg.allowed_namespaces.begin(), cfg.allowed_namespaces.end(),
                                     ns) != cfg.allowed_namespaces.end());
        for (const auto &[k, v] : o->labels)
            FUZZ_CHECK(!k.empty());
    }

    auto cands = sk::spank::script_candidates(args);
    for (size_t i : cands) {
        FUZZ_CHECK(i < args.size());
        FUZZ_CHECK(args[i].empty() || args[i][0] != '-');
    }
    size_t script_at = cands.empty() ? args.size() : cands.back();
    auto req = sk::spank::gpu_request(args, script_at, script, env);
    if (req.known) FUZZ_CHECK(req.any);
    if (o) {
        uint32_t nnodes = static_cast<uint32_t>(size % 17);
        if (auto st = sk::spank::check_against_request(*o, req, nnodes); !st)
            FUZZ_CHECK(!st.message().empty());
        if (auto st = sk::spank::check_job_total(*o, nnodes, req.per_node, cfg); !st)
            FUZZ_CHECK(!st.message().empty());
    }
    return 0;
}
