// A kubeconfig as kubectl reads it (client-go's clientcmd), for the agent's
// own credential: YAML (or JSON, which is YAML), `current-context` or a
// chosen context, its cluster (server, certificate-authority or its -data,
// tls-server-name, proxy-url) and its user (token, tokenFile,
// client-certificate/-key or their -data, an exec credential plugin).
// Relative paths are relative to the kubeconfig's directory, as kubectl
// makes them. What the agent cannot honour is refused with the reason:
// insecure-skip-tls-verify (the agent always verifies the API server),
// auth-provider (gone from kubectl 1.26), basic auth, impersonation, an
// exec plugin that needs a terminal.
#pragma once

#include <string>
#include <string_view>

#include "agent/kube/credentials.h"
#include "common/result.h"

namespace sk::agent {

// Also fills ApiCredentials::proxy_url. context: "" = the file's current-context.
Result<ApiCredentials> parse_kubeconfig(std::string_view text, const std::string &dir,
                                        const std::string &context = "");

}  // namespace sk::agent
