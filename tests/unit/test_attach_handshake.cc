// k8s-shim/attach_handshake: the exec_attach line a session's data
// connection starts with, and the agent's reply read in pieces: accepted
// with the frames behind it, refused with the agent's error, a reply that
// is not one, and one that never ends (bounded).
#include <string>

#include "common/daemons/protocol.h"
#include "k8s-shim/attach_handshake.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

START_TEST(request_names_the_session) {
    AttachHandshake h("s-1234");
    std::string line = h.request();
    ck_assert(!line.empty() && line.back() == '\n');
    auto r = proto::decode_request(line.substr(0, line.size() - 1));
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    const std::string op = r->op, session = r->body["session"].asString();
    ck_assert_str_eq(op.c_str(), "exec_attach");
    ck_assert_str_eq(session.c_str(), "s-1234");
}
END_TEST

START_TEST(accepted_in_pieces_with_frames_behind) {
    AttachHandshake h("s");
    proto::Reply ok;
    ok.id = 1;
    std::string reply = proto::encode(ok);
    // The reply split in two reads, the second carrying frame bytes too.
    size_t half = reply.size() / 2;
    auto s1 = h.feed(reply.substr(0, half));
    ck_assert(s1.state == AttachHandshake::State::Pending);
    std::string second = reply.substr(half) + "FRAMES";
    auto s2 = h.feed(second);
    ck_assert(s2.state == AttachHandshake::State::Accepted);
    const std::string rest(s2.rest);
    ck_assert_str_eq(rest.c_str(), "FRAMES");
}
END_TEST

START_TEST(refused_with_the_agents_error) {
    AttachHandshake h("s");
    std::string reply =
        proto::encode(proto::error_reply(1, Failure{Error::NotFound, "no exec session 's' waits"}));
    auto s = h.feed(reply);
    ck_assert(s.state == AttachHandshake::State::Refused);
    ck_assert_int_eq(static_cast<int>(s.why.error()), static_cast<int>(Error::NotFound));
    ck_assert_msg(s.why.message().find("exec_attach refused: no exec session") == 0, "%s",
                  s.why.message().c_str());
}
END_TEST

START_TEST(garbage_reply_refused) {
    AttachHandshake h("s");
    auto s = h.feed("not json\n");
    ck_assert(s.state == AttachHandshake::State::Refused);
    ck_assert_int_eq(static_cast<int>(s.why.error()), static_cast<int>(Error::Parse));
}
END_TEST

START_TEST(endless_reply_bounded) {
    AttachHandshake h("s");
    std::string chunk(4096, 'x');
    AttachHandshake::Step s;
    size_t fed = 0;
    while (s.state == AttachHandshake::State::Pending &&
           fed <= 2 * AttachHandshake::kMaxReplyBytes) {
        s = h.feed(chunk);
        fed += chunk.size();
    }
    ck_assert(s.state == AttachHandshake::State::Refused);
    ck_assert_uint_le(fed, AttachHandshake::kMaxReplyBytes + chunk.size());
    ck_assert_msg(s.why.message().find("too long") != std::string::npos, "%s",
                  s.why.message().c_str());
    ck_assert_msg(h.closed_early("exec").message().find("exec session") != std::string::npos, "%s",
                  h.closed_early("exec").message().c_str());
}
END_TEST

int main() {
    Suite *s = suite_create("attach_handshake");
    TCase *tc = tcase_create("attach_handshake");
    tcase_add_test(tc, request_names_the_session);
    tcase_add_test(tc, accepted_in_pieces_with_frames_behind);
    tcase_add_test(tc, refused_with_the_agents_error);
    tcase_add_test(tc, garbage_reply_refused);
    tcase_add_test(tc, endless_reply_bounded);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
