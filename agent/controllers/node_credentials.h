// A virtual node's identity (agent/node_identity.h): the certificate its API
// traffic presents, obtained and renewed as a kubelet's TLS bootstrap does.
//  - start(): a key and certificate kept from before (an agent restart
//    re-adopting the node) are used at once while valid for another 10 s
//    (renewed right after when due); otherwise a new key and a
//    kubernetes.io/kube-apiserver-client-kubelet CSR for system:node:<node>
//    is POSTed under the agent's own credential (AgentContext::agent_api),
//    and watched until the
//    controller-manager signed it (status.certificate), denied it or its
//    signer failed it. ready(ok) once a credential is in hand; ready(failure)
//    when the CSR was denied or failed, or not signed within
//    node_csr_timeout_s (the message says what to check), after which
//    nothing is retried.
//  - Renewal: a new key and CSR at a jittered 70-90 % of the certificate's
//    validity (as the kubelet's certificate manager); one denied, failed or
//    not signed within node_csr_timeout_s is retried with back-off (1-60 s)
//    and a new key until one works; the new credential is handed to
//    on_change and the old one stays in use until then.
//  - The key and certificate live in <state_dir>/pki/<node>.pem (0600,
//    replaced atomically); forget() removes it once the node is gone.
// All methods run on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <json/json.h>

#include "agent/api_auth.h"
#include "agent/backoff.h"
#include "agent/controllers/agent_context.h"
#include "agent/controllers/node_bound.h"
#include "uv/handles.h"

namespace sk::agent {

class NodeCredentials : public NodeBound {
  public:
    using OnChange = std::function<void(std::shared_ptr<const Credential>)>;
    NodeCredentials(AgentContext &ctx, std::string node_name, OnChange on_change);
    NodeCredentials(const NodeCredentials &) = delete;
    NodeCredentials &operator=(const NodeCredentials &) = delete;

    void start(std::function<void(Status)> ready);
    void stop();
    // stop(), and a start() still waiting for its first credential gets why.
    void abandon(const Status &why);
    void forget();
    // <state_dir>/pki/<node>.pem
    std::string file() const;
    // For `slurm-k8s status`: "system:node:<node>, certificate until T",
    // or that it has none yet, or that it expired (a renewal failing).
    std::string describe(int64_t now_s) const;

  private:
    void arm_deadline();
    void request();
    void created(const Json::Value &csr);
    void watch(const std::string &name, const std::string &rv);
    void on_event(uint64_t attempt, const WatchEvent &e);
    // True when csr reached an end (certificate, Denied, Failed).
    bool examine(const Json::Value &csr);
    void issued(const std::string &cert_pem);
    void failed(const Status &st);
    void use(const std::string &key_pem, const std::string &cert_pem, int64_t not_after,
             int64_t renew_at);
    void retry_later();
    void call_ready(const Status &st);
    std::string prefix() const { return "[node " + node_ + "]"; }

    AgentContext &ctx_;
    std::string node_;
    OnChange on_change_;
    std::function<void(Status)> ready_;  // until the first credential (or the failure)
    bool have_credential_ = false;
    int64_t not_after_ = 0;  // of the certificate in use
    bool stopped_ = false;
    std::string key_pem_;  // of the request in flight
    std::string csr_name_;
    uint64_t watch_id_ = 0;
    uint64_t attempt_ = 0;  // a newer request makes the callbacks of an older one moot
    Timer deadline_, renew_, retry_;
    Backoff backoff_{1000, 60000};
};

}  // namespace sk::agent
