#include "agent/kubelet/streams/ws_channel.h"

#include <gnutls/crypto.h>

#include <algorithm>
#include <cassert>

#include "common/daemons/base64.h"

namespace sk::ws {

namespace {

constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";  // RFC 6455 1.3

bool valid_close_code(uint16_t code) {
    if (code >= 3000 && code <= 4999) return true;
    return code >= 1000 && code <= 1014 && code != 1004 && code != 1005 && code != 1006;
}

Failure bad(const std::string &what) {
    return fail(Error::Parse, "websocket: " + what);
}

void append_header(std::string *out, uint8_t first, size_t len) {
    out->push_back(static_cast<char>(first));
    if (len < 126) {
        out->push_back(static_cast<char>(len));
    } else if (len <= 0xffff) {
        out->push_back(static_cast<char>(126));
        out->push_back(static_cast<char>(len >> 8));
        out->push_back(static_cast<char>(len));
    } else {
        out->push_back(static_cast<char>(127));
        for (int shift = 56; shift >= 0; shift -= 8)
            out->push_back(static_cast<char>(static_cast<uint64_t>(len) >> shift));
    }
}

}  // namespace

Result<std::string> accept_key(std::string_view key) {
    auto raw = base64_decode(key);
    if (!raw || raw->size() != 16)
        return fail(Error::Invalid, "websocket: Sec-WebSocket-Key is not the base64 of 16 bytes");
    std::string text(key);
    text += kGuid;
    unsigned char digest[20];
    if (gnutls_hash_fast(GNUTLS_DIG_SHA1, text.data(), text.size(), digest) != 0)
        return fail(Error::Internal, "websocket: SHA-1 failed");
    return base64_encode(std::string_view(reinterpret_cast<const char *>(digest), sizeof digest));
}

bool valid_utf8(std::string_view s) {
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    size_t n = s.size(), i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len) return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += len;
    }
    return true;
}

// ---- decoding ----

Status FrameDecoder::fail_with(uint16_t code, Failure f) {
    close_code_ = code;
    failed_ = f;
    buf_.clear();
    message_.clear();
    return f;
}

Status FrameDecoder::feed(std::string_view bytes, std::vector<Message> *out) {
    if (failed_) return *failed_;
    for (;;) {
        if (header_len_ == 0) {
            size_t take = std::min(2 - buf_.size(), bytes.size());
            buf_.append(bytes.data(), take);
            bytes.remove_prefix(take);
            if (buf_.size() < 2) return {};
            auto b0 = static_cast<uint8_t>(buf_[0]), b1 = static_cast<uint8_t>(buf_[1]);
            auto op = static_cast<Opcode>(b0 & 0x0f);
            bool fin = (b0 & 0x80) != 0;
            bool control = (b0 & 0x08) != 0;
            if (closed_) return fail_with(kCloseProtocolError, bad("a frame after the Close"));
            if (b0 & 0x70)
                return fail_with(kCloseProtocolError, bad("reserved bits set (no extension)"));
            if (op != Opcode::Continuation && op != Opcode::Text && op != Opcode::Binary &&
                op != Opcode::Close && op != Opcode::Ping && op != Opcode::Pong)
                return fail_with(kCloseProtocolError,
                                 bad("unknown opcode " + std::to_string(b0 & 0x0f)));
            if (!(b1 & 0x80))
                return fail_with(kCloseProtocolError, bad("an unmasked frame from the client"));
            size_t len7 = b1 & 0x7f;
            if (control && (!fin || len7 > kMaxControlPayload))
                return fail_with(kCloseProtocolError,
                                 bad("a fragmented or over-125-byte control frame"));
            if (!control && op == Opcode::Continuation && !in_message_)
                return fail_with(kCloseProtocolError, bad("a continuation outside a message"));
            if (!control && op != Opcode::Continuation && in_message_)
                return fail_with(kCloseProtocolError, bad("a new message inside a fragmented one"));
            header_len_ = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + 4;
        }
        if (buf_.size() < header_len_) {
            size_t take = std::min(header_len_ - buf_.size(), bytes.size());
            buf_.append(bytes.data(), take);
            bytes.remove_prefix(take);
            if (buf_.size() < header_len_) return {};
            const auto *u = reinterpret_cast<const unsigned char *>(buf_.data());
            size_t len7 = u[1] & 0x7f;
            uint64_t len = len7;
            if (len7 == 126) {
                len = (uint64_t{u[2]} << 8) | u[3];
                if (len < 126) return fail_with(kCloseProtocolError, bad("a non-minimal length"));
            } else if (len7 == 127) {
                len = 0;
                for (int k = 0; k < 8; k++)
                    len = (len << 8) | u[2 + k];
                if (len >> 63) return fail_with(kCloseProtocolError, bad("a 64-bit length"));
                if (len <= 0xffff)
                    return fail_with(kCloseProtocolError, bad("a non-minimal length"));
            }
            if (len > limits_.max_frame_payload)
                return fail_with(kCloseTooBig, fail(Error::TooLarge,
                                                    "websocket: a frame of " + std::to_string(len) +
                                                        " bytes is over the limit of " +
                                                        std::to_string(limits_.max_frame_payload)));
            bool control = (u[0] & 0x08) != 0;
            if (!control && message_.size() + len > limits_.max_message)
                return fail_with(
                    kCloseTooBig,
                    fail(Error::TooLarge, "websocket: a message over the limit of " +
                                              std::to_string(limits_.max_message) + " bytes"));
            payload_len_ = len;
        }
        size_t need = header_len_ + static_cast<size_t>(payload_len_);
        size_t take = std::min(need - buf_.size(), bytes.size());
        buf_.append(bytes.data(), take);
        bytes.remove_prefix(take);
        if (buf_.size() < need) return {};
        if (Status st = frame_done(out); !st) return st;
        buf_.clear();
        if (buf_.capacity() > (64 << 10)) buf_.shrink_to_fit();
        header_len_ = 0;
        payload_len_ = 0;
        if (bytes.empty()) return {};
    }
}

// The frame in buf_ is complete: unmask it and deliver what it finishes.
Status FrameDecoder::frame_done(std::vector<Message> *out) {
    const char *mask = buf_.data() + header_len_ - 4;
    std::string_view payload(buf_.data() + header_len_, static_cast<size_t>(payload_len_));
    auto b0 = static_cast<uint8_t>(buf_[0]);
    auto op = static_cast<Opcode>(b0 & 0x0f);
    bool fin = (b0 & 0x80) != 0;
    std::string data(payload);
    for (size_t i = 0; i < data.size(); i++)
        data[i] = static_cast<char>(data[i] ^ mask[i % 4]);
    if (op == Opcode::Close) {
        Message m;
        m.opcode = op;
        if (data.size() == 1) return fail_with(kCloseProtocolError, bad("a 1-byte Close payload"));
        if (data.size() >= 2) {
            m.close_code = static_cast<uint16_t>((static_cast<uint8_t>(data[0]) << 8) |
                                                 static_cast<uint8_t>(data[1]));
            if (!valid_close_code(m.close_code))
                return fail_with(kCloseProtocolError,
                                 bad("Close code " + std::to_string(m.close_code)));
            m.payload = data.substr(2);
            if (!valid_utf8(m.payload))
                return fail_with(kCloseInvalidData, bad("a Close reason that is not UTF-8"));
        }
        closed_ = true;
        out->push_back(std::move(m));
        return {};
    }
    if (op == Opcode::Ping || op == Opcode::Pong) {
        out->push_back(Message{op, std::move(data), kCloseNoStatus});
        return {};
    }
    if (op != Opcode::Continuation) {
        in_message_ = true;
        message_op_ = op;
    }
    message_ += data;
    if (!fin) return {};
    in_message_ = false;
    if (message_op_ == Opcode::Text && !valid_utf8(message_))
        return fail_with(kCloseInvalidData, bad("a Text message that is not UTF-8"));
    out->push_back(Message{message_op_, std::move(message_), kCloseNoStatus});
    message_.clear();
    return {};
}

// ---- encoding ----

std::string encode_frame(Opcode opcode, std::string_view payload, bool fin) {
    bool control = (static_cast<uint8_t>(opcode) & 0x08) != 0;
    assert(!control || (fin && payload.size() <= kMaxControlPayload));
    (void)control;
    std::string out;
    out.reserve(payload.size() + 10);
    append_header(&out, static_cast<uint8_t>((fin ? 0x80 : 0) | static_cast<uint8_t>(opcode)),
                  payload.size());
    out.append(payload);
    return out;
}

std::string encode_close(uint16_t code, std::string_view reason) {
    size_t max = kMaxControlPayload - 2;
    if (reason.size() > max) {
        // Cut before the character that would not fit whole.
        size_t cut = max;
        while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xc0) == 0x80)
            cut--;
        reason = reason.substr(0, cut);
    }
    std::string payload;
    payload.push_back(static_cast<char>(code >> 8));
    payload.push_back(static_cast<char>(code));
    payload.append(reason);
    return encode_frame(Opcode::Close, payload);
}

// ---- channels ----

std::optional<ChannelProtocol> channel_protocol(std::string_view subprotocol) {
    if (subprotocol == kProtocolV4) return ChannelProtocol::V4;
    if (subprotocol == kProtocolV5) return ChannelProtocol::V5;
    return std::nullopt;
}

Result<ChannelMessage> parse_channel_message(ChannelProtocol protocol, std::string_view payload,
                                             unsigned channels) {
    ChannelMessage m;
    if (payload.empty()) return m;
    auto channel = static_cast<uint8_t>(payload[0]);
    payload.remove_prefix(1);
    if (channel == kChannelClose) {
        if (protocol != ChannelProtocol::V5)
            return fail(Error::Parse, "websocket: channel 255 is reserved under v4.channel.k8s.io");
        if (payload.size() != 1 || static_cast<uint8_t>(payload[0]) >= channels)
            return fail(Error::Parse, "websocket: a close message that names no valid channel");
        m.kind = ChannelMessage::Kind::CloseStream;
        m.channel = static_cast<uint8_t>(payload[0]);
        return m;
    }
    if (channel >= channels)
        return fail(Error::Parse,
                    "websocket: a message on unknown channel " + std::to_string(channel));
    m.kind = ChannelMessage::Kind::Data;
    m.channel = channel;
    m.data = payload;
    return m;
}

std::string encode_channel_data(uint8_t channel, std::string_view data) {
    std::string out;
    out.reserve(data.size() + 11);
    append_header(&out, 0x80 | static_cast<uint8_t>(Opcode::Binary), data.size() + 1);
    out.push_back(static_cast<char>(channel));
    out.append(data);
    return out;
}

std::string encode_channel_close(uint8_t channel) {
    const char payload[2] = {static_cast<char>(kChannelClose), static_cast<char>(channel)};
    return encode_frame(Opcode::Binary, std::string_view(payload, 2));
}

}  // namespace sk::ws
