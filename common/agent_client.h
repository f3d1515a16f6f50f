// A blocking client for the agent socket (protocol.h): one request, one reply,
// over a fresh connection, bounded by one total timeout (connect + write +
// read together). Used by the SPANK plugin (prolog/epilog/extern step, where
// nothing may hang past the admin's bound) and by the admin CLI.
//
// Errors: a missing socket or a refused connection is Error::Unavailable (the
// agent is not running); a bound that ran out is Error::Timeout; a reply with
// ok=false comes back as its own error code and message.
#pragma once

#include <string>

#include <json/json.h>

#include "common/protocol.h"
#include "common/result.h"

namespace sk {

class AgentClient {
  public:
    // No I/O here; every call() opens its own connection.
    AgentClient(std::string socket_path, int timeout_ms)
        : path_(std::move(socket_path)), timeout_ms_(timeout_ms) {}

    // Sends {op, body}; returns the reply body when the agent answered ok.
    Result<Json::Value> call(const std::string &op, const Json::Value &body);
    // Same with an explicit bound for this call (deregister waits for pods).
    Result<Json::Value> call(const std::string &op, const Json::Value &body, int timeout_ms);

    const std::string &socket_path() const { return path_; }

  private:
    std::string path_;
    int timeout_ms_;
    uint64_t next_id_ = 1;
};

}  // namespace sk
