#include "agent/controllers/csr_certificate.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "agent/controllers/node_identity.h"
#include "agent/kube/api_object.h"
#include "agent/kube/kube_client.h"
#include "common/daemons/base64.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/rfc3339.h"

namespace sk::agent {

namespace {

constexpr const char *kCsrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
constexpr size_t kMaxFile = size_t{64} * 1024;  // a key and one certificate

// The first PEM block of `text` that begins with `begin` (its END line
// included), "" when there is none.
std::string pem_block(const std::string &text, const std::string &begin) {
    auto b = text.find(begin);
    if (b == std::string::npos) return "";
    auto e = text.find("-----END ", b);
    if (e == std::string::npos) return "";
    e = text.find("-----\n", e + 9);
    return e == std::string::npos ? "" : text.substr(b, e + 6 - b);
}

// The condition of type `type` with status True, or null.
const Json::Value *condition(const Json::Value &csr, const char *type) {
    for (const auto &c : csr["status"]["conditions"])
        if (c["type"].asString() == type && c["status"].asString() != "False") return &c;
    return nullptr;
}

double renewal_fraction() {
    return 0.7 + 0.2 * (static_cast<double>(random() % 1000) / 1000.0);
}

}  // namespace

CsrCertificate::CsrCertificate(AgentContext &ctx, CsrProfile profile, OnChange on_change)
    : ctx_(ctx),
      profile_(std::move(profile)),
      on_change_(std::move(on_change)),
      deadline_(*ctx.timers),
      renew_(*ctx.timers),
      retry_(*ctx.timers),
      backoff_(1000, profile_.retry_max_ms) {}

void CsrCertificate::start(std::function<void(Status)> ready) {
    stopped_ = false;
    ready_ = std::move(ready);
    // A key and certificate from before (the agent restarted and re-adopts
    // the node): used at once while they are for this profile and valid for
    // another 10 s, so the node's pods are served without waiting on a CSR;
    // one due for renewal is renewed right after, in the background.
    if (auto text = read_file(file(), kMaxFile); text) {
        std::string key = pem_block(*text, "-----BEGIN PRIVATE KEY-----");
        std::string cert = pem_block(*text, "-----BEGIN CERTIFICATE-----");
        auto c = check_node_certificate(cert, key, profile_.node, covers());
        if (c && ctx_.clock->now_s() + 10 < c->not_after) {
            LOG_INFO("%s %s from %s (valid until %s)", prefix().c_str(), profile_.what.c_str(),
                     file().c_str(), rfc3339(c->not_after).c_str());
            // Counted from when it arrived (the file's time), not from its
            // not_before: signers backdate that (kube-controller-manager by
            // 5 min), which would renew a short-lived one at once.
            struct stat st {};
            int64_t arrived = ::lstat(file().c_str(), &st) == 0 ? st.st_mtime : 0;
            return use(key, cert, c->not_after, renewal_time(*c, renewal_fraction(), arrived));
        }
        LOG_INFO("%s the kept certificate in %s is not used (%s): asking for a new one",
                 prefix().c_str(), file().c_str(), c ? "it expires" : c.message().c_str());
    } else if (text.error() != Error::NotFound) {
        LOG_WARN("%s %s: %s", prefix().c_str(), file().c_str(), text.message().c_str());
    }
    arm_deadline();
    request();
}

// The first request's deadline counts from start() (a server that refuses
// or does not answer fails the registration too); a renewal's from each of
// its requests, after which it is retried with a new key and request.
// Without a timeout there is none.
void CsrCertificate::arm_deadline() {
    if (!profile_.timeout_s) return;
    deadline_.start(profile_.timeout_s * 1000, guard([this] {
                        failed(fail(Error::Unavailable,
                                    "its certificate signing request " +
                                        (csr_name_.empty() ? std::string("could not be sent")
                                                           : csr_name_ + " was not signed") +
                                        " within " + std::to_string(profile_.timeout_s) + " s " +
                                        profile_.timeout_hint));
                    }));
}

void CsrCertificate::stop() {
    stopped_ = true;
    ++attempt_;
    if (watch_id_) ctx_.agent_api().cancel(watch_id_);
    watch_id_ = 0;
    deadline_.stop();
    renew_.stop();
    retry_.stop();
}

// The first credential's (or its failure's) one report to start()'s caller.
void CsrCertificate::call_ready(const Status &st) {
    if (auto ready = std::exchange(ready_, nullptr)) ready(st);
}

void CsrCertificate::abandon(const Status &why) {
    stop();
    call_ready(why);
}

void CsrCertificate::forget() {
    stop();
    if (::unlink(file().c_str()) != 0 && errno != ENOENT)
        LOG_WARN("%s cannot remove %s: %s", prefix().c_str(), file().c_str(), strerror(errno));
}

std::string CsrCertificate::describe(int64_t now_s) const {
    const std::string &who = profile_.who;
    if (!have_credential_)
        return who + ", no certificate yet" +
               (csr_name_.empty() ? std::string()
                                  : " (certificate signing request " + csr_name_ + " unanswered)");
    if (now_s >= not_after_)
        return who + ", certificate EXPIRED at " + rfc3339(not_after_) + " (renewal failing)";
    return who + ", certificate until " + rfc3339(not_after_);
}

void CsrCertificate::request() {
    if (stopped_) return;
    uint64_t attempt = ++attempt_;
    if (watch_id_) ctx_.agent_api().cancel(watch_id_);
    watch_id_ = 0;
    csr_name_.clear();
    if (have_credential_) arm_deadline();
    auto kr = profile_.sans.empty() ? make_node_client_request(profile_.node)
                                    : make_node_serving_request(profile_.node, profile_.sans);
    if (!kr) return failed(kr.failure());
    key_pem_ = kr->key_pem;
    Json::Value csr(Json::objectValue);
    csr["apiVersion"] = "certificates.k8s.io/v1";
    csr["kind"] = "CertificateSigningRequest";
    csr["metadata"]["generateName"] = profile_.generate_name;
    csr["spec"]["request"] = base64_encode(kr->csr_pem);
    csr["spec"]["signerName"] = profile_.signer;
    for (const auto &u : profile_.usages)
        csr["spec"]["usages"].append(u);
    if (profile_.expiration_seconds)
        csr["spec"]["expirationSeconds"] = Json::Int64(profile_.expiration_seconds);
    ctx_.agent_api().post(
        kCsrs, csr, guard([this, attempt](Result<Json::Value> r) {
            if (attempt != attempt_ || stopped_) return;
            if (r) return created(*r);
            if (r.error() == Error::Forbidden || r.error() == Error::Invalid)
                return failed(fail(r.error(), "its certificate signing request was refused: " +
                                                  r.message() + " " + profile_.refused_hint));
            LOG_WARN("%s certificate signing request: %s", prefix().c_str(), r.message().c_str());
            retry_later();
        }));
}

void CsrCertificate::created(const Json::Value &csr) {
    csr_name_ = api::object_meta(csr).name;
    LOG_VERBOSE("%s certificate signing request %s sent", prefix().c_str(), csr_name_.c_str());
    if (examine(csr)) return;
    if (on_pending_) on_pending_(csr_name_);
    watch(csr_name_, api::object_meta(csr).resource_version);
}

// Watched by name from the version the POST (or a re-read) returned, so
// that the approval and the certificate are seen as they happen; a watch
// that ends is followed by a GET and a new watch.
void CsrCertificate::watch(const std::string &name, const std::string &rv) {
    uint64_t attempt = attempt_;
    std::string path = std::string(kCsrs) +
                       "?watch=1&fieldSelector=" + url_escape("metadata.name=" + name) +
                       (rv.empty() ? "" : "&resourceVersion=" + url_escape(rv));
    watch_id_ = ctx_.agent_api().watch(
        path, guard([this, attempt](const WatchEvent &e) { on_event(attempt, e); }),
        guard([this, attempt, name](const Status &st) {
            if (attempt != attempt_ || stopped_) return;
            watch_id_ = 0;
            if (!st)
                LOG_VERBOSE("%s watch of %s ended: %s", prefix().c_str(), name.c_str(),
                            st.message().c_str());
            ctx_.agent_api().get(
                std::string(kCsrs) + "/" + name,
                guard([this, attempt, name](Result<Json::Value> r) {
                    if (attempt != attempt_ || stopped_) return;
                    if (r) {
                        if (!examine(*r)) watch(name, api::object_meta(*r).resource_version);
                        return;
                    }
                    if (r.error() == Error::NotFound)  // deleted by someone: ask again
                        LOG_WARN("%s certificate signing request %s is gone", prefix().c_str(),
                                 name.c_str());
                    else
                        LOG_WARN("%s reading %s: %s", prefix().c_str(), name.c_str(),
                                 r.message().c_str());
                    retry_later();
                }));
        }));
}

// A member function, not the watch's lambda: cancelling the watch destroys
// that lambda while it runs, so nothing may be read from it afterwards.
void CsrCertificate::on_event(uint64_t attempt, const WatchEvent &e) {
    if (attempt != attempt_ || stopped_) return;
    if (e.type == WatchType::Error) return;  // the end re-reads it
    if (examine(e.object) && watch_id_) ctx_.agent_api().cancel(std::exchange(watch_id_, 0));
}

bool CsrCertificate::examine(const Json::Value &csr) {
    for (const char *end : {"Denied", "Failed"}) {
        if (const Json::Value *c = condition(csr, end)) {
            failed(fail(Error::Forbidden, "its certificate signing request " + csr_name_ + " was " +
                                              (end[0] == 'D' ? "denied" : "failed") + " (" +
                                              (*c)["reason"].asString() + ": " +
                                              (*c)["message"].asString() + ")"));
            return true;
        }
    }
    const std::string b64 = csr["status"]["certificate"].asString();
    if (b64.empty()) return false;
    auto pem = base64_decode(b64);
    if (!pem) {
        failed(fail(Error::Invalid, "the certificate of " + csr_name_ + " is not base64"));
        return true;
    }
    issued(*pem);
    return true;
}

void CsrCertificate::issued(const std::string &cert_pem) {
    std::string cert = pem_block(cert_pem, "-----BEGIN CERTIFICATE-----");
    auto c = check_node_certificate(cert, key_pem_, profile_.node, covers());
    if (!c)
        return failed(fail(Error::Invalid,
                           "the certificate of " + csr_name_ + " cannot be used: " + c.message()));
    // state_dir is root's own (agent.conf); pki below it only root reads.
    const std::string dir = file().substr(0, file().rfind('/'));
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        LOG_WARN("%s cannot make %s: %s (the certificate is kept in memory only)", prefix().c_str(),
                 dir.c_str(), strerror(errno));
    else if (auto w = write_file_atomic(file(), key_pem_ + cert, 0600); !w)
        LOG_WARN("%s %s (the certificate is kept in memory only)", prefix().c_str(),
                 w.message().c_str());
    LOG_INFO("%s %s: certificate %s valid until %s", prefix().c_str(), profile_.what.c_str(),
             csr_name_.c_str(), rfc3339(c->not_after).c_str());
    use(key_pem_, cert, c->not_after, renewal_time(*c, renewal_fraction(), ctx_.clock->now_s()));
}

void CsrCertificate::use(const std::string &key_pem, const std::string &cert_pem, int64_t not_after,
                         int64_t renew_at) {
    not_after_ = not_after;
    auto cred = std::make_shared<Credential>();
    cred->key_pem = key_pem;
    cred->cert_pem = cert_pem;
    have_credential_ = true;
    backoff_.reset();
    deadline_.stop();
    retry_.stop();
    on_change_(std::move(cred));
    int64_t in_s = renew_at - ctx_.clock->now_s();
    renew_.start(in_s > 0 ? static_cast<uint64_t>(in_s) * 1000 : 0, guard([this] {
                     LOG_INFO("%s renewing its certificate", prefix().c_str());
                     request();
                 }));
    call_ready(Status());
}

void CsrCertificate::failed(const Status &st) {
    if (!have_credential_ && profile_.timeout_s) {
        LOG_ERROR("%s no identity: %s", prefix().c_str(), st.message().c_str());
        stop();
        call_ready(st);
        return;
    }
    // A renewal (the current certificate stays in use while it is valid),
    // or a first request that waits as long as it takes.
    LOG_WARN("%s certificate %s failed: %s", prefix().c_str(),
             have_credential_ ? "renewal" : "request", st.message().c_str());
    retry_later();
}

void CsrCertificate::retry_later() {
    if (stopped_) return;
    retry_.start(backoff_.next_ms(), guard([this] { request(); }));
}

}  // namespace sk::agent
