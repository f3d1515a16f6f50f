// Base64 (RFC 4648 section 4, the standard alphabet with '=' padding), as the
// Kubernetes API carries Secret data and as the pod_run body carries volume
// files (common/daemons/shim_protocol.h). Own code: GnuTLS has a codec but only the
// agent links it, and the shim needs the same one.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace sk {

std::string base64_encode(std::string_view raw);

// Strict: only the standard alphabet, a length that is a multiple of 4, at
// most two '=' and only at the end, and zero bits in the unused low bits of
// the last character, so that base64_encode(decode(s)) == s. Anything else
// (whitespace, the URL-safe alphabet, missing padding) fails with Invalid.
Result<std::string> base64_decode(std::string_view b64);

}  // namespace sk
