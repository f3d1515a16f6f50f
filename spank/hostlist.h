// Slurm host lists ("n[1-3,7],gpu[01-02],login") expanded in order. Used by the
// prolog to find whether this node is one of the last M (--k8s-nodes).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace sk::spank {

Result<std::vector<std::string>> expand_hostlist(const std::string &list);

}  // namespace sk::spank
