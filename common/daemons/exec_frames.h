// The frames of an exec session's data connection (docs/protocol.md, "exec
// session data connection"): after exec_attach is answered, both directions
// carry
//
//   [1 byte channel][4 bytes payload length, big-endian][payload]
//
// with the channel numbers of the kubelet's WebSocket v5.channel.k8s.io
// protocol, so that the agent's relay maps one onto the other:
//
//   agent -> shim: Stdin (bytes), Resize ({"Width":W,"Height":H}, as the
//                  kubelet's resize stream), Close (one byte: the channel
//                  closed, only Stdin: end of input)
//   shim -> agent: Stdout, Stderr (bytes), Exit (JSON, the last frame:
//                  {"exit_code": N} or {"error": "why it did not run"})
//
// A frame on a channel its direction does not carry, or a payload over
// kMaxExecFramePayload, is a protocol error: the receiver closes the
// connection (which ends the session and kills its command).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk::proto {

enum class ExecChannel : uint8_t {
    Stdin = 0,
    Stdout = 1,
    Stderr = 2,
    Exit = 3,
    Resize = 4,
    Close = 255,
};

constexpr size_t kExecFrameHeader = 5;
constexpr size_t kMaxExecFramePayload = 64 << 10;

// Which side a decoder reads: the shim reads what the agent sends, and back.
enum class ExecDirection { ToShim, ToAgent };

struct ExecFrame {
    ExecChannel channel = ExecChannel::Stdin;
    std::string payload;
};

// One frame; payload.size() <= kMaxExecFramePayload (the caller splits).
std::string encode_exec_frame(ExecChannel channel, std::string_view payload);

// Incremental: feed() any split of the byte stream; complete frames are
// appended to *out. After a failure (Parse, naming what was wrong) the
// decoder stays failed.
class ExecFrameDecoder {
  public:
    explicit ExecFrameDecoder(ExecDirection dir) : dir_(dir) {}
    Status feed(std::string_view data, std::vector<ExecFrame> *out);

  private:
    ExecDirection dir_;
    std::string buf_;
    std::string failed_;
};

// The Exit frame's payload, each way.
std::string exit_payload(int exit_code);
std::string exit_error_payload(const std::string &why);

// A Resize payload: {"Width": 0..65535, "Height": 0..65535} (more members
// are ignored, as the kubelet does); Parse otherwise.
struct TerminalSize {
    uint16_t width = 0, height = 0;
};
Result<TerminalSize> resize_from_payload(std::string_view payload);

}  // namespace sk::proto
