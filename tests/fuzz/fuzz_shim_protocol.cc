// Agent <-> shim protocol decoders (common/daemons/shim_protocol.h) and base64
// (common/daemons/base64.h): what the shim does with a line from the agent and the
// agent with a line from a job's shim (a process of the job's user). The
// input is one line, decoded as a request, as a reply, and as base64 text.
// Properties beyond "no crash, no UB, no leak":
// - a decoder that refuses says why, with Parse (Invalid for pod_run);
// - every decoded message, written with to_json and decoded again, gives the
//   same message, also through the envelope (encode, decode_request);
// - base64_decode accepts only what base64_encode writes, and
//   base64_decode(base64_encode(x)) == x.
#include <string>

#include "common/daemons/base64.h"
#include "common/daemons/json.h"
#include "common/daemons/protocol.h"
#include "common/daemons/shim_protocol.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;
using namespace sk::proto;

bool same(const PodRun &a, const PodRun &b) {
    return a.uid == b.uid && a.ns == b.ns && a.name == b.name && a.pod == b.pod &&
           a.files == b.files;
}

// decode(body) ok -> decode(to_json(decoded)) ok, the same, and stable
// through one request line of the envelope.
template <typename T, typename Decode>
void round_trip(ShimOp op, const Json::Value &body, Decode decode, Error refusal) {
    Result<T> first = decode(body);
    if (!first) {
        FUZZ_CHECK(!first.message().empty());
        FUZZ_CHECK(first.error() == refusal);
        return;
    }
    Json::Value again = to_json(*first);
    Result<T> second = decode(again);
    FUZZ_CHECK(second.ok());
    FUZZ_CHECK(to_json(*second) == again);
    Request r;
    r.id = 1;
    r.op = std::string(to_string(op));
    r.body = again;
    std::string line = encode(r);
    FUZZ_CHECK(!line.empty() && line.back() == '\n' && line.find('\n') == line.size() - 1);
    // Decoded with the attached link's bound, as the shim and the agent do.
    auto wire =
        decode_request(std::string_view(line).substr(0, line.size() - 1), kMaxShimMessageBytes);
    if (!wire) {  // only an encoding over the size limit may fail
        FUZZ_CHECK(wire.error() == Error::TooLarge);
        return;
    }
    FUZZ_CHECK(wire->op == r.op);
    Result<T> third = decode(wire->body);
    FUZZ_CHECK(third.ok());
    FUZZ_CHECK(to_json(*third) == again);
}

void all_decoders(const Json::Value &body) {
    round_trip<PodRun>(ShimOp::PodRun, body, pod_run_from_json, Error::Invalid);
    if (auto run = pod_run_from_json(body); run) {
        auto back = pod_run_from_json(to_json(*run));
        FUZZ_CHECK(back && same(*run, *back));
    }
    round_trip<PodKill>(ShimOp::PodKill, body, pod_kill_from_json, Error::Parse);
    round_trip<PodList>(ShimOp::PodList, body, pod_list_request_from_json, Error::Parse);
    round_trip<Shutdown>(ShimOp::Shutdown, body, shutdown_from_json, Error::Parse);
    round_trip<PodStatus>(ShimOp::PodStatus, body, pod_status_from_json, Error::Parse);
    round_trip<PodListReply>(ShimOp::PodList, body, pod_list_reply_from_json, Error::Parse);
    round_trip<PodEvent>(ShimOp::PodStatus, body, pod_event_from_json, Error::Parse);
    round_trip<ExecStart>(ShimOp::ExecStart, body, exec_start_from_json, Error::Parse);
    round_trip<ExecAttach>(ShimOp::ExecAttach, body, exec_attach_from_json, Error::Parse);
    round_trip<AttachStart>(ShimOp::AttachStart, body, attach_start_from_json, Error::Parse);
    round_trip<PodStatsReply>(ShimOp::PodStats, body, pod_stats_reply_from_json, Error::Parse);
    if (auto files = pod_files_from_json(body); files) {
        PodRun m;
        m.files = *files;
        auto back = pod_files_from_json(to_json(m)["files"]);
        FUZZ_CHECK(back && *back == *files);
    } else {
        FUZZ_CHECK(files.error() == Error::Parse && !files.message().empty());
    }
}

// The line as the link decodes it (kMaxShimMessageBytes); the socket's
// bound gives the same answer for every line within it.
void as_message(std::string_view line) {
    auto socket_req = decode_request(line);
    auto socket_rep = decode_reply(line);
    if (line.size() <= kMaxMessageBytes) {
        auto req = decode_request(line, kMaxShimMessageBytes);
        auto rep = decode_reply(line, kMaxShimMessageBytes);
        FUZZ_CHECK(req.ok() == socket_req.ok() && rep.ok() == socket_rep.ok());
    } else {
        FUZZ_CHECK(socket_req.error() == Error::TooLarge && socket_rep.error() == Error::TooLarge);
    }
    if (auto req = decode_request(line, kMaxShimMessageBytes); req) {
        auto op = shim_op_from_string(req->op, "op");
        FUZZ_CHECK(op ? to_string(*op) == req->op : !op.message().empty());
        all_decoders(req->body);
    }
    if (auto rep = decode_reply(line, kMaxShimMessageBytes); rep && rep->ok)
        all_decoders(rep->body);
    // Decoders never assume an object: try them on whatever the line holds.
    if (auto v = json::parse(line); v) {
        all_decoders(*v);
        if (v->isArray())
            for (const auto &e : *v)
                all_decoders(e);
    }
}

void as_base64(std::string_view text) {
    if (auto raw = base64_decode(text); raw) FUZZ_CHECK(base64_encode(*raw) == text);
    auto back = base64_decode(base64_encode(text));
    FUZZ_CHECK(back.ok() && *back == text);
}

}  // namespace

SK_FUZZ_TARGET(shim_protocol) {
    std::string_view text = sk::fuzz::as_text(data, size);
    as_message(text);
    as_base64(text);
    return 0;
}
