// agent/kubelet/streams/spdy: SPDY/3.1 frames and zlib header blocks, against what kubectl
// (Go's moby/spdystream) sends, round trips, chunking and hostile input.
#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "agent/kubelet/streams/spdy.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::spdy;

namespace {

std::string unhex(const std::string &hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

// Recorded from kubectl v1.28.15 against a server that answered the exec
// upgrade (101, SPDY/3.1, v4.channel.k8s.io), replied to each stream and
// sent the exit status: `echo hello | kubectl exec -i p -- sh -c 'exit 3'`
// (stdin kept open), then kubectl's own end of the session.
const char *const kExecInput =
    "80030001000000290000000100000000000078f9e3c6a7c26260606004a7b392a2d4c45c6851c29a0a0a6800"
    "000000ffff800300010000001700000003000000000000c22e555c92929907000000ffff8003000100000019"
    "00000005000000000000c22ac5565c92925f5a02000000ffff800300010000001500000007000000000000c2"
    "29975a5404000000ffff000000030000000668656c6c6f0a8003000300000008000000010000000580030003"
    "0000000800000003000000058003000300000008000000050000000580030003000000080000000700000005"
    "80030007000000080000000000000000";
// `kubectl exec -it p -- sh` in a 100x30 terminal, ^D typed.
const char *const kExecTty =
    "80030001000000290000000100000000000078f9e3c6a7c26260606004a7b392a2d4c45c6851c29a0a0a6800"
    "000000ffff800300010000001700000003000000000000c22e555c92929907000000ffff8003000100000019"
    "00000005000000000000c22ac5565c92925f5a02000000ffff800300010000001800000007000000000000c2"
    "2e57945a9c59950a000000ffff000000070000001a7b225769647468223a3130302c22486569676874223a33"
    "307d0a0000000300000001048003000300000008000000070000000580030003000000080000000100000005"
    "8003000300000008000000030000000580030003000000080000000500000005800300070000000800000000"
    "00000000";
// `kubectl port-forward pod/p 18096:80` and one connection sending a request.
const char *const kPortForward =
    "800300010000003d0000000100000000000078f9e3c6a7c202253a703a2b294a4dcc851625aca9a0808614cb"
    "45a024cc6461c0c0c0c0590489c44c50e2663400000000ffff00000001010000008003000100000018000000"
    "03000000000000c2aa15540a2512d209000000ffff0000000300000012474554202f20485454502f312e300d"
    "0a0d0a8003000600000004000000010000000301000000800300060000000400000003";

std::string escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
            char b[8];
            snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned char>(c));
            out += b;
        } else {
            out += c;
        }
    }
    return out;
}

std::string describe(const Frame &f) {
    std::string s;
    auto headers = [&] {
        s += " {";
        for (size_t i = 0; i < f.headers.size(); i++)
            s += (i ? "," : "") + f.headers[i].name + "=" + escape(f.headers[i].value);
        s += "}";
    };
    std::string flags = f.flags ? " f" + std::to_string(f.flags) : "";
    switch (f.type) {
        case FrameType::Data:
            s = "DATA " + std::to_string(f.stream_id) + flags + " '" + escape(f.data) + "'";
            break;
        case FrameType::SynStream:
            s = "SYN_STREAM " + std::to_string(f.stream_id) + flags;
            if (f.associated_id) s += " assoc " + std::to_string(f.associated_id);
            if (f.priority) s += " pri " + std::to_string(f.priority);
            if (f.slot) s += " slot " + std::to_string(f.slot);
            headers();
            break;
        case FrameType::SynReply:
            s = "SYN_REPLY " + std::to_string(f.stream_id) + flags;
            headers();
            break;
        case FrameType::Headers:
            s = "HEADERS " + std::to_string(f.stream_id) + flags;
            headers();
            break;
        case FrameType::RstStream:
            s = "RST " + std::to_string(f.stream_id) + " " + std::to_string(f.status);
            break;
        case FrameType::Settings:
            s = "SETTINGS" + flags;
            for (const auto &e : f.settings)
                s += " " + std::to_string(e.flags) + ":" + std::to_string(e.id) + "=" +
                     std::to_string(e.value);
            break;
        case FrameType::Ping:
            s = "PING " + std::to_string(f.ping_id);
            break;
        case FrameType::GoAway:
            s = "GOAWAY " + std::to_string(f.stream_id) + " " + std::to_string(f.status);
            break;
        case FrameType::WindowUpdate:
            s = "WINDOW " + std::to_string(f.stream_id) + " +" + std::to_string(f.delta_window);
            break;
    }
    return s;
}

std::string describe(const std::vector<Frame> &frames) {
    std::string s;
    for (const auto &f : frames)
        s += describe(f) + "|";
    return s;
}

// Decodes `wire` fed in pieces of `chunk` bytes (0: all at once).
std::string decode_all(const std::string &wire, size_t chunk, Limits limits = {}) {
    Decoder d(limits);
    std::vector<Frame> frames;
    size_t step = chunk ? chunk : wire.size();
    for (size_t i = 0; i < wire.size(); i += step) {
        Status st = d.feed(std::string_view(wire).substr(i, step), &frames);
        if (!st) return describe(frames) + "ERROR " + st.failure().describe();
    }
    ck_assert_uint_eq(d.buffered(), 0);
    return describe(frames);
}

// A peer's zlib stream with the SPDY/3 dictionary (or another), to write
// header blocks the Encoder never would.
class PeerDeflater {
  public:
    explicit PeerDeflater(std::string_view dict = header_dictionary()) {
        ck_assert_int_eq(deflateInit(&z_, Z_BEST_COMPRESSION), Z_OK);
        if (!dict.empty())
            ck_assert_int_eq(deflateSetDictionary(&z_, reinterpret_cast<const Bytef *>(dict.data()),
                                                  static_cast<uInt>(dict.size())),
                             Z_OK);
    }
    ~PeerDeflater() { deflateEnd(&z_); }
    std::string pack(const std::string &raw) {
        z_.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(raw.data()));
        z_.avail_in = static_cast<uInt>(raw.size());
        std::string out;
        char buf[16384];
        do {
            z_.next_out = reinterpret_cast<Bytef *>(buf);
            z_.avail_out = sizeof buf;
            ck_assert_int_ne(deflate(&z_, Z_SYNC_FLUSH), Z_STREAM_ERROR);
            out.append(buf, sizeof buf - z_.avail_out);
        } while (z_.avail_out == 0);
        return out;
    }

  private:
    z_stream z_{};
};

std::string be32(uint32_t v) {
    std::string s(4, '\0');
    s[0] = static_cast<char>(v >> 24);
    s[1] = static_cast<char>(v >> 16);
    s[2] = static_cast<char>(v >> 8);
    s[3] = static_cast<char>(v);
    return s;
}

std::string control(uint16_t type, uint8_t flags, const std::string &payload,
                    uint16_t version = 3) {
    std::string s;
    s.push_back(static_cast<char>(0x80 | (version >> 8)));
    s.push_back(static_cast<char>(version));
    s.push_back(static_cast<char>(type >> 8));
    s.push_back(static_cast<char>(type));
    s += be32((uint32_t{flags} << 24) | static_cast<uint32_t>(payload.size()));
    return s + payload;
}

std::string pair(const std::string &name, const std::string &value) {
    return be32(static_cast<uint32_t>(name.size())) + name +
           be32(static_cast<uint32_t>(value.size())) + value;
}

// A SYN_STREAM for stream 1 whose raw header block is `raw`.
std::string syn_stream_raw(PeerDeflater *z, const std::string &raw) {
    return control(1, 0, be32(1) + be32(0) + std::string(2, '\0') + z->pack(raw));
}

}  // namespace

// ---- the dictionary ----

START_TEST(dictionary_is_spdy3s) {
    std::string_view d = header_dictionary();
    ck_assert_uint_eq(d.size(), 1423);
    // The DICTID kubectl's zlib stream names (bytes 2..5 after its 78 f9).
    uLong id = adler32(adler32(0L, Z_NULL, 0), reinterpret_cast<const Bytef *>(d.data()),
                       static_cast<uInt>(d.size()));
    ck_assert_uint_eq(id, 0xe3c6a7c2);
    ck_assert(unhex(kExecInput).substr(20, 4) == unhex("e3c6a7c2"));
    ck_assert(d.substr(0, 11) == std::string_view("\0\0\0\7options", 11));
    ck_assert(d.substr(d.size() - 9) == ",*,enq=0.");
}
END_TEST

// ---- what kubectl sends ----

struct RecordedSpdy {
    const char *name;
    const char *hex;
    const char *frames;
};
const RecordedSpdy kRecorded[] = {
    {"exec -i", kExecInput,
     "SYN_STREAM 1 {streamtype=error}|SYN_STREAM 3 {streamtype=stdin}|"
     "SYN_STREAM 5 {streamtype=stdout}|SYN_STREAM 7 {streamtype=stderr}|DATA 3 'hello\\n'|"
     "RST 1 5|RST 3 5|RST 5 5|RST 7 5|GOAWAY 0 0|"},
    {"exec -it", kExecTty,
     "SYN_STREAM 1 {streamtype=error}|SYN_STREAM 3 {streamtype=stdin}|"
     "SYN_STREAM 5 {streamtype=stdout}|SYN_STREAM 7 {streamtype=resize}|"
     "DATA 7 '{\"Width\":100,\"Height\":30}\\n'|DATA 3 '\\x04'|"
     "RST 7 5|RST 1 5|RST 3 5|RST 5 5|GOAWAY 0 0|"},
    {"port-forward", kPortForward,
     "SYN_STREAM 1 {streamtype=error,port=80,requestid=0}|DATA 1 f1 ''|"
     "SYN_STREAM 3 {streamtype=data,port=80,requestid=0}|"
     "DATA 3 'GET / HTTP/1.0\\r\\n\\r\\n'|PING 1|DATA 3 f1 ''|PING 3|"},
};

START_TEST(recorded_kubectl_sessions) {
    const RecordedSpdy &r = kRecorded[_i];
    std::string wire = unhex(r.hex);
    // Whole, one byte at a time, and in pieces that split every field.
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{13}, size_t{64}}) {
        std::string got = decode_all(wire, chunk);
        if (got != r.frames) printf("%s (chunk %zu):\n  %s\n", r.name, chunk, got.c_str());
        ck_assert_sstr_eq(got, r.frames);
    }
}
END_TEST

// ---- round trips: Encoder -> Decoder, one zlib stream per direction ----

START_TEST(round_trip_every_frame_type) {
    Encoder enc;
    std::string wire;
    std::vector<Frame> in;
    Frame syn;
    syn.type = FrameType::SynStream;
    syn.flags = kFlagFin | kFlagUnidirectional;
    syn.stream_id = 2;
    syn.associated_id = 1;
    syn.priority = 7;
    syn.slot = 9;
    syn.headers = {{"streamtype", "stdout"}, {"multi", std::string("a\0bc", 4)}, {"empty", ""}};
    in.push_back(syn);
    in.push_back(syn_reply(1, {{"streamtype", "error"}}));
    in.push_back(syn_reply(3));
    Frame hdr;
    hdr.type = FrameType::Headers;
    hdr.stream_id = 5;
    hdr.flags = kFlagFin;
    hdr.headers = {{"streamtype", "stdout"}, {"x-long", std::string(5000, 'v')}};
    in.push_back(hdr);
    in.push_back(data_frame(3, "hello\n"));
    in.push_back(data_frame(kMaxStreamId, std::string(70000, '\xff'), true));
    in.push_back(data_frame(5, ""));
    in.push_back(rst_stream(7, kRstCancel));
    Frame set;
    set.type = FrameType::Settings;
    set.flags = kFlagClearSettings;
    set.settings = {{1, 4, 100}, {0, 7, 65536}, {2, 0xffffff, 0xffffffff}};
    in.push_back(set);
    Frame none;
    none.type = FrameType::Settings;
    in.push_back(none);
    in.push_back(ping(2));
    in.push_back(ping(0xffffffff));
    in.push_back(goaway(7, kGoAwayProtocolError));
    in.push_back(window_update(0, 1));
    in.push_back(window_update(9, kMaxStreamId));
    // The same headers again: the second block leans on the first's
    // window in the shared stream.
    in.push_back(syn_reply(9, {{"streamtype", "error"}}));
    for (const auto &f : in)
        ck_assert_msg(enc.encode(f, &wire).ok(), "%s", describe(f).c_str());
    std::string want = describe(in);
    ck_assert_sstr_eq(decode_all(wire, 0), want);
    ck_assert_sstr_eq(decode_all(wire, 1), want);
    ck_assert_sstr_eq(decode_all(wire, 4095), want);
}
END_TEST

// Header blocks written by another zlib (the peer's choice of level and
// window) decode, and a repeated block compresses to a few bytes.
START_TEST(peer_zlib_streams_decode) {
    PeerDeflater z;
    std::string raw = be32(2) + pair("streamtype", "data") + pair("port", "8080");
    std::string a = syn_stream_raw(&z, raw), b = syn_stream_raw(&z, raw);
    ck_assert_uint_lt(b.size(), a.size());
    ck_assert_sstr_eq(decode_all(a + b, 5),
                      "SYN_STREAM 1 {streamtype=data,port=8080}|"
                      "SYN_STREAM 1 {streamtype=data,port=8080}|");
    Encoder enc;
    std::string w1, w2;
    ck_assert(enc.encode(syn_reply(1, {{"streamtype", "data"}}), &w1).ok());
    ck_assert(enc.encode(syn_reply(3, {{"streamtype", "data"}}), &w2).ok());
    ck_assert_uint_lt(w2.size(), w1.size());
}
END_TEST

START_TEST(header_values_split) {
    ck_assert_uint_eq(header_values("").size(), 0);
    auto v = header_values(std::string_view("a\0bc\0d", 6));
    ck_assert_uint_eq(v.size(), 3);
    ck_assert(v[0] == "a" && v[1] == "bc" && v[2] == "d");
    ck_assert(header_values("x").size() == 1);
    ck_assert(valid_header_value(std::string_view("a\0b", 3)));
    ck_assert(!valid_header_value(std::string_view("\0b", 2)));
    ck_assert(!valid_header_value(std::string_view("a\0", 2)));
    ck_assert(!valid_header_value(std::string_view("a\0\0b", 4)));
    ck_assert(valid_header_name(":path"));
    ck_assert(!valid_header_name("Streamtype"));
    ck_assert(!valid_header_name("a b"));
    ck_assert(!valid_header_name(""));
    HeaderBlock h = {{"a", "1"}, {"b", "2"}};
    ck_assert(find_header(h, "b") && *find_header(h, "b") == "2");
    ck_assert(!find_header(h, "c"));
}
END_TEST

// ---- bounds ----

START_TEST(oversized_frames_fail_from_their_header) {
    Limits lim;
    lim.max_data_payload = 1000;
    lim.max_control_payload = 100;
    // A DATA frame announcing 1001 bytes: refused once its 8 header bytes
    // are in, none of the payload buffered.
    std::string big = be32(1) + be32(1001);
    Decoder d(lim);
    std::vector<Frame> out;
    Status st = d.feed(big, &out);
    ck_assert(!st.ok());
    ck_assert_int_eq(static_cast<int>(st.error()), static_cast<int>(Error::TooLarge));
    ck_assert_msg(st.message().find("DATA frame of 1001 bytes") != std::string::npos, "%s",
                  st.message().c_str());
    ck_assert_uint_eq(d.buffered(), 0);
    // Sticky.
    ck_assert(!d.feed(be32(1) + be32(0), &out).ok());
    ck_assert_uint_eq(out.size(), 0);
    // The limit itself is fine; the full 16 MiB announced is not.
    ck_assert_sstr_eq(
        decode_all(be32(1) + be32(1000) + std::string(1000, 'x'), 333, lim).substr(0, 8),
        "DATA 1 '");
    ck_assert(decode_all(be32(1) + be32(0xffffff), 0).find("ERROR too_large") != std::string::npos);
    // A control frame over its limit, whatever its type.
    std::string got = decode_all(control(4, 0, std::string(101, '\0')), 0, lim);
    ck_assert_msg(got.find("ERROR too_large: spdy: a SETTINGS of 101 bytes") == 0, "%s",
                  got.c_str());
    got = decode_all(control(10, 0, std::string(101, '\0')), 0, lim);
    ck_assert_msg(got.find("ERROR too_large") == 0, "%s", got.c_str());
}
END_TEST

// About 32 KiB of zlib that would inflate to 32 MiB: refused at the
// decompressed cap, without inflating the rest.
START_TEST(zlib_bomb_is_refused) {
    PeerDeflater z;
    std::string raw = be32(1) + pair("x", std::string(32 << 20, 'a'));
    std::string wire = syn_stream_raw(&z, raw);
    ck_assert_uint_lt(wire.size(), 64 << 10);  // fits the control frame limit
    std::string got = decode_all(wire, 0);
    ck_assert_msg(got.find("ERROR too_large: spdy: a header block decompresses to more than "
                           "65536 bytes") == 0,
                  "%s", got.c_str());
}
END_TEST

START_TEST(header_count_is_bounded) {
    PeerDeflater z;
    std::string raw = be32(65);
    for (int i = 0; i < 65; i++)
        raw += pair("h" + std::to_string(i), "v");
    std::string got = decode_all(syn_stream_raw(&z, raw), 0);
    ck_assert_msg(got.find("ERROR too_large: spdy: SYN_STREAM with 65 headers") == 0, "%s",
                  got.c_str());
    // A count far beyond the bytes that follow it.
    PeerDeflater z2;
    got = decode_all(syn_stream_raw(&z2, be32(0xffffffff)), 0);
    ck_assert_msg(got.find("ERROR too_large") == 0, "%s", got.c_str());
}
END_TEST

// ---- malformed frames: each a session error that names the fault ----

struct BadSpdy {
    const char *name;
    std::string (*wire)();
    const char *error;  // a substring of the failure
};
const BadSpdy kBad[] = {
    {"version 2", [] { return control(3, 0, be32(1) + be32(1), 2); }, "SPDY version 2"},
    {"DATA on stream 0", [] { return be32(0) + be32(1) + "x"; }, "DATA frame: stream id 0"},
    {"RST_STREAM short", [] { return control(3, 0, be32(1)); }, "RST_STREAM: length 4, not 8"},
    {"RST_STREAM flags", [] { return control(3, 1, be32(1) + be32(1)); }, "RST_STREAM: flags"},
    {"RST_STREAM status 0", [] { return control(3, 0, be32(1) + be32(0)); }, "status 0"},
    {"RST_STREAM stream 0", [] { return control(3, 0, be32(0) + be32(1)); }, "stream id 0"},
    {"PING long", [] { return control(6, 0, be32(1) + be32(1)); }, "PING: length 8, not 4"},
    {"PING id 0", [] { return control(6, 0, be32(0)); }, "PING: id 0"},
    {"PING flags", [] { return control(6, 2, be32(1)); }, "PING: flags"},
    {"GOAWAY SPDY/2 size", [] { return control(7, 0, be32(1)); }, "GOAWAY: length 4, not 8"},
    {"WINDOW_UPDATE delta 0", [] { return control(9, 0, be32(1) + be32(0x80000000)); }, "delta 0"},
    {"SETTINGS count", [] { return control(4, 0, be32(2) + be32(1) + be32(1)); },
     "2 entries in 12 bytes"},
    {"SETTINGS empty", [] { return control(4, 0, ""); }, "SETTINGS: too short"},
    {"SYN_STREAM short", [] { return control(1, 0, be32(1) + be32(0) + "x"); },
     "SYN_STREAM: too short"},
    {"SYN_STREAM stream 0", [] { return control(1, 0, be32(0) + be32(0) + "xx"); }, "stream id 0"},
    {"SYN_REPLY without block", [] { return control(2, 0, be32(1)); }, "without its pair count"},
    {"HEADERS short", [] { return control(8, 0, "ab"); }, "HEADERS: too short"},
    {"not zlib", [] { return control(2, 0, be32(1) + "garbage!"); }, "zlib"},
    {"another dictionary",
     [] {
         PeerDeflater z("some other dictionary");
         return syn_stream_raw(&z, be32(0));
     },
     "dictionary is not SPDY/3's"},
    {"upper-case name",
     [] {
         PeerDeflater z;
         return syn_stream_raw(&z, be32(1) + pair("StreamType", "error"));
     },
     "invalid header name"},
    {"empty name",
     [] {
         PeerDeflater z;
         return syn_stream_raw(&z, be32(1) + pair("", "error"));
     },
     "invalid header name"},
    {"NUL at a value's start",
     [] {
         PeerDeflater z;
         return syn_stream_raw(&z, be32(1) + pair("a", std::string("\0b", 2)));
     },
     "invalid value of header a"},
    {"duplicate name",
     [] {
         PeerDeflater z;
         return syn_stream_raw(&z, be32(2) + pair("a", "1") + pair("a", "2"));
     },
     "header a twice"},
    {"truncated pair",
     [] {
         PeerDeflater z;
         return syn_stream_raw(&z, be32(1) + be32(10) + "abc");
     },
     "header block truncated"},
    {"bytes after the pairs",
     [] {
         PeerDeflater z;
         return syn_stream_raw(&z, be32(1) + pair("a", "1") + "zz");
     },
     "bytes after the header block's last pair"},
    {"the zlib stream ended",
     [] {
         std::string block;
         z_stream s{};
         deflateInit(&s, 6);
         std::string_view d = header_dictionary();
         deflateSetDictionary(&s, reinterpret_cast<const Bytef *>(d.data()),
                              static_cast<uInt>(d.size()));
         std::string raw = be32(0);
         char buf[256];
         s.next_in = reinterpret_cast<Bytef *>(raw.data());
         s.avail_in = static_cast<uInt>(raw.size());
         s.next_out = reinterpret_cast<Bytef *>(buf);
         s.avail_out = sizeof buf;
         deflate(&s, Z_FINISH);
         block.assign(buf, sizeof buf - s.avail_out);
         deflateEnd(&s);
         return control(2, 0, be32(1) + block);
     },
     "the peer ended its zlib stream"},
};

START_TEST(malformed_frames_fail) {
    const BadSpdy &b = kBad[_i];
    std::string wire = b.wire();
    for (size_t chunk : {size_t{0}, size_t{1}}) {
        std::string got = decode_all(wire + control(6, 0, be32(1)), chunk);
        ck_assert_msg(got.find("ERROR ") == 0 && got.find(b.error) != std::string::npos, "%s: %s",
                      b.name, got.c_str());
    }
}
END_TEST

// CREDENTIAL (10) and unknown control types are skipped, not errors.
START_TEST(unknown_control_frames_are_skipped) {
    std::string wire = control(10, 0, "cert") + control(0x7fff, 0xff, "") + control(6, 0, be32(5));
    ck_assert_sstr_eq(decode_all(wire, 0), "PING 5|");
    ck_assert_sstr_eq(decode_all(wire, 1), "PING 5|");
}
END_TEST

// ---- the encoder refuses what it cannot write, and stays usable ----

START_TEST(encoder_refuses_invalid_frames) {
    Encoder enc;
    std::string out;
    Frame up = syn_reply(1, {{"StreamType", "x"}});
    Frame dup = syn_reply(1, {{"a", "1"}, {"a", "2"}});
    Frame nul = syn_reply(1, {{"a", std::string("x\0", 2)}});
    Frame pri;
    pri.type = FrameType::SynStream;
    pri.stream_id = 2;
    pri.priority = 8;
    const Frame bad[] = {data_frame(0, "x"),
                         data_frame(kMaxStreamId + 1, "x"),
                         data_frame(1, std::string(kMaxLength + 1, 'x')),
                         syn_reply(0),
                         up,
                         dup,
                         nul,
                         pri,
                         rst_stream(1, 0),
                         rst_stream(0, 1),
                         ping(0),
                         window_update(1, 0),
                         window_update(1, kMaxStreamId + 1),
                         goaway(kMaxStreamId + 1, 0),
                         syn_reply(1, {{"big", std::string(kMaxLength / 2, 'x')}})};
    for (const auto &f : bad) {
        Status st = enc.encode(f, &out);
        ck_assert_msg(!st.ok(), "%s", describe(f).c_str());
        ck_assert_int_eq(static_cast<int>(st.error()), static_cast<int>(Error::InvalidArgument));
        ck_assert_uint_eq(out.size(), 0);
    }
    ck_assert(enc.encode(syn_reply(1, {{"streamtype", "error"}}), &out).ok());
    ck_assert(enc.encode(goaway(0, kGoAwayOk), &out).ok());
    ck_assert_sstr_eq(decode_all(out, 0), "SYN_REPLY 1 {streamtype=error}|GOAWAY 0 0|");
}
END_TEST

int main(void) {
    Suite *s = suite_create("spdy");
    TCase *tc = tcase_create("wire");
    tcase_add_test(tc, dictionary_is_spdy3s);
    tcase_add_loop_test(tc, recorded_kubectl_sessions, 0, TABLE_SIZE(kRecorded));
    tcase_add_test(tc, round_trip_every_frame_type);
    tcase_add_test(tc, peer_zlib_streams_decode);
    tcase_add_test(tc, header_values_split);
    tcase_add_test(tc, unknown_control_frames_are_skipped);
    tcase_add_test(tc, encoder_refuses_invalid_frames);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_set_timeout(tc, 60);  // the bomb test compresses 32 MiB
    tcase_add_test(tc, oversized_frames_fail_from_their_header);
    tcase_add_test(tc, zlib_bomb_is_refused);
    tcase_add_test(tc, header_count_is_bounded);
    tcase_add_loop_test(tc, malformed_frames_fail, 0, TABLE_SIZE(kBad));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
