// agent/kubelet/streams/ws_channel: the WebSocket handshake key, client frames, server
// frames and the channel byte, against RFC 6455's examples, what kubectl
// sends and hostile input.
#include <cstdio>
#include <string>
#include <vector>

#include "agent/kubelet/streams/ws_channel.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::ws;

namespace {

std::string unhex(const std::string &hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

std::string escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        auto u = static_cast<unsigned char>(c);
        if (c == '\n') {
            out += "\\n";
        } else if (u < 0x20 || u >= 0x7f) {
            char b[8];
            snprintf(b, sizeof b, "\\x%02x", u);
            out += b;
        } else {
            out += c;
        }
    }
    return out;
}

std::string describe(const std::vector<Message> &msgs) {
    std::string s;
    for (const auto &m : msgs) {
        switch (m.opcode) {
            case Opcode::Text:
                s += "text";
                break;
            case Opcode::Binary:
                s += "bin";
                break;
            case Opcode::Ping:
                s += "ping";
                break;
            case Opcode::Pong:
                s += "pong";
                break;
            case Opcode::Close:
                s += "close " + std::to_string(m.close_code);
                break;
            case Opcode::Continuation:
                s += "cont";
                break;
        }
        s += " '" + escape(m.payload) + "'|";
    }
    return s;
}

std::string decode_all(const std::string &wire, size_t chunk, Limits limits = {},
                       uint16_t *close_code = nullptr) {
    FrameDecoder d(limits);
    std::vector<Message> msgs;
    size_t step = chunk ? chunk : wire.size();
    for (size_t i = 0; i < wire.size(); i += step) {
        Status st = d.feed(std::string_view(wire).substr(i, step), &msgs);
        if (!st) {
            if (close_code) *close_code = d.close_code();
            return describe(msgs) + "ERROR " + st.failure().describe();
        }
    }
    return describe(msgs);
}

// A client frame: masked with `key`, the length in its shortest form unless
// `len_bytes` forces 2 or 8.
std::string client_frame(uint8_t first, const std::string &payload, uint32_t key = 0x37fa213d,
                         int len_bytes = 0) {
    std::string s;
    s.push_back(static_cast<char>(first));
    size_t n = payload.size();
    if (len_bytes == 0) len_bytes = n < 126 ? 0 : n <= 0xffff ? 2 : 8;
    if (len_bytes == 0) {
        s.push_back(static_cast<char>(0x80 | n));
    } else if (len_bytes == 2) {
        s.push_back(static_cast<char>(0x80 | 126));
        s.push_back(static_cast<char>(n >> 8));
        s.push_back(static_cast<char>(n));
    } else {
        s.push_back(static_cast<char>(0x80 | 127));
        for (int shift = 56; shift >= 0; shift -= 8)
            s.push_back(static_cast<char>(static_cast<uint64_t>(n) >> shift));
    }
    const char mask[4] = {static_cast<char>(key >> 24), static_cast<char>(key >> 16),
                          static_cast<char>(key >> 8), static_cast<char>(key)};
    s.append(mask, 4);
    for (size_t i = 0; i < n; i++)
        s.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
    return s;
}

// Recorded from kubectl v1.32.5 (v5.channel.k8s.io):
// `echo hello | kubectl exec -i p -- ...`: stdin's data, the close of stdin
// ([255, 0]) at its end of file, kubectl's answer to the server's Close.
const char *const kExecInput = "8287ebcd1bb6eba57eda87a2118282d954685126548882fcf77105ff1f";
// `kubectl exec -it p -- sh` in a 100x30 terminal: the size on the resize
// channel, then kubectl's answer to the server's Close.
const char *const kExecTty =
    "829b390c7a913d7758c650680ef91b364ba1092058d95c651df94d2e40a209717088829139d38192d1";

}  // namespace

// ---- handshake ----

START_TEST(accept_key_rfc6455_example) {
    auto k = accept_key("dGhlIHNhbXBsZSBub25jZQ==");
    ck_assert(k.ok());
    ck_assert_sstr_eq(*k, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    for (const char *bad : {"", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZQ==x",
                            "dGhlIHNhbXBsZSBub25j", "dGhlIHNhbXBsZSBub25jZQ=\n"}) {
        auto r = accept_key(bad);
        ck_assert_msg(!r.ok(), "'%s'", bad);
        ck_assert_int_eq(static_cast<int>(r.error()), static_cast<int>(Error::Invalid));
    }
}
END_TEST

// ---- client frames ----

struct GoodWs {
    const char *name;
    std::string (*wire)();
    const char *messages;
};
const GoodWs kGood[] = {
    // RFC 6455 5.7.
    {"masked Hello", [] { return unhex("818537fa213d7f9f4d5158"); }, "text 'Hello'|"},
    {"fragmented Hello",
     [] { return client_frame(0x01, "Hel", 0x01020304) + client_frame(0x80, "lo", 0xa0b0c0d0); },
     "text 'Hello'|"},
    {"masked ping Hello", [] { return client_frame(0x89, "Hello"); }, "ping 'Hello'|"},
    {"pong", [] { return client_frame(0x8a, ""); }, "pong ''|"},
    {"ping inside a fragmented message",
     [] {
         return client_frame(0x02, "ab") + client_frame(0x89, "p") + client_frame(0x00, "c") +
                client_frame(0x80, "d");
     },
     "ping 'p'|bin 'abcd'|"},
    {"empty binary", [] { return client_frame(0x82, ""); }, "bin ''|"},
    {"16-bit length", [] { return client_frame(0x82, std::string(126, 'x')); }, nullptr},
    {"64-bit length", [] { return client_frame(0x82, std::string(65536, 'y')); }, nullptr},
    {"close without a code", [] { return client_frame(0x88, ""); }, "close 1005 ''|"},
    {"close with a reason",
     [] {
         return client_frame(0x88,
                             "\x03\xe8"
                             "bye");
     },
     "close 1000 'bye'|"},
    {"close 4000", [] { return client_frame(0x88, "\x0f\xa0"); }, "close 4000 ''|"},
    {"UTF-8 text", [] { return client_frame(0x81, "gr\xc3\xbc\xc3\x9f \xf0\x9f\x98\x80"); },
     "text 'gr\\xc3\\xbc\\xc3\\x9f \\xf0\\x9f\\x98\\x80'|"},
    // A character split across fragments is checked on the whole message.
    {"UTF-8 split across fragments",
     [] { return client_frame(0x01, "\xc3") + client_frame(0x80, "\xbc"); }, "text '\\xc3\\xbc'|"},
    // kubectl v1.32.5.
    {"kubectl exec -i", [] { return unhex(kExecInput); },
     "bin '\\x00hello\\n'|bin '\\xff\\x00'|close 1000 ''|"},
    {"kubectl exec -it", [] { return unhex(kExecTty); },
     "bin '\\x04{\"Width\":100,\"Height\":30}\\n'|close 1000 ''|"},
};

START_TEST(client_frames_decode) {
    const GoodWs &g = kGood[_i];
    std::string wire = g.wire();
    std::string want = g.messages ? g.messages : decode_all(wire, 0);
    ck_assert_msg(want.find("ERROR") == std::string::npos, "%s: %s", g.name, want.c_str());
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{127}}) {
        std::string got = decode_all(wire, chunk);
        ck_assert_msg(got == want, "%s (chunk %zu): %s", g.name, chunk, got.c_str());
    }
}
END_TEST

START_TEST(long_payloads_unmask) {
    std::string payload;
    for (int i = 0; i < 70000; i++)
        payload.push_back(static_cast<char>(i * 7));
    FrameDecoder d;
    std::vector<Message> msgs;
    ck_assert(d.feed(client_frame(0x82, payload, 0xdeadbeef), &msgs).ok());
    ck_assert_uint_eq(msgs.size(), 1);
    ck_assert(msgs[0].payload == payload);
}
END_TEST

struct BadWs {
    const char *name;
    std::string (*wire)();
    uint16_t close;
    const char *error;
};
const BadWs kBad[] = {
    {"unmasked", [] { return unhex("810548656c6c6f"); }, kCloseProtocolError, "unmasked"},
    {"RSV1", [] { return client_frame(0xc1, "x"); }, kCloseProtocolError, "reserved bits"},
    {"opcode 3", [] { return client_frame(0x83, "x"); }, kCloseProtocolError, "unknown opcode 3"},
    {"opcode 11", [] { return client_frame(0x8b, ""); }, kCloseProtocolError, "unknown opcode"},
    {"fragmented ping", [] { return client_frame(0x09, "x"); }, kCloseProtocolError,
     "control frame"},
    {"126-byte ping", [] { return client_frame(0x89, std::string(126, 'p')); }, kCloseProtocolError,
     "control frame"},
    {"continuation first", [] { return client_frame(0x80, "x"); }, kCloseProtocolError,
     "continuation outside a message"},
    {"message inside a message", [] { return client_frame(0x01, "a") + client_frame(0x81, "b"); },
     kCloseProtocolError, "new message inside"},
    {"16-bit length of 125", [] { return client_frame(0x82, std::string(125, 'x'), 1, 2); },
     kCloseProtocolError, "non-minimal length"},
    {"64-bit length of 65535", [] { return client_frame(0x82, std::string(65535, 'x'), 1, 8); },
     kCloseProtocolError, "non-minimal length"},
    {"64-bit length with its top bit",
     [] { return unhex("82ff8000000000000000") + std::string(4, 'k'); }, kCloseProtocolError,
     "64-bit length"},
    {"text not UTF-8", [] { return client_frame(0x81, "\xc0\xaf"); }, kCloseInvalidData,
     "not UTF-8"},
    {"text ending mid-character", [] { return client_frame(0x81, "a\xe2\x82"); }, kCloseInvalidData,
     "not UTF-8"},
    {"1-byte close", [] { return client_frame(0x88, "\x03"); }, kCloseProtocolError,
     "1-byte Close"},
    {"close 1005", [] { return client_frame(0x88, "\x03\xed"); }, kCloseProtocolError,
     "Close code 1005"},
    {"close 999", [] { return client_frame(0x88, "\x03\xe7"); }, kCloseProtocolError,
     "Close code 999"},
    {"close 5000", [] { return client_frame(0x88, "\x13\x88"); }, kCloseProtocolError,
     "Close code 5000"},
    {"close reason not UTF-8", [] { return client_frame(0x88, "\x03\xe8\xff"); }, kCloseInvalidData,
     "Close reason"},
    {"frame after close", [] { return client_frame(0x88, "") + client_frame(0x82, "x"); },
     kCloseProtocolError, "after the Close"},
};

START_TEST(bad_client_frames_fail) {
    const BadWs &b = kBad[_i];
    std::string wire = b.wire();
    for (size_t chunk : {size_t{0}, size_t{1}}) {
        uint16_t code = 0;
        std::string got = decode_all(wire + client_frame(0x89, "after"), chunk, {}, &code);
        ck_assert_msg(got.find("ERROR parse: websocket: ") != std::string::npos &&
                          got.find(b.error) != std::string::npos,
                      "%s: %s", b.name, got.c_str());
        ck_assert_msg(got.find("ping 'after'") == std::string::npos, "%s: %s", b.name, got.c_str());
        ck_assert_uint_eq(code, b.close);
    }
}
END_TEST

START_TEST(limits_fail_from_the_header) {
    Limits lim;
    lim.max_frame_payload = 1000;
    lim.max_message = 1500;
    // A frame announcing 2^40 bytes: refused once its 14 header bytes are in.
    FrameDecoder d(lim);
    std::vector<Message> msgs;
    Status st = d.feed(unhex("82ff000001000000000001020304"), &msgs);
    ck_assert(!st.ok());
    ck_assert_int_eq(static_cast<int>(st.error()), static_cast<int>(Error::TooLarge));
    ck_assert_uint_eq(d.close_code(), kCloseTooBig);
    ck_assert(!d.feed(client_frame(0x82, "x"), &msgs).ok());  // sticky
    ck_assert_uint_eq(msgs.size(), 0);
    // At the frame limit: fine; one more byte: refused.
    ck_assert_sstr_eq(decode_all(client_frame(0x82, std::string(1000, 'a')), 7, lim).substr(0, 5),
                      "bin '");
    uint16_t code = 0;
    std::string got = decode_all(client_frame(0x82, std::string(1001, 'a')), 0, lim, &code);
    ck_assert_msg(got.find("ERROR too_large: websocket: a frame of 1001 bytes") == 0, "%s",
                  got.c_str());
    ck_assert_uint_eq(code, kCloseTooBig);
    // Fragments that add up past the message limit.
    got = decode_all(
        client_frame(0x02, std::string(800, 'a')) + client_frame(0x80, std::string(800, 'b')), 0,
        lim, &code);
    ck_assert_msg(got.find("ERROR too_large: websocket: a message over the limit") == 0, "%s",
                  got.c_str());
}
END_TEST

START_TEST(utf8_validation) {
    const char *ok[] = {"",
                        "plain",
                        "\xc2\x80",
                        "\xdf\xbf",
                        "\xe0\xa0\x80",
                        "\xef\xbf\xbf",
                        "\xf0\x90\x80\x80",
                        "\xf4\x8f\xbf\xbf"};
    const char *bad[] = {"\x80",
                         "\xc0\x80",
                         "\xc1\xbf",
                         "\xe0\x9f\xbf",
                         "\xed\xa0\x80",
                         "\xed\xbf\xbf",
                         "\xf0\x8f\xbf\xbf",
                         "\xf4\x90\x80\x80",
                         "\xf8\x88\x80\x80\x80",
                         "\xe2\x82",
                         "\xc3\x28"};
    for (const char *s : ok)
        ck_assert_msg(valid_utf8(s), "%s", escape(s).c_str());
    for (const char *s : bad)
        ck_assert_msg(!valid_utf8(s), "%s", escape(s).c_str());
}
END_TEST

// ---- server frames ----

START_TEST(server_frames_encode) {
    ck_assert_sstr_eq(encode_frame(Opcode::Text, "Hello"), unhex("810548656c6c6f"));
    ck_assert_sstr_eq(encode_frame(Opcode::Text, "Hel", false), unhex("010348656c"));
    ck_assert_sstr_eq(encode_frame(Opcode::Continuation, "lo"), unhex("80026c6f"));
    ck_assert_sstr_eq(encode_frame(Opcode::Pong, "Hello"), unhex("8a0548656c6c6f"));
    std::string f = encode_frame(Opcode::Binary, std::string(256, 'z'));
    ck_assert_sstr_eq(f.substr(0, 4), unhex("827e0100"));
    ck_assert_uint_eq(f.size(), 260);
    f = encode_frame(Opcode::Binary, std::string(65536, 'z'));
    ck_assert_sstr_eq(f.substr(0, 10), unhex("827f0000000000010000"));
    ck_assert_uint_eq(f.size(), 65546);
    ck_assert_sstr_eq(encode_frame(Opcode::Binary, std::string(125, 'z')).substr(0, 2),
                      unhex("827d"));
    ck_assert_sstr_eq(encode_close(kCloseNormal, ""), unhex("880203e8"));
    ck_assert_sstr_eq(encode_close(kCloseTooBig, "big"), unhex("880503f1626967"));
}
END_TEST

// A long reason is cut to fit 125 bytes, never inside a character.
START_TEST(close_reason_is_cut_at_a_character) {
    std::string reason;
    for (int i = 0; i < 100; i++)
        reason += "\xc3\xa9";  // é
    std::string f = encode_close(kCloseInternalError, reason);
    ck_assert_uint_eq(static_cast<unsigned char>(f[1]), 124);  // 2 + 61 whole characters
    ck_assert(valid_utf8(f.substr(4)));
    f = encode_close(kCloseInternalError, "a" + reason);
    ck_assert_uint_eq(static_cast<unsigned char>(f[1]), 125);
    ck_assert(valid_utf8(f.substr(4)));
}
END_TEST

// ---- channels ----

START_TEST(channel_protocol_names) {
    ck_assert(channel_protocol("v4.channel.k8s.io") == ChannelProtocol::V4);
    ck_assert(channel_protocol("v5.channel.k8s.io") == ChannelProtocol::V5);
    ck_assert(!channel_protocol("channel.k8s.io"));
    ck_assert(!channel_protocol("base64.channel.k8s.io"));
    ck_assert(!channel_protocol("SPDY/3.1+portforward.k8s.io"));
}
END_TEST

struct ChanCase {
    ChannelProtocol protocol;
    const char *payload;
    size_t payload_len;
    unsigned channels;
    const char *want;  // "data C 'x'", "close C", "empty", or "ERROR ..."
};
const ChanCase kChan[] = {
    {ChannelProtocol::V4, "\x00hi", 3, kExecChannels, "data 0 'hi'"},
    {ChannelProtocol::V4, "\x01", 1, kExecChannels, "data 1 ''"},
    {ChannelProtocol::V5, "\x04{}", 3, kExecChannels, "data 4 '{}'"},
    {ChannelProtocol::V4, "", 0, kExecChannels, "empty"},
    {ChannelProtocol::V5, "\xff\x00", 2, kExecChannels, "close 0"},
    {ChannelProtocol::V5, "\xff\x04", 2, kExecChannels, "close 4"},
    {ChannelProtocol::V5, "\xff\x05", 2, kExecChannels, "ERROR"},
    {ChannelProtocol::V5, "\xff", 1, kExecChannels, "ERROR"},
    {ChannelProtocol::V5, "\xff\x00\x01", 3, kExecChannels, "ERROR"},
    {ChannelProtocol::V4, "\xff\x00", 2, kExecChannels, "ERROR"},
    {ChannelProtocol::V4, "\x05x", 2, kExecChannels, "ERROR"},
    // port-forward with two ports: channels 0..3.
    {ChannelProtocol::V4, "\x03oops", 5, 4, "data 3 'oops'"},
    {ChannelProtocol::V4, "\x04x", 2, 4, "ERROR"},
};

START_TEST(channel_messages) {
    const ChanCase &c = kChan[_i];
    auto r =
        parse_channel_message(c.protocol, std::string_view(c.payload, c.payload_len), c.channels);
    std::string got;
    if (!r) {
        got = "ERROR";
        ck_assert(!r.message().empty());
    } else if (r->kind == ChannelMessage::Kind::Data) {
        got = "data " + std::to_string(r->channel) + " '" + std::string(r->data) + "'";
    } else if (r->kind == ChannelMessage::Kind::CloseStream) {
        got = "close " + std::to_string(r->channel);
    } else {
        got = "empty";
    }
    ck_assert_msg(got == c.want, "case %d: %s", _i, got.c_str());
}
END_TEST

START_TEST(channel_frames_encode) {
    ck_assert_sstr_eq(encode_channel_data(kChannelStdout, "hi\n"), unhex("82040168690a"));
    ck_assert_sstr_eq(encode_channel_data(kChannelError, ""), unhex("820103"));
    ck_assert_sstr_eq(encode_channel_close(kChannelStdout), unhex("8202ff01"));
    std::string big = encode_channel_data(kChannelStderr, std::string(125, 'e'));
    ck_assert_sstr_eq(big.substr(0, 5), unhex("827e007e02"));
    ck_assert_uint_eq(big.size(), 4 + 126);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ws_channel");
    TCase *tc = tcase_create("frames");
    tcase_add_test(tc, accept_key_rfc6455_example);
    tcase_add_loop_test(tc, client_frames_decode, 0, TABLE_SIZE(kGood));
    tcase_add_test(tc, long_payloads_unmask);
    tcase_add_loop_test(tc, bad_client_frames_fail, 0, TABLE_SIZE(kBad));
    tcase_add_test(tc, limits_fail_from_the_header);
    tcase_add_test(tc, utf8_validation);
    tcase_add_test(tc, server_frames_encode);
    tcase_add_test(tc, close_reason_is_cut_at_a_character);
    suite_add_tcase(s, tc);
    tc = tcase_create("channels");
    tcase_add_test(tc, channel_protocol_names);
    tcase_add_loop_test(tc, channel_messages, 0, TABLE_SIZE(kChan));
    tcase_add_test(tc, channel_frames_encode);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
