// Times as Slurm's commands print them (job_end_command's answer).
#pragma once

#include <cstdint>
#include <string>

namespace sk::agent {

// Slurm's EndTime as `squeue -o %e` prints it: "2026-11-29T14:59:12" in the
// node's local time (mktime), or "N/A" / "Unknown" / "NONE" / "" = no end
// (0). Whitespace around it is ignored. -1 when malformed.
int64_t parse_slurm_time(const std::string &s);

}  // namespace sk::agent
