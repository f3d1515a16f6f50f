// slurm-k8s: see cli.h and `slurm-k8s --help`.
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <exception>

#include "cli/cli.h"
#include "common/daemons/agent_client.h"
#include "config.h"

using namespace sk;
using namespace sk::cli;

namespace {

int fail_with(const std::string &socket, const Failure &f) {
    fprintf(stderr, "%s\n", describe_failure(socket, f).c_str());
    return exit_code_for(f);
}

int run_wait(AgentClient &client, const Options &o) {
    const uint64_t limit_s = o.timeout_s ? o.timeout_s : 300;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        auto body = client.call("list", Json::Value(Json::objectValue));
        if (!body.ok()) return fail_with(o.socket, body.failure());
        auto nodes = nodes_from_list_reply(*body);
        if (!nodes.ok()) return fail_with(o.socket, nodes.failure());
        if (job_ready(*nodes, o.job_id)) {
            printf("job %u: virtual node Ready\n", o.job_id);
            return kExitOk;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (static_cast<uint64_t>(now.tv_sec - start.tv_sec) >= limit_s) {
            fprintf(stderr,
                    "slurm-k8s: job %u: no Ready virtual node on this node after %llu s "
                    "(was the job submitted with --k8s-gpus? see `slurm-k8s list`)\n",
                    o.job_id, static_cast<unsigned long long>(limit_s));
            return kExitFailed;
        }
        usleep(250 * 1000);
    }
}

}  // namespace

static int run(int argc, char **argv) {
    auto opts = parse_args(std::vector<std::string>(argv + 1, argv + argc));
    if (!opts.ok()) {
        fprintf(stderr, "slurm-k8s: %s\n", opts.message().c_str());
        return kExitUsage;
    }
    Options o = *opts;
    if (o.command == Options::Command::Help) {
        fputs(help_text().c_str(), stdout);
        return kExitOk;
    }
    if (o.command == Options::Command::Version) {
        printf("slurm-k8s %s\n", PACKAGE_VERSION);
        return kExitOk;
    }
    int call_ms = o.command != Options::Command::Wait && o.timeout_s
                      ? static_cast<int>(o.timeout_s * 1000)
                      : 5000;
    // Root's calls go to the admin socket (socket_to_use), and its messages
    // name that socket.
    o.socket = socket_to_use(o, static_cast<uint32_t>(geteuid()));
    AgentClient client(o.socket, call_ms);
    if (o.command == Options::Command::Wait) return run_wait(client, o);

    auto body = client.call("list", Json::Value(Json::objectValue));
    if (!body.ok()) return fail_with(o.socket, body.failure());
    if (o.json) {
        fputs(format_json(*body).c_str(), stdout);
        return kExitOk;
    }
    auto nodes = nodes_from_list_reply(*body);
    if (!nodes.ok()) return fail_with(o.socket, nodes.failure());
    if (o.command == Options::Command::List) {
        fputs(format_list(*nodes).c_str(), stdout);
    } else {
        std::string version = (*body)["version"].isString() ? (*body)["version"].asString() : "";
        fputs(format_status(o.socket, version, *nodes, (*body)["api"]).c_str(), stdout);
    }
    return kExitOk;
}

// An exception escaping run() (std::bad_alloc, a jsoncpp LogicError) would
// abort with no word on stderr: name it and exit kExitFailed instead.
int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        fprintf(stderr, "slurm-k8s: fatal: %s\n", e.what());
    } catch (...) {
        fprintf(stderr, "slurm-k8s: fatal: unknown exception\n");
    }
    return kExitFailed;
}
