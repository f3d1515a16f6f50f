// SPDY/3.1 framing as a kubelet speaks it to the API server for exec, attach
// and port-forward (the API server and kubectl use Go's moby/spdystream): the
// eight control frames and DATA frames, and the name/value header blocks
// compressed with zlib and the SPDY/3 dictionary, one zlib stream per
// direction per connection. Pure codec: no sockets, no stream state machine
// (which stream ids are open, flow control windows and replies are the
// caller's). docs/protocol.md "Kubelet streaming protocols" gives the layouts
// and the bounds.
//
// Every failure of the Decoder is a session error: the peer's frames can no
// longer be read (the zlib stream is shared by all header blocks), so the
// connection is closed (after a GOAWAY with kGoAwayProtocolError).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk::spdy {

constexpr uint16_t kVersion = 3;  // SPDY/3.1 keeps version 3 on the wire

enum class FrameType : uint16_t {
    Data = 0,  // not a control type: the frame's first bit is 0
    SynStream = 1,
    SynReply = 2,
    RstStream = 3,
    Settings = 4,
    Ping = 6,
    GoAway = 7,
    Headers = 8,
    WindowUpdate = 9,
};

// Flags. FIN on SYN_STREAM, SYN_REPLY, HEADERS and DATA; UNIDIRECTIONAL on
// SYN_STREAM; CLEAR_SETTINGS on SETTINGS.
constexpr uint8_t kFlagFin = 0x01;
constexpr uint8_t kFlagUnidirectional = 0x02;
constexpr uint8_t kFlagClearSettings = 0x01;

// RST_STREAM status codes (0 is not one).
enum RstStatus : uint32_t {
    kRstProtocolError = 1,
    kRstInvalidStream = 2,
    kRstRefusedStream = 3,
    kRstUnsupportedVersion = 4,
    kRstCancel = 5,
    kRstInternalError = 6,
    kRstFlowControlError = 7,
    kRstStreamInUse = 8,
    kRstStreamAlreadyClosed = 9,
    kRstInvalidCredentials = 10,
    kRstFrameTooLarge = 11,
};

// GOAWAY status codes.
enum GoAwayStatus : uint32_t {
    kGoAwayOk = 0,
    kGoAwayProtocolError = 1,
    kGoAwayInternalError = 2,
};

constexpr uint32_t kMaxStreamId = 0x7fffffff;  // 31 bits
constexpr size_t kMaxLength = 0xffffff;        // the 24-bit length field

// The 1423-byte SPDY/3 header compression dictionary (the SPDY/3 draft,
// section 2.6.10.1).
std::string_view header_dictionary();

// One name/value pair of a header block. Names are lower case; a value holds
// several values separated by NUL bytes (the wire form, kept as is).
struct Header {
    std::string name;
    std::string value;
};
using HeaderBlock = std::vector<Header>;

// The value of `name`, or nullptr.
const std::string *find_header(const HeaderBlock &headers, std::string_view name);

struct Setting {
    uint8_t flags = 0;
    uint32_t id = 0;  // 24 bits
    uint32_t value = 0;
};

// One decoded frame; which fields are meaningful depends on `type`.
struct Frame {
    FrameType type = FrameType::Data;
    uint8_t flags = 0;
    // SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS, WINDOW_UPDATE (0: the
    // session's window, SPDY/3.1), DATA; GOAWAY: the last good stream id.
    uint32_t stream_id = 0;
    uint32_t associated_id = 0;  // SYN_STREAM
    uint8_t priority = 0;        // SYN_STREAM: 0 (highest) .. 7
    uint8_t slot = 0;            // SYN_STREAM
    uint32_t status = 0;         // RST_STREAM (RstStatus), GOAWAY (GoAwayStatus)
    uint32_t ping_id = 0;        // PING
    uint32_t delta_window = 0;   // WINDOW_UPDATE: 1 .. 2^31-1
    HeaderBlock headers;         // SYN_STREAM, SYN_REPLY, HEADERS
    std::vector<Setting> settings;
    std::string data;  // DATA payload

    bool fin() const { return (flags & kFlagFin) != 0; }
};

// The frames a kubelet sends.
Frame syn_reply(uint32_t stream_id, HeaderBlock headers = {}, bool fin = false);
Frame data_frame(uint32_t stream_id, std::string data, bool fin = false);
Frame rst_stream(uint32_t stream_id, uint32_t status);
Frame ping(uint32_t id);
Frame goaway(uint32_t last_good_stream_id, uint32_t status);
Frame window_update(uint32_t stream_id, uint32_t delta);

struct Limits {
    // Payload (the bytes after the 8-byte header) of a DATA frame and of a
    // control frame. The spec's floor for control frames is 8192.
    size_t max_data_payload = 1 << 20;
    size_t max_control_payload = 64 << 10;
    // A header block once decompressed, and its number of pairs.
    size_t max_header_block = 64 << 10;
    size_t max_headers = 64;
};

// Incremental decoder of the peer's frames: fed the connection's bytes in
// chunks of any size, it returns each frame once complete. It holds at most
// one partial frame (8 + the larger payload limit bytes); a frame announced
// larger than its limit fails before its payload is read. Control frames of
// unknown types are skipped (SPDY/3: "MUST ignore"). After a failure every
// later feed fails the same way.
class Decoder {
  public:
    explicit Decoder(const Limits &limits = {});
    ~Decoder();
    Decoder(const Decoder &) = delete;
    Decoder &operator=(const Decoder &) = delete;

    // Appends the frames completed by `bytes` to *out. Failures: TooLarge (a
    // frame, a header block or its pair count over a limit: the message
    // names it), Parse (anything malformed, a zlib error).
    Status feed(std::string_view bytes, std::vector<Frame> *out);

    // Bytes of a partial frame held now.
    size_t buffered() const { return buf_.size(); }

  private:
    Status decode(std::vector<Frame> *out);
    Status fail_with(Failure f);

    Limits limits_;
    std::string buf_;
    struct Inflater;
    std::unique_ptr<Inflater> inflater_;
    std::unique_ptr<Failure> failed_;
};

// Encoder of this side's frames, with this side's zlib stream. A frame that
// cannot be written (a stream id over 31 bits or 0 where one is needed, a
// DATA payload over kMaxLength, a field out of its range, an invalid or
// repeated header name, an invalid value, a header block over kMaxLength / 2
// before compression, so that it always fits once compressed) fails with
// InvalidArgument before the zlib stream sees it and appends nothing; the
// encoder stays usable. A zlib failure (out of memory) is Internal and
// sticky.
class Encoder {
  public:
    Encoder();
    ~Encoder();
    Encoder(const Encoder &) = delete;
    Encoder &operator=(const Encoder &) = delete;

    Status encode(const Frame &frame, std::string *out);

  private:
    struct Deflater;
    std::unique_ptr<Deflater> deflater_;
};

// Validity of a name/value pair as SPDY/3 requires it: a non-empty name of
// printable US-ASCII without upper case letters; a value empty or made of
// non-empty parts separated by single NUL bytes.
bool valid_header_name(std::string_view name);
bool valid_header_value(std::string_view value);

// The parts of a NUL-separated value ("" gives none).
std::vector<std::string_view> header_values(std::string_view value);

}  // namespace sk::spdy
