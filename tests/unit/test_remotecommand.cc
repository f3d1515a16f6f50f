// agent/kubelet/streams/remotecommand: protocol negotiation, the error stream's
// metav1.Status, the resize stream's terminal sizes.
#include <string>
#include <vector>

#include "agent/kubelet/streams/remotecommand.h"
#include "common/daemons/json.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::remotecommand;

// ---- negotiation ----

struct OfferCase {
    std::vector<std::string_view> offered;
    std::vector<std::string_view> supported;
    const char *want;  // nullptr: none
};
const OfferCase kOffers[] = {
    // kubectl v1.28 exec over SPDY (X-Stream-Protocol-Version, one per line).
    {{"v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"},
     {kStreamProtocolV4},
     "v4.channel.k8s.io"},
    // kubectl v1.32's SPDY fallback offers v5 first: v4 is what SPDY speaks.
    {{"v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io"},
     {kStreamProtocolV4},
     "v4.channel.k8s.io"},
    // WebSocket: the client's order wins, lists split on commas.
    {{"v5.channel.k8s.io"}, {"v5.channel.k8s.io", "v4.channel.k8s.io"}, "v5.channel.k8s.io"},
    {{"v4.channel.k8s.io, v5.channel.k8s.io"},
     {"v5.channel.k8s.io", "v4.channel.k8s.io"},
     "v4.channel.k8s.io"},
    {{" ,base64.channel.k8s.io,\tv5.channel.k8s.io "},
     {"v5.channel.k8s.io", "v4.channel.k8s.io"},
     "v5.channel.k8s.io"},
    {{"portforward.k8s.io"}, {kPortForwardProtocol}, "portforward.k8s.io"},
    // kubectl v1.32's port-forward tunnel, and protocols we do not speak.
    {{"SPDY/3.1+portforward.k8s.io"}, {"v5.channel.k8s.io", "v4.channel.k8s.io"}, nullptr},
    {{"v3.channel.k8s.io", "channel.k8s.io"}, {kStreamProtocolV4}, nullptr},
    {{}, {kStreamProtocolV4}, nullptr},
    {{""}, {kStreamProtocolV4}, nullptr},
    {{"V4.CHANNEL.K8S.IO"}, {kStreamProtocolV4}, nullptr},
};

START_TEST(protocol_negotiation) {
    const OfferCase &o = kOffers[_i];
    auto got = choose_protocol(o.offered, o.supported);
    if (!o.want) {
        ck_assert_msg(!got, "case %d: %s", _i, got ? got->c_str() : "");
    } else {
        ck_assert_msg(got.has_value(), "case %d: none", _i);
        ck_assert_sstr_eq(*got, o.want);
    }
}
END_TEST

// ---- the error stream ----

START_TEST(status_documents) {
    // As Go's encoding/json writes metav1.Status (keys in another order).
    ck_assert_sstr_eq(status_success(), "{\"metadata\":{},\"status\":\"Success\"}");

    auto v = json::parse(status_exit_code(3));
    ck_assert(v.ok());
    ck_assert_sstr_eq((*v)["status"].asString(), "Failure");
    ck_assert_sstr_eq((*v)["reason"].asString(), "NonZeroExitCode");
    ck_assert_sstr_eq((*v)["message"].asString(),
                      "command terminated with non-zero exit code: exit status 3");
    ck_assert((*v)["metadata"].isObject() && (*v)["metadata"].empty());
    const Json::Value &causes = (*v)["details"]["causes"];
    ck_assert_uint_eq(causes.size(), 1);
    ck_assert_sstr_eq(causes[0]["reason"].asString(), "ExitCode");
    ck_assert_sstr_eq(causes[0]["message"].asString(), "3");
    ck_assert(!v->isMember("code") && !v->isMember("kind"));
    v = json::parse(status_exit_code(255));
    ck_assert(v.ok());
    ck_assert_sstr_eq((*v)["details"]["causes"][0]["message"].asString(), "255");

    v = json::parse(status_internal_error("exec: \"nope\": executable file not found in $PATH"));
    ck_assert(v.ok());
    ck_assert_sstr_eq((*v)["status"].asString(), "Failure");
    ck_assert_sstr_eq((*v)["reason"].asString(), "InternalError");
    ck_assert_int_eq((*v)["code"].asInt(), 500);
    ck_assert_sstr_eq(
        (*v)["message"].asString(),
        "Internal error occurred: exec: \"nope\": executable file not found in $PATH");
    ck_assert_sstr_eq((*v)["details"]["causes"][0]["message"].asString(),
                      "exec: \"nope\": executable file not found in $PATH");
    ck_assert(!(*v)["details"]["causes"][0].isMember("reason"));

    v = json::parse(status_http_error(400, "BadRequest", "container c is not running"));
    ck_assert(v.ok());
    ck_assert_sstr_eq((*v)["kind"].asString(), "Status");
    ck_assert_sstr_eq((*v)["apiVersion"].asString(), "v1");
    ck_assert_sstr_eq((*v)["status"].asString(), "Failure");
    ck_assert_sstr_eq((*v)["reason"].asString(), "BadRequest");
    ck_assert_sstr_eq((*v)["message"].asString(), "container c is not running");
    ck_assert_int_eq((*v)["code"].asInt(), 400);
}
END_TEST

// ---- the resize stream ----

struct SizeCase {
    const char *json;
    int width, height;  // -1: invalid
};
const SizeCase kSizes[] = {
    {"{\"Width\":100,\"Height\":30}", 100, 30},
    {" { \"Height\" : 24 , \"Width\" : 80 } ", 80, 24},
    {"{\"width\":1,\"height\":2}", 1, 2},
    {"{\"WIDTH\":0,\"HEIGHT\":65535,\"extra\":[1]}", 0, 65535},
    {"{\"Width\":100}", -1, -1},
    {"{\"Width\":-1,\"Height\":30}", -1, -1},
    {"{\"Width\":65536,\"Height\":30}", -1, -1},
    {"{\"Width\":80.0,\"Height\":30}", -1, -1},
    {"{\"Width\":\"80\",\"Height\":30}", -1, -1},
    {"{\"Width\":80,\"width\":81,\"Height\":30}", -1, -1},
    {"{\"Width\":80,\"Height\":30}x", -1, -1},
    {"[80,30]", -1, -1},
    {"", -1, -1},
};

START_TEST(terminal_sizes) {
    const SizeCase &c = kSizes[_i];
    auto r = parse_terminal_size(c.json);
    if (c.width < 0) {
        ck_assert_msg(!r.ok(), "%s", c.json);
        ck_assert(r.message().rfind("resize: ", 0) == 0);
    } else {
        ck_assert_msg(r.ok(), "%s: %s", c.json, r.ok() ? "" : r.message().c_str());
        ck_assert_int_eq(r->width, c.width);
        ck_assert_int_eq(r->height, c.height);
    }
}
END_TEST

std::string sizes(const std::vector<TerminalSize> &v) {
    std::string s;
    for (const auto &t : v)
        s += std::to_string(t.width) + "x" + std::to_string(t.height) + " ";
    return s;
}

START_TEST(resize_stream_split_anywhere) {
    // What client-go writes on the SPDY resize stream, split at every byte.
    const std::string stream =
        "{\"Width\":100,\"Height\":30}\n{\"Width\":120,\"Height\":40}\n\n{\"Width\":1,";
    for (size_t chunk = 1; chunk <= stream.size(); chunk++) {
        ResizeDecoder d;
        std::vector<TerminalSize> out;
        for (size_t i = 0; i < stream.size(); i += chunk)
            ck_assert(d.feed(std::string_view(stream).substr(i, chunk), &out).ok());
        ck_assert_sstr_eq(sizes(out), "100x30 120x40 ");
        ck_assert(d.feed("\"Height\":2}\r\n", &out).ok());
        ck_assert_sstr_eq(sizes(out), "100x30 120x40 1x2 ");
    }
}
END_TEST

// WebSocket: one document per message, with or without the newline.
START_TEST(resize_messages) {
    ResizeDecoder d;
    std::vector<TerminalSize> out;
    ck_assert(d.feed("{\"Width\":100,\"Height\":30}\n", &out).ok());
    ck_assert(d.end_message(&out).ok());
    ck_assert(d.feed("{\"Width\":80,\"Height\":24}", &out).ok());
    ck_assert_sstr_eq(sizes(out), "100x30 ");
    ck_assert(d.end_message(&out).ok());
    ck_assert(d.end_message(&out).ok());  // nothing pending: nothing
    ck_assert_sstr_eq(sizes(out), "100x30 80x24 ");
}
END_TEST

START_TEST(resize_failures_are_sticky) {
    ResizeDecoder d;
    std::vector<TerminalSize> out;
    Status st = d.feed("{\"Width\":\"x\"}\n{\"Width\":1,\"Height\":1}\n", &out);
    ck_assert(!st.ok());
    ck_assert_int_eq(static_cast<int>(st.error()), static_cast<int>(Error::Parse));
    ck_assert(!d.feed("{\"Width\":1,\"Height\":1}\n", &out).ok());
    ck_assert(!d.end_message(&out).ok());
    ck_assert_uint_eq(out.size(), 0);

    // A document that never ends is refused at kMaxDocument bytes.
    ResizeDecoder big;
    std::string pad(ResizeDecoder::kMaxDocument, ' ');
    ck_assert(big.feed(pad, &out).ok());
    st = big.feed(" ", &out);
    ck_assert(!st.ok());
    ck_assert_int_eq(static_cast<int>(st.error()), static_cast<int>(Error::TooLarge));
    ck_assert(!big.feed("\n", &out).ok());
}
END_TEST

int main(void) {
    Suite *s = suite_create("remotecommand");
    TCase *tc = tcase_create("remotecommand");
    tcase_add_loop_test(tc, protocol_negotiation, 0, TABLE_SIZE(kOffers));
    tcase_add_test(tc, status_documents);
    tcase_add_loop_test(tc, terminal_sizes, 0, TABLE_SIZE(kSizes));
    tcase_add_test(tc, resize_stream_split_anywhere);
    tcase_add_test(tc, resize_messages);
    tcase_add_test(tc, resize_failures_are_sticky);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
