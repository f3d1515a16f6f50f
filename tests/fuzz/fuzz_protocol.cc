// Agent socket protocol decoder: what the agent does with a line from any
// local process (and a shim or the plugin with the agent's replies). The
// input is one line. Properties beyond "no crash, no UB, no leak":
// - encode() of anything decoded is one line that decodes to the same thing;
// - every typed body decoder accepts what its to_json() wrote from a value it
//   decoded (the agent's reply to a request it accepted is readable);
// - the plugin's side (common/wire_codec.h over json-c, common/plugin_wire.h)
//   agrees with the agent's: a reply the plugin decodes, re-encoded by the
//   plugin, decodes on the agent's side to the same envelope and the same
//   typed bodies; a request the agent decodes, re-encoded by the plugin from
//   its typed body, decodes on the agent's side to the same value;
// - the client's reading of a reply (BasicAgentClient::read_reply, both
//   backends) agrees between the agent's and the plugin's side; an error reply
//   of id 0 (the agent refused or closed the connection) is reported as the
//   agent's own code and message whatever id the caller expected, never as a
//   reply to another request.
#include <string>

#include "common/daemons/agent_client.h"
#include "common/daemons/json.h"
#include "common/daemons/protocol.h"
#include "common/plugin_wire.h"
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

// Both sides decode the body of type T alike: both refuse, or both accept the
// same value (compared through the agent's encoding).
template <typename T, typename AgentDecode, typename PluginDecode>
void same_body(const Json::Value &agent_body, const jsonc::Value &plugin_body,
               AgentDecode agent_decode, PluginDecode plugin_decode) {
    Result<T> a = agent_decode(agent_body);
    Result<T> p = plugin_decode(plugin_body);
    FUZZ_CHECK(a.ok() == p.ok());
    if (a && p) FUZZ_CHECK(to_json(*a) == to_json(*p));
}

void plugin_reply(std::string_view line) {
    auto r = PluginCodec::decode_reply(line);
    if (!r) {
        FUZZ_CHECK(!r.message().empty());
        return;
    }
    std::string enc = PluginCodec::encode(*r);
    check_one_line(enc);
    auto back = decode_reply(std::string_view(enc).substr(0, enc.size() - 1));
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->id == r->id && back->ok == r->ok && back->error == r->error &&
               back->message == r->message);
    if (!r->ok) return;
    same_body<RegisterReply>(back->body, r->body, register_reply_from_json,
                             PluginCodec::register_reply_from_json);
    same_body<DeregisterReply>(back->body, r->body, deregister_reply_from_json,
                               PluginCodec::deregister_reply_from_json);
    same_body<NodeState>(back->body, r->body, node_state_from_json,
                         PluginCodec::node_state_from_json);
}

// What the agent accepted, the plugin writes so that the agent reads it back.
template <typename T, typename Decode>
void plugin_writes(const Request &r, Decode decode) {
    Result<T> first = decode(r.body);
    if (!first) return;
    BasicRequest<jsonc::Api> p;
    p.id = r.id;
    p.op = r.op;
    p.body = PluginCodec::to_json(*first);
    std::string enc = PluginCodec::encode(p);
    check_one_line(enc);
    auto back = decode_request(std::string_view(enc).substr(0, enc.size() - 1));
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->id == r.id && back->op == r.op);
    Result<T> second = decode(back->body);
    FUZZ_CHECK(second.ok());
    FUZZ_CHECK(to_json(*second) == to_json(*first));
}

void plugin_request(std::string_view line) {
    auto r = decode_request(line);
    if (!r) return;
    plugin_writes<RegisterRequest>(*r, register_from_json);
    plugin_writes<DeregisterRequest>(*r, deregister_from_json);
    plugin_writes<JobKey>(*r, [](const Json::Value &v) { return job_key_from_json(v, "status"); });
}

void client_reads(std::string_view line) {
    auto r = decode_reply(line);
    auto rp = PluginCodec::decode_reply(line);
    for (uint64_t expected : {uint64_t{1}, uint64_t{7}}) {
        auto a = AgentClient::read_reply(line, expected);
        auto p = PluginAgentClient::read_reply(line, expected);
        if (!a) FUZZ_CHECK(!a.message().empty());
        if (!p) FUZZ_CHECK(!p.message().empty());
        // Where both decoders read the envelope, the clients agree (the
        // messages may differ in bytes: the parsers treat invalid UTF-8 each
        // its own way). Where only one does (json-c reads some lines jsoncpp
        // refuses), plugin_reply above bounds the difference.
        if (r.ok() == rp.ok()) {
            FUZZ_CHECK(a.ok() == p.ok());
            if (!a) FUZZ_CHECK(a.error() == p.error());
        }
        if (r && r->id == 0 && !r->ok) {
            FUZZ_CHECK(!a.ok() && a.error() == r->error);
            FUZZ_CHECK(a.message() == "agent: " + r->message);
        }
        if (rp && rp->id == 0 && !rp->ok) {
            FUZZ_CHECK(!p.ok() && p.error() == rp->error);
            FUZZ_CHECK(p.message() == "agent: " + rp->message);
        }
    }
}

SK_FUZZ_TARGET(protocol) {
    std::string_view line = sk::fuzz::as_text(data, size);
    request(line);
    reply(line);
    plugin_reply(line);
    plugin_request(line);
    client_reads(line);
    return 0;
}
