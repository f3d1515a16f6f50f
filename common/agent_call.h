// A blocking client for the agent socket (common/daemons/protocol.h): one request,
// one reply, over a fresh connection, bounded by one total timeout (connect +
// write + read together). Used by the SPANK plugin (prolog/epilog/extern
// step, where nothing may hang past the admin's bound; over json-c,
// common/plugin_wire.h) and by the admin CLI (over jsoncpp,
// common/daemons/agent_client.h).
//
// Errors: a missing socket or a refused connection is Error::Unavailable (the
// agent is not running); a bound that ran out is Error::Timeout; a reply with
// ok=false comes back as its own error code and message, prefixed "agent: ",
// and so does an error reply of id 0, the agent's word about the connection
// itself (refused: too many connections; closed idle; an unreadable request:
// common/daemons/protocol.h), which no request id can be mistaken for: ids start at 1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/result.h"
#include "common/wire_codec.h"

namespace sk {

// The admin socket beside an agent socket: "<dir>/admin/<name>" (a socket
// "/run/slurm-k8s/agent.sock" has "/run/slurm-k8s/admin/agent.sock"). The
// agent listens on both; the admin one is in a directory only the agent's
// user (root) may enter, so no other user's connections share its listen
// queue (docs/security.md, "Who can talk to the agent socket"). The plugin
// and the CLI run as root use it.
std::string admin_socket_for(const std::string &socket_path);

// Connects to `path`, sends `line` (one framed request) and returns the first
// line of the reply (without '\n', at most proto::kMaxMessageBytes), all
// within `timeout_ms`. When the agent closed before taking the request (it
// refused the connection), the reply it left is read all the same.
Result<std::string> agent_exchange(const std::string &path, const std::string &line,
                                   int timeout_ms);

// J: a JSON backend of common/wire_codec.h.
template <class J>
class BasicAgentClient {
  public:
    using Value = typename J::Value;

    // No I/O here; every call() opens its own connection.
    BasicAgentClient(std::string socket_path, int timeout_ms)
        : path_(std::move(socket_path)), timeout_ms_(timeout_ms) {}

    // Sends {op, body}; returns the reply body when the agent answered ok.
    Result<Value> call(const std::string &op, const Value &body) {
        return call(op, body, timeout_ms_);
    }
    // Same with an explicit bound for this call (deregister waits for pods).
    Result<Value> call(const std::string &op, const Value &body, int timeout_ms) {
        proto::BasicRequest<J> req;
        req.id = next_id_++;
        req.op = op;
        req.body = body;
        auto line = agent_exchange(path_, proto::Codec<J>::encode(req), timeout_ms);
        if (!line) return line.failure();
        return read_reply(*line, req.id);
    }

    // What one reply line says to the caller of request `expected_id` (> 0).
    static Result<Value> read_reply(std::string_view line, uint64_t expected_id) {
        auto reply = proto::Codec<J>::decode_reply(line);
        if (!reply) return fail(Error::Parse, "bad reply from agent: " + reply.message());
        if (reply->id == 0 && !reply->ok) return fail(reply->error, "agent: " + reply->message);
        if (reply->id != expected_id)
            return fail(Error::Parse, "agent replied to request " + std::to_string(reply->id) +
                                          ", expected " + std::to_string(expected_id));
        if (!reply->ok) return fail(reply->error, "agent: " + reply->message);
        return std::move(reply->body);
    }

    const std::string &socket_path() const { return path_; }

  private:
    std::string path_;
    int timeout_ms_;
    uint64_t next_id_ = 1;
};

}  // namespace sk
