#include "k8s-shim/gpu_alloc.h"

#include <algorithm>
#include <set>

#include "common/daemons/json.h"

namespace sk::shim {

std::vector<int> GpuAllocator::free_gpus() const {
    std::set<int> used;
    for (const auto &[uid, idx] : assigned_)
        used.insert(idx.begin(), idx.end());
    std::vector<int> out;
    for (int g : lent_)
        if (!used.count(g)) out.push_back(g);
    return out;
}

Result<std::vector<int>> GpuAllocator::allocate(const std::string &uid, int n) {
    auto it = assigned_.find(uid);
    if (it != assigned_.end()) return it->second;
    if (n <= 0) return std::vector<int>{};
    auto free = free_gpus();
    if (static_cast<int>(free.size()) < n)
        return fail(Error::Refused, "the pod asks for " + std::to_string(n) +
                                        " nvidia.com/gpu but only " + std::to_string(free.size()) +
                                        " of the " + std::to_string(lent_.size()) +
                                        " GPUs this Slurm job lends are free");
    std::vector<int> mine(free.begin(), free.begin() + n);
    assigned_[uid] = mine;
    return mine;
}

void GpuAllocator::release(const std::string &uid) {
    assigned_.erase(uid);
}

Json::Value GpuAllocator::to_json() const {
    Json::Value v(Json::objectValue);
    v["lent"] = json::from_ints(lent_);
    Json::Value pods(Json::objectValue);
    for (const auto &[uid, idx] : assigned_)
        pods[uid] = json::from_ints(idx);
    v["pods"] = pods;
    return v;
}

Status GpuAllocator::restore(const Json::Value &v) {
    if (!v.isObject() || !v["pods"].isObject())
        return fail(Error::Parse, "gpus.json: 'pods' must be an object");
    std::set<int> lent(lent_.begin(), lent_.end()), taken;
    for (const auto &uid : v["pods"].getMemberNames()) {
        auto idx = json::opt_int_list(v["pods"], uid.c_str(), "gpus.json", 1 << 20);
        if (!idx) return idx.failure();
        std::vector<int> keep;
        for (int g : *idx)
            if (lent.count(g) && taken.insert(g).second) keep.push_back(g);
        assigned_[uid] = keep;
    }
    return {};
}

}  // namespace sk::shim
