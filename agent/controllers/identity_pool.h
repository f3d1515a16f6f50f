// The node identities no job holds right now (node_name_template with
// {slot}): a slot's Node name is the same for every job that takes the
// slot, so its system:node:<name> certificate (agent/controllers/
// node_credentials.h) is kept for the next job instead of being thrown away
// with the Node. While the slot is free its certificate is renewed here in
// the background (70-90 % of its life, as a kubelet's certificate manager),
// so the next job on the slot starts without a CSR round trip; a job that
// takes the slot continues from the same file (VirtualNode's own
// NodeCredentials).
// Kept, in order: keep() of a slot a job released, and at the agent's start
// (keep_kept_files) every certificate file of this host's slots no
// re-adopted job holds.
// All methods run on the loop.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "agent/controllers/agent_context.h"

namespace sk::agent {

class IdentityPool {
  public:
    explicit IdentityPool(AgentContext &ctx) : ctx_(ctx) {}
    IdentityPool(const IdentityPool &) = delete;
    IdentityPool &operator=(const IdentityPool &) = delete;
    ~IdentityPool() { stop(); }

    // Keeps node's identity current from now on, when its key and
    // certificate file exists (a node that never had an identity leaves
    // nothing to keep): the certificate used while valid and renewed ahead
    // of its end, or a new one asked for (as a node registration asks) when
    // it expired. One that cannot be had (a CSR denied or never signed) is
    // given up with a warning: the next job on the slot asks again.
    void keep(const std::string &node);
    // A job takes node: no renewal from here (one in flight is dropped; the
    // job's node renews from the same file).
    void take(const std::string &node);
    // At the agent's start: keep() each slot name of slurm_node (slots
    // 0..max_jobs-1) whose certificate file exists, except those in `held`.
    void keep_kept_files(const std::string &slurm_node, const std::set<std::string> &held);
    void stop();
    size_t size() const { return kept_.size(); }
    bool holds(const std::string &node) const { return kept_.count(node) != 0; }

  private:
    struct Kept;
    AgentContext &ctx_;
    std::map<std::string, std::shared_ptr<Kept>> kept_;
};

}  // namespace sk::agent
