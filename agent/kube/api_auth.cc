#include "agent/kube/api_auth.h"

#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/daemons/base64.h"
#include "common/daemons/json.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/rfc3339.h"
#include "common/strings.h"
#include "uv/command_runner.h"

namespace sk::agent {

namespace {

constexpr size_t kMaxTokenBytes = 64 << 10;
constexpr int64_t kExecRefreshAheadS = 60;  // an exec plugin runs again this long before its expiry

int64_t unix_now() {
    return static_cast<int64_t>(time(nullptr));
}

// The admin's token file: it may be a symlink (a projected volume's
// `..data/token`), it must be a regular file, read bounded and without
// blocking on a FIFO (common/fs.h read_file). *st: what was read, for the
// change check (a file replaced meanwhile is read again at the next check).
Result<std::string> read_token_file(const std::string &path, struct stat *st) {
    if (stat(path.c_str(), st) != 0)
        return fail(errno == ENOENT ? Error::NotFound : Error::Io, path + ": " + strerror(errno));
    auto out = read_file(path, kMaxTokenBytes, Links::Follow);
    if (!out) return fail(out.error(), path + ": " + out.message());
    std::string token(trim(*out));
    if (token.empty()) return fail(Error::InvalidArgument, path + ": empty");
    if (token.find_first_of("\r\n") != std::string::npos)
        return fail(Error::InvalidArgument, path + ": more than one line: not a token");
    return token;
}

std::string when(int64_t s) {
    return s > 0 ? rfc3339(s) : "";
}

std::string describe_source(const ApiCredentials &c) {
    if (!c.exec.command.empty()) return "exec plugin " + c.exec.command;
    if (!c.token_file.empty()) return "token file " + c.token_file;
    if (!c.token.empty()) return "the kubeconfig's token";
    if (!c.client_cert.empty()) return "client certificate " + c.client_cert;
    return "the kubeconfig's client certificate";
}

}  // namespace

ApiAuth::ApiAuth(uv_loop_t *loop, ApiCredentials creds, std::string server, const Timing &timing)
    : loop_(loop),
      timing_(timing),
      creds_(std::move(creds)),
      server_(std::move(server)),
      alive_(std::make_shared<bool>(true)) {}

ApiAuth::~ApiAuth() {
    *alive_ = false;
}

int64_t ApiAuth::jwt_expiry(const std::string &token) {
    size_t a = token.find('.');
    size_t b = a == std::string::npos ? a : token.find('.', a + 1);
    if (b == std::string::npos) return 0;
    // base64url without padding -> the standard alphabet with it
    std::string p = token.substr(a + 1, b - a - 1);
    for (auto &ch : p) {
        if (ch == '-') ch = '+';
        if (ch == '_') ch = '/';
    }
    while (p.size() % 4)
        p += '=';
    auto raw = base64_decode(p);
    if (!raw) return 0;
    auto claims = json::parse(*raw);
    if (!claims || !(*claims)["exp"].isNumeric()) return 0;
    return (*claims)["exp"].asInt64();
}

Status ApiAuth::start() {
    cur_.cert_file = creds_.client_cert;
    cur_.key_file = creds_.client_key;
    cur_.cert_pem = creds_.client_cert_data;
    cur_.key_pem = creds_.client_key_data;
    cur_.token = creds_.token;
    cur_.generation = 1;
    if (!creds_.token_file.empty()) {
        struct stat st {};
        auto t = read_token_file(creds_.token_file, &st);
        if (!t) return fail(t.error(), "api_token_file " + t.message());
        cur_.token = *t;
        token_id_ = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                     static_cast<uint64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
        token_checked_ms_ = uv_now(loop_);
        token_checked_ = true;
    }
    expires_s_ = jwt_expiry(cur_.token);
    if (obs_.expiry) obs_.expiry(expires_s_);
    if (creds_.exec.command.empty()) {
        ready_ = true;
        return {};
    }
    run_exec_plugin("start");
    return {};
}

void ApiAuth::changed() {
    cur_.generation++;
    if (obs_.reloaded) obs_.reloaded();
    expires_s_ = exec_expires_s_ ? exec_expires_s_ : jwt_expiry(cur_.token);
    if (obs_.expiry) obs_.expiry(expires_s_);
}

void ApiAuth::reload_token_file(bool force) {
    if (creds_.token_file.empty()) return;
    uint64_t now = uv_now(loop_);
    if (!force && token_checked_ && now - token_checked_ms_ < timing_.token_check_ms) return;
    token_checked_ms_ = now;
    token_checked_ = true;
    struct stat st {};
    if (!force) {
        if (stat(creds_.token_file.c_str(), &st) != 0) return;  // gone: keep the last one
        FileId id{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                  static_cast<uint64_t>(st.st_size),
                  static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
        if (id == token_id_) return;
    }
    auto t = read_token_file(creds_.token_file, &st);
    if (!t) {
        LOG_WARN("api_token_file: cannot re-read %s; keeping the token read before",
                 t.message().c_str());
        return;
    }
    token_id_ = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                 static_cast<uint64_t>(st.st_size),
                 static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    if (*t == cur_.token) return;
    cur_.token = *t;
    LOG_INFO("api_token_file %s changed: using the new token%s", creds_.token_file.c_str(),
             force ? " (after a 401)" : "");
    changed();
}

const Credential &ApiAuth::current() {
    reload_token_file(false);
    if (!creds_.exec.command.empty() && !exec_running_ && exec_expires_s_ &&
        unix_now() >= exec_expires_s_ - kExecRefreshAheadS)
        run_exec_plugin("its credential expires");
    return cur_;
}

bool ApiAuth::unauthorized(uint64_t generation) {
    if (generation == cur_.generation) {
        reload_token_file(true);
        if (!creds_.exec.command.empty()) run_exec_plugin("the API server answered 401");
    }
    if (generation != cur_.generation) return true;
    std::string why = "401 Unauthorized with the credential from " + describe_source(creds_);
    if (expires_s_ && unix_now() >= expires_s_) why += ", which expired at " + when(expires_s_);
    if (!creds_.token_file.empty())
        why +=
            "; write a valid token to " + creds_.token_file + " (it is read again when it changes)";
    else if (creds_.exec.command.empty())
        why += "; give the agent a valid credential and restart it";
    set_refused(why);
    return false;
}

void ApiAuth::accepted() {
    if (state_ == State::Ok) return;
    if (state_ == State::Refused)
        LOG_INFO("the API server accepts the agent's credential again (%s), refused since %s",
                 describe_source(creds_).c_str(), when(since_s_).c_str());
    state_ = State::Ok;
    since_s_ = unix_now();
    message_.clear();
    if (obs_.state) obs_.state(true);
}

void ApiAuth::set_refused(const std::string &why) {
    if (state_ == State::Refused) {
        message_ = why;
        return;
    }
    LOG_ERROR("the API server refuses the agent's credential: %s", why.c_str());
    state_ = State::Refused;
    since_s_ = unix_now();
    message_ = why;
    if (obs_.state) obs_.state(false);
}

void ApiAuth::run_exec_plugin(const char *why) {
    if (exec_running_) return;
    uint64_t now = uv_now(loop_);
    if (exec_started_ms_ && now - exec_started_ms_ < timing_.exec_retry_ms && ready_) return;
    exec_running_ = true;
    exec_started_ms_ = now;
    const ExecPlugin &x = creds_.exec;
    std::vector<std::string> argv{x.command};
    argv.insert(argv.end(), x.args.begin(), x.args.end());
    std::vector<std::string> env;
    for (const auto &[k, v] : x.env)
        env.push_back(k + "=" + v);
    Json::Value info;
    info["apiVersion"] = x.api_version;
    info["kind"] = "ExecCredential";
    info["spec"]["interactive"] = false;
    if (x.provide_cluster_info) {
        Json::Value &c = info["spec"]["cluster"];
        c["server"] = server_;
        if (!creds_.tls_server_name.empty()) c["tls-server-name"] = creds_.tls_server_name;
        if (!creds_.ca_data.empty())
            c["certificate-authority-data"] = base64_encode(creds_.ca_data);
        if (!creds_.proxy_url.empty()) c["proxy-url"] = creds_.proxy_url;
    }
    env.push_back("KUBERNETES_EXEC_INFO=" + json::write(info));
    LOG_VERBOSE("running the exec credential plugin %s (%s)", x.command.c_str(), why);
    std::weak_ptr<bool> alive = alive_;
    run_program_async(
        loop_, argv, env, timing_.exec_timeout_ms, [this, alive](const CommandResult &r) {
            auto a = alive.lock();
            if (!a || !*a) return;
            exec_running_ = false;
            std::string err;
            if (!r.ran)
                err = r.error;
            else if (r.exit_code != 0)
                err = "exit " + std::to_string(r.exit_code) +
                      (r.errors.empty() ? "" : ": " + std::string(trim(r.errors)));
            Result<ExecCredential> c =
                err.empty() ? parse_exec_credential(r.output, creds_.exec.api_version)
                            : Result<ExecCredential>(fail(Error::Io, err));
            if (!c) {
                std::string m =
                    "exec credential plugin " + creds_.exec.command + ": " + c.message();
                if (!ready_) {
                    start_error_ = m;
                    return;
                }
                set_refused(m + " (the credential it gave before stays in use)");
                return;
            }
            exec_expires_s_ = c->expires_s;
            bool differs = c->token != cur_.token || c->cert_pem != cur_.cert_pem ||
                           c->key_pem != cur_.key_pem;
            if (!c->cert_pem.empty()) {
                cur_.cert_pem = c->cert_pem;
                cur_.key_pem = c->key_pem;
                cur_.cert_file.clear();
                cur_.key_file.clear();
            }
            if (!c->token.empty() || c->cert_pem.empty()) cur_.token = c->token;
            if (differs || !ready_) {
                if (ready_)
                    LOG_INFO("exec credential plugin %s: a new credential",
                             creds_.exec.command.c_str());
                changed();
            }
            ready_ = true;
        });
}

Json::Value ApiAuth::status() const {
    Json::Value s(Json::objectValue);
    s["state"] = state_ == State::Ok ? "ok" : state_ == State::Refused ? "refused" : "unknown";
    s["source"] = describe_source(creds_);
    if (since_s_) s["since"] = when(since_s_);
    if (!message_.empty()) s["message"] = message_;
    if (expires_s_) s["expires"] = when(expires_s_);
    return s;
}

Result<ExecCredential> parse_exec_credential(const std::string &text,
                                             const std::string &api_version) {
    auto v = json::parse(text);
    if (!v || !v->isObject())
        return fail(Error::Parse, "its output is not an ExecCredential (JSON)");
    // The plugin's output is any JSON: a field of another type reads as ""
    // (asString() would throw on an object or an array).
    auto field = [](const Json::Value &o, const char *key) {
        const Json::Value &f = o[key];
        return f.isString() ? f.asString() : std::string();
    };
    if (field(*v, "kind") != "ExecCredential")
        return fail(Error::Parse,
                    "its output has kind '" + field(*v, "kind") + "', not ExecCredential");
    if (field(*v, "apiVersion") != api_version)
        return fail(Error::Parse, "its output has apiVersion '" + field(*v, "apiVersion") +
                                      "', the kubeconfig asks for " + api_version);
    const Json::Value &st = (*v)["status"];
    if (!st.isObject()) return fail(Error::Parse, "its output has no status");
    ExecCredential c;
    c.token = field(st, "token");
    c.cert_pem = field(st, "clientCertificateData");
    c.key_pem = field(st, "clientKeyData");
    if (c.token.empty() && c.cert_pem.empty())
        return fail(Error::Parse, "its status has neither token nor clientCertificateData");
    if (c.cert_pem.empty() != c.key_pem.empty())
        return fail(Error::Parse, "clientCertificateData and clientKeyData go together");
    if (st["expirationTimestamp"].isString()) {
        int64_t t = parse_rfc3339(st["expirationTimestamp"].asString());
        if (t < 0)
            return fail(Error::Parse, "expirationTimestamp '" +
                                          st["expirationTimestamp"].asString() +
                                          "' is not an RFC 3339 time");
        c.expires_s = t;
    }
    return c;
}

}  // namespace sk::agent
