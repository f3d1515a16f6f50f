// Standalone kubelet endpoint for the component test: serves the CRI log
// files under --state-dir. The container table the agent would know comes
// from <state-dir>/containers.tsv, re-read on every lookup so the test can
// end a container ("running" 0) or remove a pod while a follow is open:
//     <namespace> <pod> <container> <pod uid> <restartCount> <running 0|1>
// Writes the bound port to --port-file, runs until SIGTERM/SIGINT.
// --max-connections, --max-per-address and --handshake-timeout (seconds) set
// the HttpServerConfig bounds of the same names.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fstream>
#include <sstream>
#include <string>

#include "agent/kubelet/kubelet_server.h"
#include "common/daemons/log_paths.h"
#include "common/log.h"

using namespace sk;

static Result<ContainerLogSource> lookup(const std::string &state_dir, const ContainerLogRef &r) {
    std::ifstream f(state_dir + "/containers.tsv");
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream in(line);
        std::string ns, pod, container, uid;
        int restart = 0, running = 0;
        if (!(in >> ns >> pod >> container >> uid >> restart >> running)) continue;
        if (ns != r.ns || pod != r.pod) continue;
        if (container != r.container) continue;
        auto files = container_log_files(state_dir, uid, container, restart, r.previous);
        if (!files.ok()) return files.failure();
        ContainerLogSource src;
        src.trusted_dir = state_dir;
        src.paths_oldest_first = std::move(*files);
        src.running = running != 0 && !r.previous;
        return src;
    }
    return fail(Error::NotFound, "pod \"" + r.pod + "\" container \"" + r.container +
                                     "\" not found in namespace \"" + r.ns + "\"");
}

int main(int argc, char **argv) {
    log::set_component("kubelet-server-test");
    KubeletServerConfig cfg;
    cfg.http.bind_address = "127.0.0.1";
    cfg.follow_poll_ms = 50;
    cfg.follow_recheck_ms = 200;
    std::string state_dir, port_file;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--state-dir")
            state_dir = v;
        else if (k == "--port-file")
            port_file = v;
        else if (k == "--cert")
            cfg.http.cert_file = v, cfg.http.tls = true;
        else if (k == "--key")
            cfg.http.key_file = v;
        else if (k == "--client-ca")
            cfg.http.client_ca_file = v;
        else if (k == "--max-connections")
            cfg.http.max_connections = static_cast<unsigned>(std::stoul(v));
        else if (k == "--max-per-address")
            cfg.http.max_connections_per_address = static_cast<unsigned>(std::stoul(v));
        else if (k == "--handshake-timeout")
            cfg.http.handshake_timeout_s = static_cast<unsigned>(std::stoul(v));
        else {
            fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (state_dir.empty() || port_file.empty()) {
        fprintf(stderr,
                "usage: %s --state-dir DIR --port-file FILE [--cert C --key K "
                "[--client-ca CA]] [--max-connections N] [--max-per-address N] "
                "[--handshake-timeout S]\n",
                argv[0]);
        return 2;
    }
    // Block the signals before the server threads exist so only sigwait sees them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    KubeletServer server(cfg,
                         [state_dir](const ContainerLogRef &r) { return lookup(state_dir, r); });
    Status st = server.start();
    if (!st.ok()) {
        fprintf(stderr, "kubelet-server-test: %s\n", st.message().c_str());
        return 1;
    }
    std::ofstream(port_file + ".tmp") << server.port() << "\n";
    rename((port_file + ".tmp").c_str(), port_file.c_str());
    int sig = 0;
    sigwait(&set, &sig);
    server.stop();
    LOG_INFO("stopped on signal %d", sig);
    return 0;
}
