// One error vocabulary for the whole project. Every fallible function returns
// Result<T> (result.h) carrying one of these codes plus a human message.
//
// How each layer uses them (error policy by phase):
//  - startup (config, sockets, credentials): fail fast, print the message;
//  - runtime API calls: NotFound/Conflict/Gone are decisions (recreate, re-read,
//    relist); Transient is retried with capped back-off; the rest is logged;
//  - shutdown: best effort, logged, never fatal.
#pragma once

#include <string_view>

namespace sk {

enum class Error {
    InvalidArgument,  // caller passed a value that can never be valid (bad flag, bad key)
    Parse,            // malformed text: JSON, config line, protocol message
    TooLarge,         // input over a configured bound (message size, list length)
    Io,               // a system call failed (errno in the message)
    Timeout,          // a bounded wait ran out
    NotFound,         // object or file does not exist (HTTP 404)
    AlreadyExists,    // create of an existing object (HTTP 409 AlreadyExists)
    Conflict,         // stale resourceVersion or failed precondition (HTTP 409)
    Gone,             // watch resourceVersion too old (HTTP 410): relist
    Unauthorized,     // bad or missing credentials (HTTP 401)
    Forbidden,        // authenticated but not allowed (HTTP 403, peer not permitted)
    Invalid,          // the server rejected the object's content (HTTP 400/422)
    Transient,        // try again later: connection refused, HTTP 429/5xx
    Refused,          // a policy refused the request (pod isolation, namespace)
    Unavailable,      // a peer we depend on is absent (agent socket missing)
    Internal,         // a bug: an invariant did not hold
};

// Stable lowercase name, used in logs and on the agent socket ("not_found").
std::string_view to_string(Error e) noexcept;
// Inverse of to_string; false when the name is unknown.
bool error_from_string(std::string_view name, Error *out) noexcept;

}  // namespace sk
