// The registered jobs of this agent and their persistence: one JSON file per
// (job, slurm node) under <state_dir>/jobs, written atomically
// (write_file_atomic, common/fs.h: temporary file, fsync, rename, fsync of the
// directory) so a restarted agent re-adopts exactly what was registered.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/daemons/protocol.h"
#include "common/fs.h"
#include "common/result.h"

namespace sk::agent {

struct JobRecord {
    proto::RegisterRequest job;
    std::string node_name;
    std::string node_uid;  // last known; "" until the Node was created
    int64_t registered_at = 0;
    bool draining = false;
    // The slot its Node name was made from (node_name_template with
    // {slot}); -1 = a name per job.
    int32_t slot = -1;
    // This node's own kubelet endpoint port (kubelet_node_ports), 0 = the
    // host's shared one. Not persisted: chosen again at each agent start
    // (the Node's status carries the current one).
    uint32_t kubelet_port = 0;
};

Json::Value to_json(const JobRecord &r);
Result<JobRecord> job_record_from_json(const Json::Value &v);
std::string job_key(uint32_t job_id, const std::string &slurm_node);  // "42@n1"
// "job_<id>_<slurm node><suffix>" (a record file, a shim state dir) -> its
// job and node; nullopt for any other name.
std::optional<proto::JobKey> parse_job_file_name(std::string_view name, std::string_view suffix);

class JobStore {
  public:
    // Schedules sync_to_disk(path) (common/fs.h) somewhere else (the agent: libuv's thread
    // pool), so that a save does not wait for the disk.
    using BackgroundSync = std::function<void(const std::string &path)>;

    explicit JobStore(std::string state_dir) : dir_(std::move(state_dir) + "/jobs") {}
    Status init() const;  // mkdir -p, 0700
    // Without a BackgroundSync, save returns once the record is on disk
    // (fsync of the file and the directory). With one, it returns once the
    // record is written and renamed into place: in the page cache, so an
    // agent that crashes or restarts finds it; the fsyncs follow in the
    // background. Only a crash of the machine can lose such a record, and
    // that ends the job on the node too: the agent's garbage collection then
    // deletes the job's Node from the API server. (Two fsyncs cost 1.3-3.6 ms
    // on ext4, on every job's start path: bench/bench_slurm_start.py.)
    Status save(const JobRecord &r) const;
    void set_background_sync(BackgroundSync s) { sync_ = std::move(s); }
    Status remove(uint32_t job_id, const std::string &slurm_node) const;
    // Every record; unreadable files are reported in `bad` and skipped.
    std::vector<JobRecord> load_all(std::vector<std::string> *bad) const;
    std::string path_of(uint32_t job_id, const std::string &slurm_node) const;
    // The (job, slurm node) of every record file, loadable or not.
    std::vector<proto::JobKey> record_keys() const;
    const std::string &dir() const { return dir_; }

  private:
    std::string dir_;
    BackgroundSync sync_;
};

}  // namespace sk::agent
