// GPU allocator (pure): hands out disjoint indices from the GPUs lent to this
// node, one set per pod uid. The assignment is persisted by the caller
// (to_json/from_json, <state_dir>/gpus.json) so a restarted shim never gives a
// GPU twice.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/result.h"

namespace sk::shim {

class GpuAllocator {
  public:
    explicit GpuAllocator(std::vector<int> lent = {}) : lent_(std::move(lent)) {}

    // Idempotent per uid: a pod that already holds GPUs gets the same ones.
    // Refused (with the numbers) when fewer than n are free.
    Result<std::vector<int>> allocate(const std::string &uid, int n);
    void release(const std::string &uid);
    std::vector<int> free_gpus() const;
    const std::map<std::string, std::vector<int>> &assigned() const { return assigned_; }
    const std::vector<int> &lent() const { return lent_; }

    Json::Value to_json() const;  // {"lent":[...],"pods":{"uid":[...]}}
    // Restores assignments; indices no longer lent are dropped (the node's
    // loan shrank), so no pod can keep a GPU the job did not lend.
    Status restore(const Json::Value &v);

  private:
    std::vector<int> lent_;
    std::map<std::string, std::vector<int>> assigned_;
};

}  // namespace sk::shim
