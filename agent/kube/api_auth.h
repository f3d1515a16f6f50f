// The agent's credential towards the API server, kept current as client-go
// keeps a kubelet's or kubectl's (docs/admin-guide.md, "Credentials"):
//  - a token file (`kubectl create token`, a projected ServiceAccount token,
//    a file an external tool rewrites) is re-read when it changes (checked at
//    most once a second, before a request) and at once after a 401, so a
//    rotated token is used without a restart; the file may be a symlink (a
//    projected volume swaps its `..data` link);
//  - an exec credential plugin (client.authentication.k8s.io/v1, as EKS, GKE
//    and OIDC set-ups use) is run at start, again ahead of the expiry it
//    reports and after a 401; it gives a token or a client certificate;
//  - an inline token, client certificate files or inline PEM as given.
// A request carries the Credential current when it starts; a 401 to it
// re-reads (or re-runs) its source and, when that gives another credential,
// the transport sends the request once more (agent/kube/http_client.h). A
// credential the server keeps refusing is one ERROR line (and one INFO line
// when it works again), the metrics of agent/kubelet/metrics.h and a line of
// `slurm-k8s status`: never only a silent NotReady.
// Everything runs on the loop's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <json/json.h>

#include "agent/kube/credentials.h"
#include "common/result.h"

typedef struct uv_loop_s uv_loop_t;

namespace sk::agent {

// What one request presents.
struct Credential {
    uint64_t generation = 0;          // changes whenever anything below changes
    std::string token;                // Authorization: Bearer; "" = none
    std::string cert_file, key_file;  // client certificate files, or
    std::string cert_pem, key_pem;    // inline PEM (kubeconfig data, exec plugin)
};

// For the metrics and the log: called on the loop.
struct AuthObserver {
    std::function<void()> reloaded;              // a new credential from its source
    std::function<void(bool ok)> state;          // accepted / refused (on every change)
    std::function<void(int64_t unix_s)> expiry;  // when the current one expires; 0 = unknown
};

class ApiAuth {
  public:
    struct Timing {
        uint64_t token_check_ms = 1000;    // a changed token file is seen within this
        uint64_t exec_retry_ms = 10000;    // the least time between two plugin runs
        uint64_t exec_timeout_ms = 60000;  // a plugin that hangs is killed
    };
    // server: the API server's URL as the kubeconfig names it (an exec
    // plugin's cluster info).
    ApiAuth(uv_loop_t *loop, ApiCredentials creds, std::string server, const Timing &timing);
    ApiAuth(uv_loop_t *loop, ApiCredentials creds, std::string server)
        : ApiAuth(loop, std::move(creds), std::move(server), Timing()) {}
    ~ApiAuth();
    ApiAuth(const ApiAuth &) = delete;
    ApiAuth &operator=(const ApiAuth &) = delete;

    // Reads the files. With an exec plugin, starts it: ready() turns true
    // when it answered (run the loop), failed() when it could not.
    Status start();
    bool ready() const { return ready_; }
    // Why start() or the first exec plugin run failed ("" while none did).
    const std::string &start_error() const { return start_error_; }

    // The credential for a request starting now (a changed token file is
    // re-read first).
    const Credential &current();
    // The server answered 401 to a request made with generation g: re-read
    // the token file, or run the exec plugin again. True when the credential
    // now differs from g (send the request again with it).
    bool unauthorized(uint64_t generation);
    // The server answered something other than 401: the credential works.
    void accepted();

    // {"state": "ok"|"refused"|"unknown", "source": "...", "since": RFC 3339,
    //  "message": "...", "expires": RFC 3339} for `slurm-k8s status`.
    Json::Value status() const;
    void set_observer(AuthObserver o) { obs_ = std::move(o); }

    // The Unix time a JWT's `exp` claim says; 0 when token is not a JWT or
    // has none.
    static int64_t jwt_expiry(const std::string &token);

    struct Impl;

  private:
    void reload_token_file(bool force);
    void run_exec_plugin(const char *why);
    void set_refused(const std::string &why);
    void changed();

    uv_loop_t *loop_;
    Timing timing_;
    ApiCredentials creds_;
    std::string server_;
    Credential cur_;
    bool ready_ = false;
    std::string start_error_;
    // token file: what was read last
    struct FileId {
        uint64_t dev = 0, ino = 0, size = 0;
        int64_t mtime_ns = 0;
        bool operator==(const FileId &o) const {
            return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
        }
    } token_id_;
    uint64_t token_checked_ms_ = 0;
    bool token_checked_ = false;
    // exec plugin
    bool exec_running_ = false;
    int64_t exec_expires_s_ = 0;  // from its expirationTimestamp; 0 = none
    uint64_t exec_started_ms_ = 0;
    std::shared_ptr<bool> alive_;  // false once destroyed: a late plugin answer is dropped
    // state for status()
    enum class State { Unknown, Ok, Refused } state_ = State::Unknown;
    int64_t since_s_ = 0;
    std::string message_;
    int64_t expires_s_ = 0;
    AuthObserver obs_;
};

// The ExecCredential a plugin printed: {token} or {cert_pem, key_pem}, and
// its expiry (0 = none). Pure; the message says what is wrong.
struct ExecCredential {
    std::string token, cert_pem, key_pem;
    int64_t expires_s = 0;
};
Result<ExecCredential> parse_exec_credential(const std::string &json,
                                             const std::string &api_version);

}  // namespace sk::agent
