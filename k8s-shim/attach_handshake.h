// The start of an exec or attach session's data connection (docs/protocol.md,
// "exec_attach"): the shim connects to the agent socket, sends one
// exec_attach line naming the session, and the agent answers one reply line
// (at most kMaxReplyBytes) before the session's frames follow. Pure: a
// session feeds it what it reads until the reply is complete.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/result.h"

namespace sk::shim {

class AttachHandshake {
  public:
    static constexpr size_t kMaxReplyBytes = 64 << 10;

    explicit AttachHandshake(std::string session) : session_(std::move(session)) {}

    // The exec_attach request to send first (a whole line).
    std::string request() const;

    enum class State { Pending, Accepted, Refused };
    struct Step {
        State state = State::Pending;
        Status why;             // Refused: the agent's error, or why its reply is not one
        std::string_view rest;  // Accepted: the bytes after the reply line (frames)
    };
    // Bytes read before the reply was complete; not called again once the
    // answer is Accepted or Refused.
    Step feed(std::string_view bytes);
    // The link closed before a reply: the session's start failure.
    Status closed_early(const char *what) const;

  private:
    std::string session_;
    std::string line_;  // the reply, until its '\n'
};

}  // namespace sk::shim
