// Which Slurm job a process runs in, read from its /proc/<pid>/cgroup. This
// is how the agent authenticates a shim (agent/core/peer_auth.h, docs/security.md)
// and how the extern step finds the job's cgroup directories
// (spank/slurm_facts.h), so it reads hostile text strictly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sk {

// One line of /proc/<pid>/cgroup: "hierarchy-ID:controller-list:cgroup-path".
struct CgroupLine {
    std::string controllers;  // "freezer", "cpu,cpuacct", "name=systemd"; "" on the v2 line
    std::string path;         // "/slurm_n1/uid_1000/job_42/step_extern"
};

// Every well-formed line (three ':'-separated fields, a path starting with
// '/'); other lines are skipped.
std::vector<CgroupLine> parse_proc_cgroup(std::string_view text);

// True when the lines show a pure cgroup v2 host: lines, all of them the
// unified one ("0::").
bool unified_only(const std::vector<CgroupLine> &lines);

// The part of a cgroup path up to and including its Slurm job component,
// for job_id: "/slurm/uid_1000/job_42/step_0" -> "/slurm/uid_1000/job_42".
// The job component is the first one of the form job_<decimal id> (no sign,
// no leading zero): "job_420", "job_042" and "xjob_42" are not job 42, and a
// job_<id> below another job's component does not count. "" when the path
// is in no cgroup of job_id.
std::string slurm_job_dir(std::string_view cgroup_path, uint32_t job_id);

// The lines of /proc/<pid>/cgroup text that place the process in Slurm job
// job_id, each with its path cut to slurm_job_dir(). Only the hierarchies
// Slurm confines jobs with count: on a host with cgroup v1 controllers
// (v1 or hybrid) the controller lines; on a pure cgroup v2 host the unified
// line ("0::"). Named v1 hierarchies (name=systemd) never count, nor does the
// unified line on a v1 or hybrid host: systemd owns those and may delegate
// subtrees to the user, who could then name a cgroup job_<id>.
std::vector<CgroupLine> slurm_job_cgroups(std::string_view proc_cgroup_text, uint32_t job_id);

}  // namespace sk
