// Where the agent's credential for the API server comes from: agent.conf's
// api_* keys or a kubeconfig (agent/kube/kubeconfig.h), kept current by
// agent/kube/api_auth.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sk::agent {

// A kubeconfig user's `exec` credential plugin (client.authentication.k8s.io).
struct ExecPlugin {
    std::string api_version;  // client.authentication.k8s.io/v1 or v1beta1
    std::string command;      // a relative path with a '/' is made absolute (the kubeconfig's dir)
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::string>> env;
    bool provide_cluster_info = false;
};

// Where the agent's credential comes from (agent/kube/api_auth.h keeps it
// current). A token file wins over an inline token (client-go's rule); a
// client certificate goes with either.
struct ApiCredentials {
    std::string server;           // https://host:port (http:// only for tests)
    std::string ca_file;          // PEM bundle that signs the API server's certificate
    std::string ca_data;          // or the PEM itself (kubeconfig certificate-authority-data)
    std::string tls_server_name;  // the name checked in the server's certificate; "" = the URL's
    std::string proxy_url;        // http(s):// or socks5:// proxy to the server; "" = none
    std::string token_file;       // bearer token, re-read when it changes and after a 401
    std::string token;            // inline (kubeconfig `token`)
    std::string client_cert;      // or a client certificate + key, files
    std::string client_key;
    std::string client_cert_data, client_key_data;  // or inline PEM
    ExecPlugin exec;                                // command "" = none
    std::string context;  // the kubeconfig context used ("" = not from a kubeconfig)

    bool has_credential() const {
        return !token_file.empty() || !token.empty() || !client_cert.empty() ||
               !client_cert_data.empty() || !exec.command.empty();
    }
};

}  // namespace sk::agent
