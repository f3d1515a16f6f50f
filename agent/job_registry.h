// The registered jobs of this agent and their persistence: one JSON file per
// (job, slurm node) under <state_dir>/jobs, written atomically (tmp + fsync +
// rename + fsync of the directory) so a restarted agent re-adopts exactly
// what was registered.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/protocol.h"
#include "common/result.h"

namespace sk::agent {

struct JobRecord {
    proto::RegisterRequest job;
    std::string node_name;
    std::string node_uid;  // last known; "" until the Node was created
    int64_t registered_at = 0;
    bool draining = false;
};

Json::Value to_json(const JobRecord &r);
Result<JobRecord> job_record_from_json(const Json::Value &v);
std::string job_key(uint32_t job_id, const std::string &slurm_node);  // "42@n1"

class JobStore {
  public:
    explicit JobStore(std::string state_dir) : dir_(std::move(state_dir) + "/jobs") {}
    Status init() const;  // mkdir -p, 0700
    Status save(const JobRecord &r) const;
    Status remove(uint32_t job_id, const std::string &slurm_node) const;
    // Every record; unreadable files are reported in `bad` and skipped.
    std::vector<JobRecord> load_all(std::vector<std::string> *bad) const;
    std::string path_of(uint32_t job_id, const std::string &slurm_node) const;

  private:
    std::string dir_;
};

// Writes data to path atomically (exposed for tests and other state files).
Status write_file_atomic(const std::string &path, const std::string &data, unsigned mode);

}  // namespace sk::agent
