// agent/kube/api_auth: the agent's credential kept current on a real loop with
// real files and a real exec credential plugin (a shell script): a token
// file re-read when it changes (also through a projected volume's ..data
// link swap) and after a 401, the refused state and its words, a JWT's
// expiry, an exec plugin's ExecCredential, its environment, its failures.
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "agent/kube/api_auth.h"
#include "common/daemons/base64.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

namespace {

std::string tmpdir() {
    return sk_test_tmpdir("/tmp/sk-auth-XXXXXX");
}

// Written beside and renamed over, as kubelet and `kubectl create token > f.new && mv` do.
void write_atomic(const std::string &path, const std::string &text, mode_t mode = 0600) {
    std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp);
        f << text;
    }
    chmod(tmp.c_str(), mode);
    ck_assert_int_eq(rename(tmp.c_str(), path.c_str()), 0);
}

std::string slurp(const std::string &path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string b64url(const std::string &raw) {
    std::string s = base64_encode(raw);
    for (auto &ch : s) {
        if (ch == '+') ch = '-';
        if (ch == '/') ch = '_';
    }
    while (!s.empty() && s.back() == '=')
        s.pop_back();
    return s;
}

std::string jwt(int64_t exp) {
    return b64url(R"({"alg":"RS256","kid":"k"})") + "." +
           b64url(R"({"aud":["x"],"exp":)" + std::to_string(exp) +
                  R"(,"sub":"system:serviceaccount:kube-system:slurm-k8s-agent"})") +
           ".c2ln";
}

ApiAuth::Timing fast() {
    ApiAuth::Timing t;
    t.token_check_ms = 0;
    t.exec_retry_ms = 0;
    t.exec_timeout_ms = 5000;
    return t;
}

void run_until(uv_loop_t *loop, const std::function<bool()> &done) {
    for (int i = 0; i < 20000 && !done(); i++)
        uv_run(loop, UV_RUN_ONCE);
    ck_assert(done());
}

}  // namespace

START_TEST(token_file_reread_when_it_changes) {
    std::string d = tmpdir();
    write_atomic(d + "/token", "first\n");
    uv_loop_t loop;
    uv_loop_init(&loop);
    ApiCredentials c;
    c.token_file = d + "/token";
    int reloads = 0;
    {
        ApiAuth a(&loop, c, "https://api", fast());
        a.set_observer({[&reloads] { reloads++; }, nullptr, nullptr});
        ck_assert(a.start().ok());
        ck_assert(a.ready());
        ck_assert_sstr_eq(a.current().token, "first");  // trimmed
        uint64_t g1 = a.current().generation;
        write_atomic(d + "/token", "second");
        ck_assert_sstr_eq(a.current().token, "second");
        ck_assert(a.current().generation != g1);
        ck_assert_int_eq(reloads, 1);
        // A projected volume: token -> ..data/token, ..data -> a dated dir, swapped.
        mkdir((d + "/v1").c_str(), 0700);
        mkdir((d + "/v2").c_str(), 0700);
        write_atomic(d + "/v1/token", "third");
        write_atomic(d + "/v2/token", "fourth");
        ck_assert_int_eq(symlink("v1", (d + "/..data").c_str()), 0);
        unlink((d + "/token").c_str());
        ck_assert_int_eq(symlink("..data/token", (d + "/token").c_str()), 0);
        ck_assert_sstr_eq(a.current().token, "third");
        ck_assert_int_eq(symlink("v2", (d + "/..data_tmp").c_str()), 0);
        ck_assert_int_eq(rename((d + "/..data_tmp").c_str(), (d + "/..data").c_str()), 0);
        ck_assert_sstr_eq(a.current().token, "fourth");
        ck_assert_int_eq(reloads, 3);
        // A file that cannot be read keeps the token read before.
        unlink((d + "/token").c_str());
        ck_assert_sstr_eq(a.current().token, "fourth");
        write_atomic(d + "/token", "");
        ck_assert_sstr_eq(a.current().token, "fourth");
    }
    uv_loop_close(&loop);
}
END_TEST

START_TEST(a_401_rereads_the_file_and_says_what_to_do) {
    std::string d = tmpdir();
    write_atomic(d + "/token", "old");
    uv_loop_t loop;
    uv_loop_init(&loop);
    ApiCredentials c;
    c.token_file = d + "/token";
    ApiAuth::Timing slow = fast();
    slow.token_check_ms = 3600000;  // only the 401 makes it look (an hour)
    std::vector<bool> states;
    {
        ApiAuth a(&loop, c, "https://api", slow);
        a.set_observer({nullptr, [&states](bool ok) { states.push_back(ok); }, nullptr});
        ck_assert(a.start().ok());
        ck_assert_sstr_eq(a.status()["state"].asString(), "unknown");
        a.accepted();
        ck_assert_sstr_eq(a.status()["state"].asString(), "ok");
        uint64_t g = a.current().generation;
        write_atomic(d + "/token", "new");
        ck_assert_sstr_eq(a.current().token, "old");  // not looked at yet
        ck_assert(a.unauthorized(g));                 // re-read: send again
        ck_assert_sstr_eq(a.current().token, "new");
        ck_assert_sstr_eq(a.status()["state"].asString(), "ok");
        // The same file refused again: nothing new to send; refused, with the remedy.
        ck_assert(!a.unauthorized(a.current().generation));
        Json::Value s = a.status();
        ck_assert_sstr_eq(s["state"].asString(), "refused");
        ck_assert_msg(
            s["message"].asString() == "401 Unauthorized with the credential from token file " + d +
                                           "/token; write a valid token to " + d +
                                           "/token (it is read again when it changes)",
            "%s", s["message"].asString().c_str());
        ck_assert(s["since"].isString());
        a.accepted();
        ck_assert_sstr_eq(a.status()["state"].asString(), "ok");
        ck_assert_int_eq(states.size(), 3);
        ck_assert(states[0] && !states[1] && states[2]);
    }
    uv_loop_close(&loop);
}
END_TEST

START_TEST(jwt_expiry_is_reported) {
    ck_assert_int_eq(ApiAuth::jwt_expiry(jwt(1800000000)), 1800000000);
    ck_assert_int_eq(ApiAuth::jwt_expiry("opaque-token"), 0);
    ck_assert_int_eq(ApiAuth::jwt_expiry("a.!!!.c"), 0);
    std::string d = tmpdir();
    write_atomic(d + "/token", jwt(1000000000));
    uv_loop_t loop;
    uv_loop_init(&loop);
    ApiCredentials c;
    c.token_file = d + "/token";
    int64_t seen = -1;
    {
        ApiAuth a(&loop, c, "https://api", fast());
        a.set_observer({nullptr, nullptr, [&seen](int64_t s) { seen = s; }});
        ck_assert(a.start().ok());
        ck_assert_int_eq(seen, 1000000000);
        ck_assert_sstr_eq(a.status()["expires"].asString(), "2001-09-09T01:46:40Z");
        // Refused after its expiry: the message says it expired.
        ck_assert(!a.unauthorized(a.current().generation));
        ck_assert_msg(a.status()["message"].asString().find(
                          ", which expired at 2001-09-09T01:46:40Z;") != std::string::npos,
                      "%s", a.status()["message"].asString().c_str());
    }
    uv_loop_close(&loop);
}
END_TEST

START_TEST(start_refuses_a_bad_token_file) {
    std::string d = tmpdir();
    uv_loop_t loop;
    uv_loop_init(&loop);
    ApiCredentials c;
    c.token_file = d + "/missing";
    {
        ApiAuth a(&loop, c, "https://api", fast());
        auto st = a.start();
        ck_assert(!st.ok());
        ck_assert_msg(st.message().find("api_token_file " + d + "/missing") == 0, "%s",
                      st.message().c_str());
    }
    write_atomic(d + "/empty", "  \n");
    c.token_file = d + "/empty";
    {
        ApiAuth a(&loop, c, "https://api", fast());
        auto st = a.start();
        ck_assert(!st.ok());
        ck_assert(st.message().find("empty") != std::string::npos);
    }
    mkfifo((d + "/fifo").c_str(), 0600);
    c.token_file = d + "/fifo";
    {
        ApiAuth a(&loop, c, "https://api", fast());
        auto st = a.start();  // must not block on the FIFO
        ck_assert(!st.ok());
        ck_assert(st.message().find("not a regular file") != std::string::npos);
    }
    uv_loop_close(&loop);
}
END_TEST

// A plugin that prints token-N (N counts its runs), records its environment,
// and fails when d/fail exists.
std::string write_plugin(const std::string &d, const std::string &expiry) {
    std::string p = d + "/plugin.sh";
    std::ofstream f(p);
    f << "#!/bin/sh\n"
         "d="
      << d
      << "\n"
         "n=$(cat $d/count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > $d/count\n"
         "printf '%s' \"$KUBERNETES_EXEC_INFO\" > $d/info\n"
         "printf '%s %s' \"$REGION\" \"$1\" > $d/env\n"
         "if [ -e $d/fail ]; then echo boom >&2; exit 3; fi\n"
         "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
         "\"status\":{\"token\":\"token-%s\""
      << expiry << "}}' $n\n";
    f.close();
    chmod(p.c_str(), 0700);
    return p;
}

START_TEST(exec_plugin_gives_the_token) {
    std::string d = tmpdir();
    uv_loop_t loop;
    uv_loop_init(&loop);
    ApiCredentials c;
    c.exec.api_version = "client.authentication.k8s.io/v1";
    c.exec.command = write_plugin(d, "");
    c.exec.args = {"--cluster=prod"};
    c.exec.env = {{"REGION", "eu-1"}};
    c.exec.provide_cluster_info = true;
    c.ca_data = "PEM";
    {
        ApiAuth a(&loop, c, "https://api.example:6443", fast());
        ck_assert(a.start().ok());
        run_until(&loop, [&a] { return a.ready() || !a.start_error().empty(); });
        ck_assert_msg(a.ready(), "%s", a.start_error().c_str());
        ck_assert_sstr_eq(a.current().token, "token-1");
        ck_assert_sstr_eq(slurp(d + "/env").c_str(), "eu-1 --cluster=prod");
        auto info = json::parse(slurp(d + "/info"));
        ck_assert(info.ok());
        ck_assert_sstr_eq((*info)["kind"].asString(), "ExecCredential");
        ck_assert_sstr_eq((*info)["apiVersion"].asString(), "client.authentication.k8s.io/v1");
        ck_assert((*info)["spec"]["interactive"].asBool() == false);
        ck_assert_sstr_eq((*info)["spec"]["cluster"]["server"].asString(),
                          "https://api.example:6443");
        ck_assert_sstr_eq((*info)["spec"]["cluster"]["certificate-authority-data"].asString(),
                          base64_encode("PEM"));
        // A 401: run again; the new token is there once it answered.
        uint64_t g = a.current().generation;
        ck_assert(!a.unauthorized(g));
        run_until(&loop, [&a, g] { return a.current().generation != g; });
        ck_assert_sstr_eq(a.current().token, "token-2");
        // A plugin that fails keeps the token it gave before, and is refused with its words.
        write_atomic(d + "/fail", "");
        g = a.current().generation;
        ck_assert(!a.unauthorized(g));
        run_until(&loop, [&d] { return slurp(d + "/count") == "3\n"; });
        run_until(&loop, [&a] {
            return a.status()["message"].asString().find("exit 3: boom") != std::string::npos;
        });
        ck_assert_sstr_eq(a.current().token, "token-2");
        ck_assert_sstr_eq(a.status()["state"].asString(), "refused");
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}
END_TEST

START_TEST(exec_plugin_runs_again_before_its_expiry) {
    std::string d = tmpdir();
    uv_loop_t loop;
    uv_loop_init(&loop);
    ApiCredentials c;
    c.exec.api_version = "client.authentication.k8s.io/v1";
    // Expires within the refresh margin: the next request's current() runs it again.
    time_t soon = time(nullptr) + 30;
    char ts[32];
    struct tm tm_soon {};
    gmtime_r(&soon, &tm_soon);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm_soon);
    c.exec.command = write_plugin(d, std::string(",\"expirationTimestamp\":\"") + ts + "\"");
    {
        ApiAuth a(&loop, c, "https://api", fast());
        ck_assert(a.start().ok());
        run_until(&loop, [&a] { return a.ready(); });
        ck_assert_sstr_eq(a.current().token, "token-1");
        ck_assert_sstr_eq(a.status()["expires"].asString(), ts);
        run_until(&loop, [&a] { return a.current().token == "token-2"; });
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}
END_TEST

START_TEST(exec_plugin_failure_at_start) {
    std::string d = tmpdir();
    uv_loop_t loop;
    uv_loop_init(&loop);
    ApiCredentials c;
    c.exec.api_version = "client.authentication.k8s.io/v1";
    c.exec.command = write_plugin(d, "");
    write_atomic(d + "/fail", "");
    {
        ApiAuth a(&loop, c, "https://api", fast());
        ck_assert(a.start().ok());
        run_until(&loop, [&a] { return !a.start_error().empty(); });
        ck_assert(!a.ready());
        ck_assert_msg(
            a.start_error() == "exec credential plugin " + c.exec.command + ": exit 3: boom", "%s",
            a.start_error().c_str());
    }
    c.exec.command = d + "/no-such-plugin";
    {
        ApiAuth a(&loop, c, "https://api", fast());
        ck_assert(a.start().ok());
        run_until(&loop, [&a] { return !a.start_error().empty(); });
        ck_assert_msg(
            a.start_error().find("cannot run " + d + "/no-such-plugin") != std::string::npos, "%s",
            a.start_error().c_str());
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}
END_TEST

START_TEST(exec_credential_shapes) {
    const std::string v1 = "client.authentication.k8s.io/v1";
    auto ok = parse_exec_credential(
        R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
            "status":{"clientCertificateData":"C","clientKeyData":"K",
                      "expirationTimestamp":"2026-12-02T16:00:00Z"}})",
        v1);
    ck_assert(ok.ok());
    ck_assert_sstr_eq(ok->cert_pem, "C");
    ck_assert_sstr_eq(ok->key_pem, "K");
    ck_assert_int_eq(ok->expires_s, 1796227200);
    struct {
        const char *text, *expect;
    } bad[] = {
        {"not json", "not an ExecCredential"},
        {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod","status":{}})",
         "kind 'Pod'"},
        {R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",
             "status":{"token":"t"}})",
         "the kubeconfig asks for client.authentication.k8s.io/v1"},
        {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"})",
         "no status"},
        {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
             "status":{}})",
         "neither token nor clientCertificateData"},
        {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
             "status":{"clientCertificateData":"C"}})",
         "go together"},
        {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
             "status":{"token":"t","expirationTimestamp":"tomorrow"}})",
         "'tomorrow' is not an RFC 3339 time"},
    };
    for (const auto &b : bad) {
        auto r = parse_exec_credential(b.text, v1);
        ck_assert_msg(!r.ok(), "accepted %s", b.text);
        ck_assert_msg(r.message().find(b.expect) != std::string::npos, "'%s' lacks '%s'",
                      r.message().c_str(), b.expect);
    }
}
END_TEST

int main() {
    Suite *s = suite_create("api_auth");
    TCase *tc = tcase_create("api_auth");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, token_file_reread_when_it_changes);
    tcase_add_test(tc, a_401_rereads_the_file_and_says_what_to_do);
    tcase_add_test(tc, jwt_expiry_is_reported);
    tcase_add_test(tc, start_refuses_a_bad_token_file);
    tcase_add_test(tc, exec_plugin_gives_the_token);
    tcase_add_test(tc, exec_plugin_runs_again_before_its_expiry);
    tcase_add_test(tc, exec_plugin_failure_at_start);
    tcase_add_test(tc, exec_credential_shapes);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
