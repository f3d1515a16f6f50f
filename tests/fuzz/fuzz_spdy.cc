// SPDY/3.1 decoder (agent/kubelet/streams/spdy.h): the agent, as root, reads whatever a
// peer of its kubelet port sends after an exec/attach/port-forward upgrade.
// Byte 0 picks the mode (bit 0), the chunk size (bits 1-4) and small limits
// (bit 5). Mode 0: the rest is the wire. Mode 1: the rest is a list of raw
// header blocks (a type byte, a length byte, the bytes) that the target compresses
// with one zlib stream and the SPDY/3 dictionary into SYN_STREAM / HEADERS /
// SYN_REPLY frames, so that the header block parser sees arbitrary content.
// Properties: the frames and the failure are the same whatever the chunking;
// the decoder never holds more than one frame; every decoded frame encodes
// again and decodes to the same frame.
#include <zlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "agent/kubelet/streams/spdy.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;
using namespace sk::spdy;

bool same(const Frame &a, const Frame &b) {
    if (a.type != b.type || a.flags != b.flags || a.stream_id != b.stream_id ||
        a.associated_id != b.associated_id || a.priority != b.priority || a.slot != b.slot ||
        a.status != b.status || a.ping_id != b.ping_id || a.delta_window != b.delta_window ||
        a.data != b.data || a.headers.size() != b.headers.size() ||
        a.settings.size() != b.settings.size())
        return false;
    for (size_t i = 0; i < a.headers.size(); i++)
        if (a.headers[i].name != b.headers[i].name || a.headers[i].value != b.headers[i].value)
            return false;
    for (size_t i = 0; i < a.settings.size(); i++)
        if (a.settings[i].flags != b.settings[i].flags || a.settings[i].id != b.settings[i].id ||
            a.settings[i].value != b.settings[i].value)
            return false;
    return true;
}

bool same_list(const std::vector<Frame> &a, const std::vector<Frame> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++)
        if (!same(a[i], b[i])) return false;
    return true;
}

struct Outcome {
    std::vector<Frame> frames;
    bool ok = true;
    std::string message;
};

Outcome decode(std::string_view wire, size_t chunk, const Limits &lim) {
    Decoder d(lim);
    Outcome o;
    size_t step = chunk ? chunk : (wire.empty() ? 1 : wire.size());
    size_t bound = 8 + std::max(lim.max_data_payload, lim.max_control_payload);
    for (size_t i = 0; i < wire.size(); i += step) {
        Status st = d.feed(wire.substr(i, step), &o.frames);
        FUZZ_CHECK(d.buffered() <= bound);
        if (!st) {
            FUZZ_CHECK(!st.message().empty());
            FUZZ_CHECK(st.error() == Error::Parse || st.error() == Error::TooLarge);
            o.ok = false;
            o.message = st.message();
            FUZZ_CHECK(!d.feed("x", &o.frames).ok());  // sticky
            break;
        }
    }
    return o;
}

void put32(std::string *s, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
        s->push_back(static_cast<char>(v >> shift));
}

// Mode 1: raw header blocks, compressed by one stream, in control frames.
std::string frames_of_blocks(sk::fuzz::Input *in) {
    z_stream z{};
    if (deflateInit(&z, Z_DEFAULT_COMPRESSION) != Z_OK) abort();
    std::string_view dict = header_dictionary();
    deflateSetDictionary(&z, reinterpret_cast<const Bytef *>(dict.data()),
                         static_cast<uInt>(dict.size()));
    std::string wire;
    for (uint32_t id = 1; !in->empty(); id += 2) {
        uint8_t ctl = in->byte();
        std::string raw(in->take(in->byte()));
        std::string packed;
        z.next_in = reinterpret_cast<Bytef *>(raw.data());
        z.avail_in = static_cast<uInt>(raw.size());
        char buf[4096];
        do {
            z.next_out = reinterpret_cast<Bytef *>(buf);
            z.avail_out = sizeof buf;
            deflate(&z, Z_SYNC_FLUSH);
            packed.append(buf, sizeof buf - z.avail_out);
        } while (z.avail_out == 0);
        uint16_t type = (ctl >> 6) == 0 ? 1 : (ctl >> 6) == 1 ? 2 : 8;
        std::string payload;
        put32(&payload, id);
        if (type == 1) {
            put32(&payload, 0);
            payload.append("\x60\x00", 2);
        }
        payload += packed;
        put32(&wire, 0x80030000u | type);
        put32(&wire, static_cast<uint32_t>(payload.size()));
        wire += payload;
    }
    deflateEnd(&z);
    return wire;
}

}  // namespace

SK_FUZZ_TARGET(spdy) {
    sk::fuzz::Input in(data, size);
    uint8_t flags = in.byte();
    Limits lim;
    if (flags & 32) {
        lim.max_data_payload = 64;
        lim.max_control_payload = 96;
        lim.max_header_block = 200;
        lim.max_headers = 4;
    }
    std::string wire = (flags & 1) ? frames_of_blocks(&in) : std::string(in.rest());
    static const size_t kChunks[] = {0, 1, 2, 3, 5, 7, 8, 9, 13, 16, 31, 64, 100, 255, 1000, 4096};
    size_t chunk = kChunks[(flags >> 1) & 15];

    Outcome whole = decode(wire, 0, lim);
    Outcome parts = decode(wire, chunk, lim);
    FUZZ_CHECK(whole.ok == parts.ok && whole.message == parts.message);
    FUZZ_CHECK(same_list(whole.frames, parts.frames));

    // Re-encode what was read: every decoded frame is encodable, and reads
    // back the same through a fresh pair of zlib streams.
    Encoder enc;
    std::string again;
    for (const auto &f : whole.frames)
        FUZZ_CHECK(enc.encode(f, &again).ok());
    Limits big;
    big.max_control_payload = 1 << 20;
    big.max_header_block = 1 << 20;
    big.max_headers = 1 << 20;
    Outcome back = decode(again, chunk, big);
    FUZZ_CHECK(back.ok);
    FUZZ_CHECK(same_list(back.frames, whole.frames));
    return 0;
}
