// WebSocket (RFC 6455), the server's side, and the Kubernetes channel
// subprotocols on it (v4.channel.k8s.io, v5.channel.k8s.io): what a kubelet
// speaks when the API server passes a WebSocket exec, attach or port-forward
// through. Pure codec: the handshake's accept key,
// the client's masked frames decoded into messages, the server's unmasked
// frames, and the channel byte in front of each message. docs/protocol.md
// "Kubelet streaming protocols" gives the bounds.
//
// Every failure of the FrameDecoder ends the connection: its close_code()
// is the status to send in the Close frame before closing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk::ws {

// ---- handshake ----

// Sec-WebSocket-Accept for a request's Sec-WebSocket-Key: base64(SHA-1(key +
// the RFC 6455 GUID)). Invalid unless the key is the base64 of 16 bytes.
Result<std::string> accept_key(std::string_view sec_websocket_key);

// The subprotocol is chosen with remotecommand::choose_protocol
// (agent/kubelet/streams/remotecommand.h) from kProtocolV5 and kProtocolV4 below.

// ---- frames ----

enum class Opcode : uint8_t {
    Continuation = 0x0,
    Text = 0x1,
    Binary = 0x2,
    Close = 0x8,
    Ping = 0x9,
    Pong = 0xa,
};

// Close status codes used here (RFC 6455 section 7.4.1).
constexpr uint16_t kCloseNormal = 1000;
constexpr uint16_t kCloseGoingAway = 1001;
constexpr uint16_t kCloseProtocolError = 1002;
constexpr uint16_t kCloseNoStatus = 1005;  // never sent: a Close without a code
constexpr uint16_t kCloseInvalidData = 1007;
constexpr uint16_t kClosePolicy = 1008;
constexpr uint16_t kCloseTooBig = 1009;
constexpr uint16_t kCloseInternalError = 1011;

constexpr size_t kMaxControlPayload = 125;

// One message from the client: a whole (reassembled) Text or Binary message,
// or a Ping, Pong or Close.
struct Message {
    Opcode opcode = Opcode::Binary;
    std::string payload;  // Close: the reason (UTF-8)
    uint16_t close_code = kCloseNoStatus;
};

struct Limits {
    size_t max_frame_payload = 1 << 20;  // one frame
    size_t max_message = 1 << 20;        // one message, its fragments together
};

// Incremental decoder of a client's frames, fed the connection's bytes in
// chunks of any size. Refuses what RFC 6455 makes a failure for a server:
// an unmasked frame, reserved bits (no extension is negotiated), unknown
// opcodes, a fragmented or over-125-byte control frame, a length not in its
// shortest form, a continuation outside a message or a new message inside
// one, Text or a Close reason that is not UTF-8, a Close with a 1-byte
// payload or an invalid code, any frame after a Close. Holds one frame
// (14 + max_frame_payload bytes at most) and one message being reassembled
// (max_message). After a failure every later feed fails the same way.
class FrameDecoder {
  public:
    explicit FrameDecoder(const Limits &limits = {}) : limits_(limits) {}

    // Appends the messages completed by `bytes` to *out. Failures: TooLarge
    // (a frame or message over its limit), Parse (everything else).
    Status feed(std::string_view bytes, std::vector<Message> *out);

    // After a failure: the Close status to send (1002, 1007 or 1009).
    uint16_t close_code() const { return close_code_; }
    // A Close was received: the connection is ending.
    bool closed() const { return closed_; }

  private:
    Status fail_with(uint16_t code, Failure f);
    Status frame_done(std::vector<Message> *out);

    Limits limits_;
    std::string buf_;        // the frame being read: header, then payload
    size_t header_len_ = 0;  // 0 until the first two bytes are in
    uint64_t payload_len_ = 0;
    bool in_message_ = false;  // a fragmented message is open
    Opcode message_op_ = Opcode::Binary;
    std::string message_;
    bool closed_ = false;
    uint16_t close_code_ = 0;
    std::optional<Failure> failed_;
};

// A server frame (unmasked). Control frames (Close, Ping, Pong) must be
// final and at most 125 bytes: the caller's contract (asserted).
std::string encode_frame(Opcode opcode, std::string_view payload, bool fin = true);
// A Close frame with a status code and a reason, cut to fit 125 bytes at a
// UTF-8 character boundary.
std::string encode_close(uint16_t code, std::string_view reason);

// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, at most
// U+10FFFF).
bool valid_utf8(std::string_view s);

// ---- the channel subprotocols ----

constexpr std::string_view kProtocolV4 = "v4.channel.k8s.io";
constexpr std::string_view kProtocolV5 = "v5.channel.k8s.io";

enum class ChannelProtocol { V4, V5 };
std::optional<ChannelProtocol> channel_protocol(std::string_view subprotocol);

// The channels of exec and attach. Port-forward uses channel 2i for the data
// and 2i+1 for the errors of the i-th `port` of the request; the server's
// first message on each starts with the port (2 bytes, little endian).
constexpr uint8_t kChannelStdin = 0;
constexpr uint8_t kChannelStdout = 1;
constexpr uint8_t kChannelStderr = 2;
constexpr uint8_t kChannelError = 3;
constexpr uint8_t kChannelResize = 4;
constexpr uint8_t kChannelClose = 255;  // v5: "the peer closed this stream"
constexpr unsigned kExecChannels = 5;

// A Binary message's meaning: data for a channel, the close of a channel
// (v5: [255, channel]), or nothing (an empty message, which the kubelet
// skips).
struct ChannelMessage {
    enum class Kind { Data, CloseStream, Empty };
    Kind kind = Kind::Empty;
    uint8_t channel = 0;
    std::string_view data;  // into the payload
};

// Parses a message on a connection with `channels` channels (0 .. channels-1).
// Invalid: a channel out of range, 255 under v4, a v5 close that is not
// exactly one valid channel.
Result<ChannelMessage> parse_channel_message(ChannelProtocol protocol, std::string_view payload,
                                             unsigned channels);

// The Binary frame carrying `data` on `channel`.
std::string encode_channel_data(uint8_t channel, std::string_view data);
// v5: the Binary frame saying this side closed `channel`.
std::string encode_channel_close(uint8_t channel);

}  // namespace sk::ws
