// slurm-k8s-shim: runs the pods of one Slurm job on one node. How the plugin
// starts it (command line, environment): spank/README.md, "Contracts this
// plugin defines".
//   slurm-k8s-shim --job-id ID --slurm-node NODE --socket PATH
//                  [--runtime-config FILE] [--log-level L] [--log-max-bytes N]
//                  [--workload-nice N]   the nice of the pods' commands
// Started by spank_k8s.so in the job's extern step, as the job's user.
// The same program runs each container's processes (k8s-shim/spawn.h):
//   slurm-k8s-shim --supervise                 the supervisor (supervise.h)
//   slurm-k8s-shim --exec-confined ... -- CMD  the exec helper (confine.h)
//   slurm-k8s-shim --podman-main ... -- ARGV   podman run's wrapper (podman.h)
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <curl/curl.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <string>

#include "common/fs.h"
#include "common/log.h"
#include "common/strings.h"
#include "config.h"
#include "k8s-shim/confine.h"
#include "k8s-shim/sandbox.h"
#include "k8s-shim/shim.h"
#include "k8s-shim/spawn.h"
#include "k8s-shim/podman.h"
#include "k8s-shim/supervise.h"
#include "uv/handles.h"

using namespace sk;
using namespace sk::shim;

namespace {

const char kUsage[] =
    "usage: slurm-k8s-shim --job-id ID --slurm-node NODE --socket PATH\n"
    "                      [--runtime-config FILE] [--log-level LEVEL] [--log-max-bytes N]\n"
    "                      [--workload-nice N]\n";

struct Args {
    ShimOptions opt;
    std::string runtime_config;
    std::string log_level = "info";
    std::optional<int> workload_nice;
};

Result<Args> parse_args(int argc, char **argv) {
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string k = argv[i];
        if (i + 1 >= argc) return fail(Error::InvalidArgument, "option " + k + " needs a value");
        std::string v = argv[++i];
        if (k == "--job-id") {
            auto n = parse_uint(v, "--job-id", UINT32_MAX);
            if (!n) return n.failure();
            a.opt.job_id = static_cast<uint32_t>(*n);
        } else if (k == "--slurm-node") {
            a.opt.slurm_node = v;
        } else if (k == "--socket") {
            a.opt.socket_path = v;
        } else if (k == "--runtime-config") {
            a.runtime_config = v;
        } else if (k == "--log-level") {
            a.log_level = v;
        } else if (k == "--workload-nice") {
            auto n = parse_nice(v, "--workload-nice");
            if (!n) return n.failure();
            a.workload_nice = *n;
        } else if (k == "--log-max-bytes") {
            auto n = parse_uint(v, "--log-max-bytes", uint64_t{1} << 40);
            if (!n) return n.failure();
            a.opt.log_max_bytes = static_cast<size_t>(*n);
        } else {
            return fail(Error::InvalidArgument, "unknown option " + k);
        }
    }
    if (a.opt.job_id == 0 || a.opt.slurm_node.empty() || a.opt.socket_path.empty())
        return fail(Error::InvalidArgument, "--job-id, --slurm-node and --socket are required");
    return a;
}

Result<RuntimeTemplates> load_templates(const std::string &path) {
    if (path.empty()) return RuntimeTemplates();
    auto text = read_file(path, size_t{4} << 20, Links::Follow);
    if (!text)
        return fail(Error::Io, "cannot read runtime config " + path + " (" + text.message() +
                                   "; plugstack.conf runtime_config=): the file must be "
                                   "readable by every job's user");
    return RuntimeTemplates::parse(*text, path);
}

void on_step_signal(int) {}

// Signals Slurm may send to a running job's steps (scancel --signal) must
// not end the job's pods: the shim survives them, and the pods get none
// (docs/user-guide.md, "Signals"). A handler, not SIG_IGN: containers start
// with default dispositions (exec resets handlers, keeps SIG_IGN). SIGTERM
// is the plugin's stop (spank/shim_process.h, stop_shim), never a step
// signal in Slurm's supported setup (spank/hooks_extern.cc): the Shim
// handles it (pods killed, the job's podman state removed, exit).
void ignore_step_signals() {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_step_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int s : {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGTSTP, SIGTTIN, SIGTTOU,
                  SIGXCPU, SIGVTALRM, SIGPROF, SIGIO, SIGPWR})
        sigaction(s, &sa, nullptr);
}

}  // namespace

static int run(int argc, char **argv) {
    log::set_component("slurm-k8s-shim");
    auto args = parse_args(argc, argv);
    if (!args) {
        fprintf(stderr, "slurm-k8s-shim: %s\n%s", args.message().c_str(), kUsage);
        return 2;
    }
    log::Level level;
    if (!log::level_from_string(args->log_level, &level)) {
        fprintf(stderr, "slurm-k8s-shim: unknown --log-level '%s'\n", args->log_level.c_str());
        return 2;
    }
    log::set_level(level);
    auto templates = load_templates(args->runtime_config);
    if (!templates) {
        LOG_ERROR("%s", templates.message().c_str());
        return 1;
    }
    errno = 0;
    int own_nice = getpriority(PRIO_PROCESS, 0);
    if (args->workload_nice) {
        set_workload_nice(*args->workload_nice);
        LOG_INFO("at nice %d; the pods' commands at nice %d", own_nice,
                 std::max(own_nice, *args->workload_nice));
    }
    // A dead agent connection must surface as EPIPE on write, not kill us.
    signal(SIGPIPE, SIG_IGN);
    ignore_step_signals();
    args->opt.time_scale = Clock::scale_from_env();
    // The containers' supervisor is this program, named by its path: exec of
    // /proc/self/exe would start valgrind's loader under memcheck.
    char self[PATH_MAX];
    ssize_t self_len = readlink("/proc/self/exe", self, sizeof self);
    if (self_len > 0 && static_cast<size_t>(self_len) < sizeof self)
        args->opt.supervisor.assign(self, static_cast<size_t>(self_len));
    LOG_INFO("%s starting for job %u on %s (%zu runtime templates%s)", PACKAGE_STRING,
             args->opt.job_id, args->opt.slurm_node.c_str(), templates->size(),
             args->opt.time_scale != 1.0 ? ", TEST time scale" : "");

    // Before any thread: HTTPS and grpc checks run libcurl in the loop's
    // thread pool (k8s-shim/http_check.h).
    curl_global_init(CURL_GLOBAL_DEFAULT);
    uv_loop_t loop;
    uv_loop_init(&loop);
    int rc;
    {
        Shim shim(&loop, args->opt, std::move(*templates));
        (void)shim.start();
        uv_run(&loop, UV_RUN_DEFAULT);
        rc = shim.exit_code();
    }
    // The shim's handles closed with it; one more turn runs their close
    // callbacks, which free them (no wait: nothing is left to be active).
    uv_run(&loop, UV_RUN_NOWAIT);
    // Not 0: a bug, memory and descriptors leak (make check-valgrind).
    if (uv_loop_close(&loop) != 0) log_open_handles(&loop, "exit");
    curl_global_cleanup();
    return rc;
}

// An exception escaping run() (std::bad_alloc, a jsoncpp LogicError) would
// abort with no word on stderr: name it and exit 1 instead.
int main(int argc, char **argv) {
    // The exec helper and the supervisor (k8s-shim/spawn.h): nothing of the
    // shim runs in those modes.
    if (argc > 1 && strcmp(argv[1], kExecConfined) == 0) return exec_confined_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], kPodSandbox) == 0) return pod_sandbox_main(argc, argv);
    if (argc == 2 && strcmp(argv[1], "--supervise") == 0) return supervise_env_main();
    if (argc > 1 && strcmp(argv[1], kPodmanMain) == 0) return podman_main(argc, argv);
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        fprintf(stderr, "slurm-k8s-shim: fatal: %s\n", e.what());
    } catch (...) {
        fprintf(stderr, "slurm-k8s-shim: fatal: unknown exception\n");
    }
    return 1;
}
