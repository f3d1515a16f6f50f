// What the kubelet's streaming endpoints carry above the framing
// (agent/kubelet/streams/spdy.h, agent/kubelet/streams/ws_channel.h), as Kubernetes' remotecommand
// and portforward protocols define it: the protocol names a client offers, the SPDY stream headers,
// the metav1.Status written on the error stream when a command ends, and the terminal sizes read
// from the resize stream. docs/protocol.md "Kubelet streaming protocols".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk::remotecommand {

// Exec and attach over SPDY: X-Stream-Protocol-Version. v4 carries the exit
// code as a metav1.Status; v5 (WebSocket only, agent/kubelet/streams/ws_channel.h) adds
// the close of a single stream.
constexpr std::string_view kStreamProtocolV4 = "v4.channel.k8s.io";
// Port-forward over SPDY.
constexpr std::string_view kPortForwardProtocol = "portforward.k8s.io";

// SPDY stream headers (SYN_STREAM from the client).
constexpr std::string_view kHeaderStreamType = "streamtype";
constexpr std::string_view kHeaderPort = "port";            // port-forward
constexpr std::string_view kHeaderRequestId = "requestid";  // port-forward: pairs data + error
// streamtype values.
constexpr std::string_view kStreamError = "error";
constexpr std::string_view kStreamStdin = "stdin";
constexpr std::string_view kStreamStdout = "stdout";
constexpr std::string_view kStreamStderr = "stderr";
constexpr std::string_view kStreamResize = "resize";
constexpr std::string_view kStreamData = "data";  // port-forward

// The protocol to answer from a client's offer, as the kubelet negotiates it:
// the first name in the client's order (header lines, each possibly a
// comma-separated list) that `supported` holds; nullopt when none is (the
// kubelet refuses the upgrade then). Serves X-Stream-Protocol-Version and
// Sec-WebSocket-Protocol alike.
std::optional<std::string> choose_protocol(const std::vector<std::string_view> &offered,
                                           const std::vector<std::string_view> &supported);

// ---- the error stream: metav1.Status JSON, one document, no newline ----

// The command exited 0: {"metadata":{},"status":"Success"}.
std::string status_success();
// The command exited with `code` != 0: status Failure, reason
// NonZeroExitCode, details.causes [{"reason":"ExitCode","message":"<code>"}]
// (what kubectl turns into its own exit status), message "command
// terminated with non-zero exit code: exit status <code>".
std::string status_exit_code(int code);
// The command could not run or was lost: status Failure, code 500, reason
// InternalError, message "Internal error occurred: <message>",
// details.causes [{"message": <message>}] (kubectl prints the message).
std::string status_internal_error(std::string_view message);
// An HTTP error body before any upgrade (kind Status, apiVersion v1), e.g.
// (400, "BadRequest", ...): kubectl prints "Error from server (<reason>):
// <message>".
std::string status_http_error(int http_code, std::string_view reason, std::string_view message);

// ---- the resize stream ----

struct TerminalSize {
    uint16_t width = 0;
    uint16_t height = 0;
};

// One {"Width":W,"Height":H} document (field names matched without regard
// to case, as Go's decoder does; other fields ignored; both required,
// integers 0 .. 65535).
Result<TerminalSize> parse_terminal_size(std::string_view json);

// The resize stream's documents: client-go writes each followed by '\n'
// (on SPDY one stream of bytes, split anywhere; on WebSocket one per
// message, other clients without the '\n': end_message() completes one).
// A document longer than kMaxDocument fails with TooLarge; after a failure
// every later call fails the same way.
class ResizeDecoder {
  public:
    static constexpr size_t kMaxDocument = 1024;

    Status feed(std::string_view bytes, std::vector<TerminalSize> *out);
    // A WebSocket message ended: what is pending is a whole document.
    Status end_message(std::vector<TerminalSize> *out);

  private:
    Status take(std::vector<TerminalSize> *out);

    std::string pending_;
    std::optional<Failure> failed_;
};

}  // namespace sk::remotecommand
