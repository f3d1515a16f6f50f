// slurm-k8s-agent: the per-node root daemon (agent/daemon.h). Pods run in
// each job's slurm-k8s-shim; no other runtime is built in.
#include "agent/daemon.h"

int main(int argc, char **argv) {
    return sk::agent::agent_daemon_main(argc, argv, {});
}
