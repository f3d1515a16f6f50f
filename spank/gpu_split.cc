#include "spank/gpu_split.h"

#include <algorithm>

#include "common/strings.h"

namespace sk::spank {

const char *const kGpuListVars[4] = {"CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                                     "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"};

Result<std::vector<int>> choose_lent(const std::vector<int> &job_gpus, bool want_all,
                                     uint32_t want) {
    if (want_all) return job_gpus;
    if (want > job_gpus.size())
        return fail(Error::InvalidArgument,
                    "--k8s-gpus=" + std::to_string(want) + " but the job has only " +
                        std::to_string(job_gpus.size()) + " GPUs on this node (" +
                        format_index_list(job_gpus) + ")");
    return std::vector<int>(job_gpus.end() - want, job_gpus.end());
}

namespace {

std::vector<std::string> tokens(const std::string &v) {
    std::vector<std::string> out;
    if (v.empty()) return out;
    for (auto &t : split(v, ','))
        out.push_back(std::string(trim(t)));
    return out;
}

bool is_lent(const std::vector<int> &lent, int g) {
    return std::find(lent.begin(), lent.end(), g) != lent.end();
}

}  // namespace

Result<std::map<std::string, std::string>> trainer_gpu_env(
    const std::map<std::string, std::string> &env, const std::vector<int> &lent) {
    std::map<std::string, std::string> out;
    const char *ref_var = nullptr;
    for (const char *v : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
        auto it = env.find(v);
        if (it != env.end() && !it->second.empty()) {
            ref_var = v;
            break;
        }
    }
    if (!ref_var) return out;  // no GPUs in this step: nothing to hide
    auto ref = parse_index_list(env.at(ref_var), ref_var);
    if (!ref) return ref.failure();

    for (const char *var : kGpuListVars) {
        auto it = env.find(var);
        if (it == env.end()) continue;
        auto list = tokens(it->second);
        if (list.size() != ref->size())
            return fail(Error::InvalidArgument,
                        std::string(var) + "=" + it->second + " does not match " + ref_var + "=" +
                            env.at(ref_var) + "; the lent GPUs cannot be hidden from this task");
        std::vector<std::string> kept;
        for (size_t i = 0; i < list.size(); i++)
            if (!is_lent(lent, (*ref)[i])) kept.push_back(list[i]);
        out[var] = join(kept, ",");
    }
    size_t kept_count = 0;
    for (const char *v : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
        auto it = env.find(v);
        if (it == env.end() || it->second.empty()) continue;
        auto l = parse_index_list(it->second, v);
        if (!l) return l.failure();
        std::vector<int> kept;
        for (int g : *l)
            if (!is_lent(lent, g)) kept.push_back(g);
        out[v] = format_index_list(kept);
        if (v == std::string(ref_var)) kept_count = kept.size();
    }
    if (env.count("SLURM_GPUS_ON_NODE")) out["SLURM_GPUS_ON_NODE"] = std::to_string(kept_count);
    return out;
}

std::map<int, std::string> gpu_types_from_gres_detail(const std::string &detail) {
    std::map<int, std::string> out;
    // Items are separated by commas outside parentheses (an IDX list has its own).
    std::vector<std::string> items(1);
    int depth = 0;
    for (char c : detail) {
        if (c == '(') depth++;
        if (c == ')' && depth > 0) depth--;
        if (c == ',' && depth == 0)
            items.emplace_back();
        else
            items.back() += c;
    }
    for (const auto &item : items) {
        size_t open = item.find('('), close = item.rfind(')');
        if (open == std::string::npos || close == std::string::npos || close < open) continue;
        auto parts = split(item.substr(0, open), ':');
        if (parts.empty() || parts[0] != "gpu") continue;
        // gpu:TYPE:N, gpu:N, gpu:TYPE (a count of 1 may be left out).
        bool typed =
            parts.size() >= 3 ||
            (parts.size() == 2 && parts[1].find_first_not_of("0123456789") != std::string::npos);
        std::string type = typed ? parts[1] : "";
        std::string inner = item.substr(open + 1, close - open - 1);
        size_t at = inner.find("IDX:");
        if (at == std::string::npos) continue;
        std::string idx = inner.substr(at + 4);
        if (size_t end = idx.find_first_of(")("); end != std::string::npos) idx.resize(end);
        auto list = parse_index_list(idx, "IDX");
        if (!list) continue;
        for (int i : *list)
            out[i] = type;
    }
    return out;
}

std::string lent_gpu_type(const std::map<int, std::string> &types, const std::vector<int> &lent) {
    std::string type;
    for (size_t n = 0; n < lent.size(); n++) {
        auto it = types.find(lent[n]);
        if (it == types.end() || it->second.empty()) return "";
        if (n > 0 && it->second != type) return "";
        type = it->second;
    }
    return type;
}

}  // namespace sk::spank
