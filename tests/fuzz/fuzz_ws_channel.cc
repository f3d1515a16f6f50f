// WebSocket client frames and the Kubernetes channel layer
// (agent/kubelet/streams/ws_channel.h), and the resize stream's documents
// (agent/kubelet/streams/remotecommand.h): what the agent, as root, reads from a peer of
// its kubelet port after a WebSocket upgrade. Byte 0 picks the mode (bit 0),
// the chunk size (bits 1-4), small limits (bit 5) and v5 (bit 6). Mode 0:
// the rest is the wire. Mode 1: the rest is a list of frames (first byte,
// length byte, payload) that the target masks, so that the fuzzer reaches
// the message and channel layers. Properties: the messages, the failure and
// the close code are the same whatever the chunking; Text and Close reasons
// are UTF-8; control payloads stay within 125 bytes and messages within the
// limit; channel messages round-trip through encode_channel_data; resize
// documents that parse round-trip through their JSON.
#include <string>
#include <vector>

#include "agent/kubelet/streams/remotecommand.h"
#include "agent/kubelet/streams/ws_channel.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;
using namespace sk::ws;

struct Outcome {
    std::vector<Message> msgs;
    bool ok = true;
    std::string message;
    uint16_t close_code = 0;
};

Outcome decode(std::string_view wire, size_t chunk, const Limits &lim) {
    FrameDecoder d(lim);
    Outcome o;
    size_t step = chunk ? chunk : (wire.empty() ? 1 : wire.size());
    for (size_t i = 0; i < wire.size(); i += step) {
        Status st = d.feed(wire.substr(i, step), &o.msgs);
        if (!st) {
            FUZZ_CHECK(!st.message().empty());
            o.ok = false;
            o.message = st.message();
            o.close_code = d.close_code();
            FUZZ_CHECK(o.close_code == kCloseProtocolError || o.close_code == kCloseInvalidData ||
                       o.close_code == kCloseTooBig);
            FUZZ_CHECK((st.error() == Error::TooLarge) == (o.close_code == kCloseTooBig));
            FUZZ_CHECK(!d.feed(std::string_view("\x89\x80\0\0\0\0", 6), &o.msgs).ok());  // sticky
            break;
        }
    }
    return o;
}

bool same(const std::vector<Message> &a, const std::vector<Message> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++)
        if (a[i].opcode != b[i].opcode || a[i].payload != b[i].payload ||
            a[i].close_code != b[i].close_code)
            return false;
    return true;
}

std::string masked_frames(sk::fuzz::Input *in) {
    std::string wire;
    uint32_t key = 0x9e3779b9;
    while (!in->empty()) {
        uint8_t first = in->byte();
        uint8_t len = in->byte();
        std::string_view payload = in->take(len);
        wire.push_back(static_cast<char>(first));
        size_t n = payload.size();
        if (n < 126) {
            wire.push_back(static_cast<char>(0x80 | n));
        } else {
            wire.push_back(static_cast<char>(0x80 | 126));
            wire.push_back(0);
            wire.push_back(static_cast<char>(n));
        }
        key = key * 1664525 + 1013904223;
        const char mask[4] = {static_cast<char>(key >> 24), static_cast<char>(key >> 16),
                              static_cast<char>(key >> 8), static_cast<char>(key)};
        wire.append(mask, 4);
        for (size_t i = 0; i < n; i++)
            wire.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
    }
    return wire;
}

}  // namespace

SK_FUZZ_TARGET(ws_channel) {
    sk::fuzz::Input in(data, size);
    uint8_t flags = in.byte();
    Limits lim;
    if (flags & 32) {
        lim.max_frame_payload = 100;
        lim.max_message = 150;
    }
    std::string wire = (flags & 1) ? masked_frames(&in) : std::string(in.rest());
    static const size_t kChunks[] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 13, 14, 15, 64, 127, 1000};
    size_t chunk = kChunks[(flags >> 1) & 15];

    Outcome whole = decode(wire, 0, lim);
    Outcome parts = decode(wire, chunk, lim);
    FUZZ_CHECK(whole.ok == parts.ok && whole.message == parts.message &&
               whole.close_code == parts.close_code);
    FUZZ_CHECK(same(whole.msgs, parts.msgs));

    ChannelProtocol protocol = (flags & 64) ? ChannelProtocol::V5 : ChannelProtocol::V4;
    remotecommand::ResizeDecoder resize;
    std::vector<remotecommand::TerminalSize> sizes;
    for (const auto &m : whole.msgs) {
        switch (m.opcode) {
            case Opcode::Text:
                FUZZ_CHECK(valid_utf8(m.payload));
                break;
            case Opcode::Close:
                FUZZ_CHECK(valid_utf8(m.payload) && m.payload.size() <= 123);
                break;
            case Opcode::Ping:
            case Opcode::Pong:
                FUZZ_CHECK(m.payload.size() <= kMaxControlPayload);
                break;
            case Opcode::Binary: {
                FUZZ_CHECK(m.payload.size() <= lim.max_message);
                auto cm = parse_channel_message(protocol, m.payload, kExecChannels);
                if (!cm) break;
                if (cm->kind == ChannelMessage::Kind::Data) {
                    FUZZ_CHECK(cm->channel < kExecChannels);
                    std::string f = encode_channel_data(cm->channel, cm->data);
                    FUZZ_CHECK(
                        f.size() >= m.payload.size() &&
                        f.compare(f.size() - m.payload.size(), std::string::npos, m.payload) == 0);
                    if (cm->channel == kChannelResize && resize.feed(cm->data, &sizes).ok())
                        (void)resize.end_message(&sizes);
                } else if (cm->kind == ChannelMessage::Kind::CloseStream) {
                    FUZZ_CHECK(protocol == ChannelProtocol::V5 && cm->channel < kExecChannels);
                    FUZZ_CHECK(encode_channel_close(cm->channel).substr(2) == m.payload);
                }
                break;
            }
            case Opcode::Continuation:
                FUZZ_CHECK(false);
                break;
        }
    }
    for (const auto &s : sizes) {
        std::string doc = "{\"Width\":" + std::to_string(s.width) +
                          ",\"Height\":" + std::to_string(s.height) + "}";
        auto back = remotecommand::parse_terminal_size(doc);
        FUZZ_CHECK(back.ok() && back->width == s.width && back->height == s.height);
    }

    // The handshake key: only the base64 of 16 bytes is accepted.
    std::string_view key = fuzz::as_text(data, size).substr(0, 24);
    if (auto k = accept_key(key); k) FUZZ_CHECK(k->size() == 28 && key.size() == 24);
    return 0;
}
