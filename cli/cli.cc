#include "cli/cli.h"

#include <cstdio>

#include "common/agent_call.h"
#include "common/daemons/json.h"
#include "common/strings.h"

namespace sk::cli {
namespace {

Failure usage(const std::string &msg) {
    return fail(Error::InvalidArgument, msg + " (see `slurm-k8s --help`)");
}

std::string gpus_text(const std::vector<int> &g) {
    return g.empty() ? "-" : format_index_list(g);
}

}  // namespace

Result<Options> parse_args(const std::vector<std::string> &args) {
    Options o;
    bool have_command = false;
    std::vector<std::string> positional;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string &a = args[i];
        auto value = [&](const char *name) -> Result<std::string> {
            std::string prefix = std::string(name) + "=";
            if (starts_with(a, prefix)) return a.substr(prefix.size());
            if (i + 1 >= args.size()) return usage(std::string(name) + " needs a value");
            return args[++i];
        };
        if (a == "-h" || a == "--help" || a == "help") {
            o.command = Options::Command::Help;
            return o;
        } else if (a == "--version") {
            o.command = Options::Command::Version;
            return o;
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--socket" || starts_with(a, "--socket=")) {
            auto v = value("--socket");
            if (!v.ok()) return v.failure();
            if (v->empty()) return usage("--socket needs a path");
            o.socket = *v;
        } else if (a == "--admin-socket" || starts_with(a, "--admin-socket=")) {
            auto v = value("--admin-socket");
            if (!v.ok()) return v.failure();
            if (v->empty()) return usage("--admin-socket needs a path");
            o.admin_socket = *v;
        } else if (a == "--timeout" || starts_with(a, "--timeout=")) {
            auto v = value("--timeout");
            if (!v.ok()) return v.failure();
            auto s = parse_seconds(*v, "--timeout");
            if (!s.ok() || *s == 0)
                return usage("--timeout: '" + *v + "' is not a duration > 0 (30, 90s, 5m)");
            o.timeout_s = *s;
        } else if (starts_with(a, "-") && a != "-") {
            return usage("unknown option '" + a + "'");
        } else if (!have_command) {
            have_command = true;
            if (a == "status")
                o.command = Options::Command::Status;
            else if (a == "list")
                o.command = Options::Command::List;
            else if (a == "wait")
                o.command = Options::Command::Wait;
            else
                return usage("unknown command '" + a + "'");
        } else {
            positional.push_back(a);
        }
    }
    if (!have_command) return usage("no command given");
    if (o.command == Options::Command::Wait) {
        if (positional.size() != 1) return usage("wait needs exactly one JOBID");
        auto id = parse_uint(positional[0], "JOBID", UINT32_MAX);
        if (!id.ok() || *id == 0) return usage("wait: '" + positional[0] + "' is not a job id");
        o.job_id = static_cast<uint32_t>(*id);
    } else if (!positional.empty()) {
        return usage("unexpected argument '" + positional[0] + "'");
    }
    return o;
}

std::string socket_to_use(const Options &o, uint32_t euid) {
    if (euid != 0) return o.socket;
    return o.admin_socket.empty() ? admin_socket_for(o.socket) : o.admin_socket;
}

std::string help_text() {
    return "NAME\n"
           "    slurm-k8s - show what this node lends to Kubernetes\n"
           "\n"
           "SYNOPSIS\n"
           "    slurm-k8s [--socket PATH] [--json] status\n"
           "    slurm-k8s [--socket PATH] [--json] list\n"
           "    slurm-k8s [--socket PATH] wait JOBID [--timeout S]\n"
           "\n"
           "COMMANDS\n"
           "    status   whether slurm-k8s-agent answers on this node, its version,\n"
           "             and how many jobs lend GPUs here\n"
           "    list     the virtual Kubernetes nodes of this node: job, user, node\n"
           "             name, phase, Ready, lent GPUs, pods\n"
           "    wait     block until the job's virtual node on this node is Ready\n"
           "             (in a batch script: `srun slurm-k8s wait $SLURM_JOB_ID`)\n"
           "\n"
           "OPTIONS\n"
           "    --socket PATH   agent socket (default /run/slurm-k8s/agent.sock)\n"
           "    --admin-socket PATH\n"
           "                    the agent's admin socket, used when run as root\n"
           "                    (default: admin/ beside the agent socket)\n"
           "    --json          print the agent's reply as JSON\n"
           "    --timeout S     wait: give up after S (30, 90s, 5m; default 5m);\n"
           "                    other commands: bound on the agent's answer (default 5s)\n"
           "    -h, --help      this text\n"
           "    --version       the version of this command\n"
           "\n"
           "EXIT STATUS\n"
           "    0 success, 1 the agent reported an error or the wait timed out,\n"
           "    2 usage error, 3 the agent is not reachable\n";
}

Result<std::vector<proto::NodeState>> nodes_from_list_reply(const Json::Value &body) {
    if (!body.isObject() || !body.isMember("nodes") || !body["nodes"].isArray())
        return fail(Error::Parse, "list reply: 'nodes' must be an array");
    std::vector<proto::NodeState> out;
    for (const auto &n : body["nodes"]) {
        auto s = proto::node_state_from_json(n);
        if (!s.ok()) return s.failure();
        out.push_back(std::move(*s));
    }
    return out;
}

std::string format_list(const std::vector<proto::NodeState> &nodes) {
    if (nodes.empty()) return "no virtual nodes on this node\n";
    std::vector<std::vector<std::string>> rows = {
        {"JOB", "USER", "NODE", "PHASE", "READY", "GPUS", "PODS"}};
    for (const auto &n : nodes)
        rows.push_back({std::to_string(n.job_id), n.user, n.node_name, n.phase,
                        n.ready ? "True" : "False", gpus_text(n.gpus), std::to_string(n.pods)});
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto &r : rows)
        for (size_t i = 0; i < r.size(); ++i)
            width[i] = std::max(width[i], r[i].size());
    std::string out;
    for (const auto &r : rows) {
        std::string line;
        for (size_t i = 0; i < r.size(); ++i) {
            line += r[i];
            if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
        }
        out += line + "\n";
    }
    return out;
}

std::string format_status(const std::string &socket, const std::string &agent_version,
                          const std::vector<proto::NodeState> &nodes, const Json::Value &api) {
    size_t ready = 0;
    for (const auto &n : nodes)
        ready += n.ready ? 1 : 0;
    std::string out = "agent:   reachable at " + socket + "\n";
    out += "version: " + (agent_version.empty() ? std::string("unknown") : agent_version) + "\n";
    if (api.isObject()) {
        auto s = [&api](const char *k) { return api[k].isString() ? api[k].asString() : ""; };
        std::string state = s("state");
        out += "api:     ";
        if (state == "refused")
            out += "credential REFUSED since " + s("since") + ": " + s("message") + "\n";
        else
            out += std::string(state == "ok" ? "credential accepted" : "credential not used yet") +
                   " (" + s("source") + (s("expires").empty() ? "" : ", expires " + s("expires")) +
                   ")\n";
        if (!s("kubelet_serving").empty()) out += "kubelet: " + s("kubelet_serving") + "\n";
    }
    out += "jobs:    " + std::to_string(nodes.size()) + " on this node (" + std::to_string(ready) +
           " Ready)\n";
    for (const auto &n : nodes) {
        out += "  job " + std::to_string(n.job_id) + " (" + n.user + "): " + n.node_name + " " +
               n.phase + ", GPUs " + gpus_text(n.gpus) + ", " + std::to_string(n.pods) + " pods\n";
        if (!n.identity.empty()) out += "    identity " + n.identity + "\n";
    }
    return out;
}

std::string format_json(const Json::Value &v) {
    return json::write(v) + "\n";
}

bool job_ready(const std::vector<proto::NodeState> &nodes, uint32_t job_id) {
    for (const auto &n : nodes)
        if (n.job_id == job_id && n.ready) return true;
    return false;
}

std::string describe_failure(const std::string &socket, const Failure &f) {
    if (f.code == Error::Unavailable) {
        // The client's message usually names the socket already.
        if (f.message.find(socket) != std::string::npos)
            return "slurm-k8s: cannot reach the agent: " + f.message;
        return "slurm-k8s: cannot reach the agent at " + socket + ": " + f.message;
    }
    if (f.code == Error::Timeout)
        return "slurm-k8s: the agent at " + socket + " did not answer in time: " + f.message;
    return "slurm-k8s: " + f.describe();
}

int exit_code_for(const Failure &f) {
    if (f.code == Error::Unavailable) return kExitUnreachable;
    if (f.code == Error::InvalidArgument) return kExitUsage;
    return kExitFailed;
}

}  // namespace sk::cli
