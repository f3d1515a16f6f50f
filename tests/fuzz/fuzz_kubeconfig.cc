// The agent's kubeconfig (agent/kube/kubeconfig.h): YAML (libyaml) an admin
// writes and root reads at start, and the ExecCredential an exec plugin
// prints (agent/kube/api_auth.h), which the agent reads while it runs.
// Input: 1 selector byte (even: kubeconfig, odd: ExecCredential), the rest
// the text. Properties: no crash, no hang on deep nesting or aliases; a
// refusal says what it refuses ("kubeconfig: ..."); an accepted kubeconfig
// has a server and a credential, and a relative path made absolute; an
// accepted ExecCredential has a token or a certificate with its key.
#include <string>

#include "agent/kube/api_auth.h"
#include "agent/kube/kubeconfig.h"
#include "tests/fuzz/fuzz_target.h"

SK_FUZZ_TARGET(kubeconfig) {
    if (size < 1) return 0;
    std::string text(reinterpret_cast<const char *>(data) + 1, size - 1);
    if (data[0] % 2 == 0) {
        auto a = sk::agent::parse_kubeconfig(text, "/etc/slurm-k8s");
        if (!a) {
            FUZZ_CHECK(a.message().rfind("kubeconfig: ", 0) == 0);
            return 0;
        }
        FUZZ_CHECK(!a->server.empty());
        FUZZ_CHECK(a->has_credential());
        for (const std::string *p : {&a->ca_file, &a->token_file, &a->client_cert, &a->client_key})
            FUZZ_CHECK(p->empty() || (*p)[0] == '/');
        FUZZ_CHECK(a->exec.command.find('/') == std::string::npos || a->exec.command[0] == '/');
    } else {
        auto c = sk::agent::parse_exec_credential(text, "client.authentication.k8s.io/v1");
        if (!c) return 0;
        FUZZ_CHECK(!c->token.empty() || !c->cert_pem.empty());
        FUZZ_CHECK(c->cert_pem.empty() == c->key_pem.empty());
    }
    return 0;
}
