// A shim that died (killed, crashed) leaves its pods' processes running with
// nobody to report on them. The agent (root) stops them from the shim's own
// records, <state_dir>/pods/<uid>/state.json ({"finished", "processes":
// {container: {"pid", "start_ticks"}}}), verified against /proc (pid + start
// time, so a reused pid is never signalled) and signalled with the job
// user's credentials (a forged record can only hit the user's own
// processes). Pure parsing/status helpers + those two /proc/kill edges.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/procfs.h"

namespace sk::agent {

struct RecordedProcess {
    int pid = 0;  // the container's supervisor: its session and process group
    unsigned long long start_ticks = 0;
};

// The live processes a state.json records: none when the pod finished, the
// record is malformed, or an entry has no pid > 1 / start time.
std::vector<RecordedProcess> recorded_processes(const Json::Value &state);

// The pod's final status after its shim died (lost_pod_status,
// common/daemons/pod_loss.h): phase Failed, reason ShimLost and `message`; containers
// that were running become terminated (exit code 137, reason Error, killed),
// no container is ready and the Ready conditions are False.
Json::Value shim_lost_status(const Json::Value &status, const std::string &message,
                             const std::string &finished_at);

// Reads every <state_dir>/pods/<uid>/state.json (regular files only, never
// following a link) and stops the verified containers of unfinished pods as
// uid/gid (RecordedContainers::stop, common/daemons/supervisor.h): a supervisor is
// told to kill every process of its container (a daemon that left the group
// too), and the process groups are SIGKILLed once the supervisors are done
// (bounded). Returns at once, the number of containers signalled; the kill
// passes end in the background.
int stop_recorded_processes(const std::string &state_dir, uint32_t uid, uint32_t gid);

}  // namespace sk::agent
