// A certificate obtained and renewed through CertificateSigningRequests, as
// a kubelet's certificate manager obtains its client and serving
// certificates; what it is for comes in a CsrProfile:
//  - start(): a key and certificate kept from before (an agent restart)
//    are used at once while they are for this profile (the node's subject,
//    the names it must be valid for) and valid for another 10 s (renewed
//    right after when due); otherwise a new key and a CSR for
//    system:node:<node> are POSTed under the agent's own credential
//    (AgentContext::agent_api) and watched until they are signed
//    (status.certificate), denied, or failed by the signer.
//  - With a timeout (the nodes' client identities, which an approver
//    answers at once): ready(ok) once a credential is in hand;
//    ready(failure) when the CSR was denied or failed, or not signed within
//    the timeout (the message says what to check), after which nothing is
//    retried. Without one (the kubelet endpoint's serving certificate,
//    which a person may approve hours later): a request waits for its
//    answer as long as it takes, and one denied or failed is followed by a
//    new one after a back-off (up to retry_max_ms); ready(failure) never
//    comes.
//  - Renewal: a new key and CSR at a jittered 70-90 % of the certificate's
//    validity (as the kubelet's certificate manager); one denied, failed or
//    not signed within the timeout is retried with back-off and a new key
//    until one works; the new credential is handed to on_change and the
//    old one stays in use until then.
//  - The key and certificate live in the profile's file (0600, replaced
//    atomically); forget() removes it.
// All methods run on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <json/json.h>

#include "agent/controllers/agent_context.h"
#include "agent/controllers/node_bound.h"
#include "agent/controllers/node_identity.h"
#include "agent/core/timer_source.h"
#include "agent/kube/api_auth.h"
#include "common/backoff.h"

namespace sk::agent {

struct CsrProfile {
    std::string prefix;         // log prefix: "[node slurm-n1-42]"
    std::string what;           // for the log: "identity system:node:slurm-n1-42"
    std::string who;            // for describe(): "system:node:slurm-n1-42"
    std::string node;           // the subject: CN=system:node:<node>, O=system:nodes
    std::string generate_name;  // the CSRs' metadata.generateName
    std::string file;           // key and certificate
    std::string signer;         // spec.signerName
    std::vector<std::string> usages;
    SubjectAltNames sans;            // a serving certificate's names; empty for a client one
    int64_t expiration_seconds = 0;  // spec.expirationSeconds; 0: the signer's duration
    uint64_t timeout_s = 0;          // see above; 0: none
    std::string timeout_hint;        // what to check when a request timed out
    std::string refused_hint;        // what to check when the POST was refused (403, 422)
    uint64_t retry_max_ms = 60000;   // the back-off's cap
};

class CsrCertificate : public NodeBound {
  public:
    using OnChange = std::function<void(std::shared_ptr<const Credential>)>;
    CsrCertificate(AgentContext &ctx, CsrProfile profile, OnChange on_change);
    CsrCertificate(const CsrCertificate &) = delete;
    CsrCertificate &operator=(const CsrCertificate &) = delete;

    void start(std::function<void(Status)> ready);
    void stop();
    // stop(), and a start() still waiting for its first credential gets why.
    void abandon(const Status &why);
    void forget();
    const std::string &file() const { return profile_.file; }
    // For `slurm-k8s status`: "<what>, certificate until T", or that it has
    // none yet (and which CSR it waits for), or that it expired (a renewal
    // failing).
    std::string describe(int64_t now_s) const;
    // Called with a CSR's name when one was sent and is not yet answered.
    void set_on_pending(std::function<void(const std::string &)> f) { on_pending_ = std::move(f); }

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
    const std::string &prefix() const { return profile_.prefix; }
    const SubjectAltNames *covers() const {
        return profile_.sans.empty() ? nullptr : &profile_.sans;
    }

    AgentContext &ctx_;
    CsrProfile profile_;
    OnChange on_change_;
    std::function<void(const std::string &)> on_pending_;
    std::function<void(Status)> ready_;  // until the first credential (or the failure)
    bool have_credential_ = false;
    int64_t not_after_ = 0;  // of the certificate in use
    bool stopped_ = false;
    std::string key_pem_;  // of the request in flight
    std::string csr_name_;
    uint64_t watch_id_ = 0;
    uint64_t attempt_ = 0;  // a newer request makes the callbacks of an older one moot
    ControllerTimer deadline_, renew_, retry_;
    Backoff backoff_;
};

}  // namespace sk::agent
