// Agent socket protocol decoder: what the agent does with a line from any
// local process (and a shim or the plugin with the agent's replies). The
// input is one line. Properties beyond "no crash, no UB, no leak":
// - encode() of anything decoded is one line that decodes to the same thing;
// - every typed body decoder accepts what its to_json() wrote from a value it
//   decoded (the agent's reply to a request it accepted is readable).
#include <string>

#include "common/json.h"
#include "common/protocol.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;
using namespace sk::proto;

void check_one_line(const std::string &line) {
    FUZZ_CHECK(!line.empty() && line.back() == '\n');
    FUZZ_CHECK(line.find('\n') == line.size() - 1);
}

// decode(body) ok -> decode(to_json(decoded)) ok with the same encoding.
template <typename T, typename Decode>
void typed_round_trip(const Json::Value &body, Decode decode) {
    Result<T> first = decode(body);
    if (!first) {
        FUZZ_CHECK(!first.message().empty());  // a refusal always says why
        return;
    }
    Json::Value again = to_json(*first);
    Result<T> second = decode(again);
    FUZZ_CHECK(second.ok());
    FUZZ_CHECK(to_json(*second) == again);
}

void all_bodies(const Json::Value &body) {
    typed_round_trip<RegisterRequest>(body, register_from_json);
    typed_round_trip<RegisterReply>(body, register_reply_from_json);
    typed_round_trip<DeregisterRequest>(body, deregister_from_json);
    typed_round_trip<DeregisterReply>(body, deregister_reply_from_json);
    typed_round_trip<JobKey>(body,
                             [](const Json::Value &v) { return job_key_from_json(v, "status"); });
    typed_round_trip<NodeState>(body, node_state_from_json);
    typed_round_trip<AttachRequest>(body, attach_from_json);
    typed_round_trip<AttachReply>(body, attach_reply_from_json);
    // "list" replies carry {"nodes":[NodeState...]}.
    if (body.isObject() && body.isMember("nodes") && body["nodes"].isArray())
        for (const auto &n : body["nodes"])
            typed_round_trip<NodeState>(n, node_state_from_json);
}

void request(std::string_view line) {
    auto r = decode_request(line);
    if (!r) {
        FUZZ_CHECK(!r.message().empty());
        return;
    }
    std::string enc = encode(*r);
    check_one_line(enc);
    auto back = decode_request(std::string_view(enc).substr(0, enc.size() - 1));
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->id == r->id && back->op == r->op && back->body == r->body);
    all_bodies(r->body);
}

void reply(std::string_view line) {
    auto r = decode_reply(line);
    if (!r) {
        FUZZ_CHECK(!r.message().empty());
        return;
    }
    std::string enc = encode(*r);
    check_one_line(enc);
    auto back = decode_reply(std::string_view(enc).substr(0, enc.size() - 1));
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->id == r->id && back->ok == r->ok && back->error == r->error &&
               back->message == r->message && back->body == r->body);
    if (r->ok) all_bodies(r->body);
}

}  // namespace

SK_FUZZ_TARGET(protocol) {
    std::string_view line = sk::fuzz::as_text(data, size);
    request(line);
    reply(line);
    return 0;
}
