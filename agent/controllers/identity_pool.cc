#include "agent/controllers/identity_pool.h"

#include <sys/stat.h>

#include <utility>

#include "agent/controllers/node_credentials.h"
#include "agent/core/agent_config.h"
#include "common/log.h"

namespace sk::agent {

struct IdentityPool::Kept {
    Kept(AgentContext &ctx, const std::string &node)
        : creds(ctx, node, [](const std::shared_ptr<const Credential> &) {}) {}
    NodeCredentials creds;
};

namespace {

bool have_file(const AgentConfig &cfg, const std::string &node) {
    struct stat st {};
    std::string file = node_credentials_file(cfg, node);
    return ::lstat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

void IdentityPool::keep(const std::string &node) {
    if (kept_.count(node) || !have_file(*ctx_.cfg, node)) return;
    auto k = std::make_shared<Kept>(ctx_, node);
    k->creds.bind(k);
    kept_[node] = k;
    std::weak_ptr<Kept> weak = k;
    k->creds.start([this, node, weak](const Status &st) {
        if (st) return;
        LOG_WARN(
            "[node %s] the identity kept for the slot's next job is given up (that job asks "
            "for a new one): %s",
            node.c_str(), st.message().c_str());
        // Deferred: this runs inside the certificate's own callback.
        ctx_.timers->defer([this, node, weak] {
            auto it = kept_.find(node);
            if (it != kept_.end() && it->second == weak.lock()) kept_.erase(it);
        });
    });
}

void IdentityPool::take(const std::string &node) {
    auto it = kept_.find(node);
    if (it == kept_.end()) return;
    it->second->creds.stop();
    kept_.erase(it);
}

void IdentityPool::keep_kept_files(const std::string &slurm_node,
                                   const std::set<std::string> &held) {
    const AgentConfig &cfg = *ctx_.cfg;
    for (uint64_t s = 0; s < cfg.max_jobs; s++) {
        auto name =
            expand_node_name(cfg.node_name_template, slurm_node, 0, static_cast<uint32_t>(s));
        if (name && !held.count(*name)) keep(*name);
    }
}

void IdentityPool::stop() {
    for (auto &[node, k] : kept_)
        k->creds.stop();
    kept_.clear();
}

}  // namespace sk::agent
