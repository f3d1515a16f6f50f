// The agent daemon's main() as a library function: the shipped
// slurm-k8s-agent (agent/main.cc) offers runtime = shim only; a test build
// (tests/agent/test_agent_main.cc) adds in-process runtimes by name, so test
// doubles never ship in the daemon's runtime= choices.
#pragma once

#include <map>
#include <string>

#include "agent/agent.h"

namespace sk::agent {

using RuntimeFactories = std::map<std::string, RuntimeFactory>;

// Parses the command line (--config FILE, --log-level, --help, --version),
// runs the agent until SIGTERM/SIGINT; the process's exit status. agent.conf
// may name "shim" or any key of extra_runtimes as its runtime.
int agent_daemon_main(int argc, char **argv, const RuntimeFactories &extra_runtimes);

}  // namespace sk::agent
