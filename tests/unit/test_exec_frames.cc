// common/daemons/exec_frames.h: the exec session data connection's frames.
#include <string>
#include <vector>

#include "common/daemons/exec_frames.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::proto;

// Every split of a stream of frames decodes to the same frames.
START_TEST(round_trip_under_every_split) {
    std::string big(kMaxExecFramePayload, 'x');
    big[0] = '\0';
    std::vector<std::pair<ExecChannel, std::string>> sent = {
        {ExecChannel::Stdout, "hello\n"},
        {ExecChannel::Stderr, ""},
        {ExecChannel::Stdout, big},
        {ExecChannel::Exit, exit_payload(3)},
    };
    std::string wire;
    for (const auto &[ch, p] : sent)
        wire += encode_exec_frame(ch, p);
    ck_assert_uint_eq(wire.size(), 4 * kExecFrameHeader + 6 + big.size() + exit_payload(3).size());
    for (size_t step : {size_t{1}, size_t{2}, size_t{5}, size_t{7}, size_t{4096}, wire.size()}) {
        ExecFrameDecoder d(ExecDirection::ToAgent);
        std::vector<ExecFrame> got;
        for (size_t i = 0; i < wire.size(); i += step)
            ck_assert(d.feed(std::string_view(wire).substr(i, step), &got).ok());
        ck_assert_uint_eq(got.size(), sent.size());
        for (size_t i = 0; i < got.size() && i < sent.size(); i++) {
            ck_assert(got[i].channel == sent[i].first);
            ck_assert(got[i].payload == sent[i].second);
        }
    }
}
END_TEST

// The header: channel byte, then the length big-endian.
START_TEST(layout) {
    std::string f = encode_exec_frame(ExecChannel::Resize, std::string(0x0102, 'r'));
    ck_assert_uint_eq(static_cast<unsigned char>(f[0]), 4);
    ck_assert_uint_eq(static_cast<unsigned char>(f[1]), 0);
    ck_assert_uint_eq(static_cast<unsigned char>(f[2]), 0);
    ck_assert_uint_eq(static_cast<unsigned char>(f[3]), 1);
    ck_assert_uint_eq(static_cast<unsigned char>(f[4]), 2);
    ck_assert_uint_eq(static_cast<unsigned char>(encode_exec_frame(ExecChannel::Close, "")[0]),
                      255);
}
END_TEST

// A channel the direction does not carry, or a payload over the bound: a
// failure naming it, and the decoder stays failed.
START_TEST(refusals) {
    struct Case {
        ExecDirection dir;
        std::string bytes;
        const char *has;
    } cases[] = {
        {ExecDirection::ToShim, encode_exec_frame(ExecChannel::Stdout, "x"),
         "channel 1 is not sent to the shim"},
        {ExecDirection::ToShim, encode_exec_frame(ExecChannel::Exit, "{}"),
         "channel 3 is not sent to the shim"},
        {ExecDirection::ToAgent, encode_exec_frame(ExecChannel::Stdin, "x"),
         "channel 0 is not sent to the agent"},
        {ExecDirection::ToAgent, encode_exec_frame(ExecChannel::Resize, "{}"),
         "channel 4 is not sent to the agent"},
        {ExecDirection::ToAgent, std::string("\x07\0\0\0\0", 5), "channel 7"},
        {ExecDirection::ToShim, std::string("\x00\x00\x01\x00\x01", 5),
         "payload of 65537 bytes is over 65536"},
        {ExecDirection::ToShim, std::string("\x00\xff\xff\xff\xff", 5), "payload of 4294967295"},
    };
    for (const auto &c : cases) {
        ExecFrameDecoder d(c.dir);
        std::vector<ExecFrame> got;
        Status st = d.feed(c.bytes, &got);
        ck_assert_msg(!st.ok() && st.error() == Error::Parse, "%s accepted", c.has);
        ck_assert_msg(st.message().find(c.has) != std::string::npos, "'%s' lacks '%s'",
                      st.message().c_str(), c.has);
        ck_assert(got.empty());
        // Failed for good: a valid frame after it is not taken.
        ck_assert(!d.feed(encode_exec_frame(ExecChannel::Stdin, "x"), &got).ok());
        ck_assert(got.empty());
    }
    // A header alone (the length not yet known complete) waits.
    ExecFrameDecoder d(ExecDirection::ToShim);
    std::vector<ExecFrame> got;
    ck_assert(d.feed(std::string("\x00\x00\x00", 3), &got).ok() && got.empty());
    ck_assert(d.feed(std::string("\x00\x02", 2) + "a", &got).ok() && got.empty());
    ck_assert(d.feed("b", &got).ok() && got.size() == 1 && got[0].payload == "ab");
}
END_TEST

START_TEST(payloads) {
    ck_assert_sstr_eq(exit_payload(0), R"({"exit_code":0})");
    ck_assert_sstr_eq(exit_error_payload("no"), R"({"error":"no"})");
    auto t = resize_from_payload("{\"Width\":80,\"Height\":24}\n");  // kubectl's, newline and all
    ck_assert(t.ok() && t->width == 80 && t->height == 24);
    ck_assert(resize_from_payload(R"({"Width":0,"Height":65535,"x":1})").ok());
    for (const char *bad : {"", "[]", R"({"Width":80})", R"({"Width":-1,"Height":2})",
                            R"({"Width":65536,"Height":2})", R"({"Width":"80","Height":2})",
                            R"({"Width":1.5,"Height":2})"}) {
        auto r = resize_from_payload(bad);
        ck_assert_msg(!r.ok() && r.error() == Error::Parse, "%s accepted", bad);
    }
}
END_TEST

int main() {
    Suite *s = suite_create("exec_frames");
    TCase *tc = tcase_create("frames");
    tcase_add_test(tc, round_trip_under_every_split);
    tcase_add_test(tc, layout);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, payloads);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
