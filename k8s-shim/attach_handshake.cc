#include "k8s-shim/attach_handshake.h"

#include "common/daemons/protocol.h"
#include "common/daemons/shim_protocol.h"

namespace sk::shim {

std::string AttachHandshake::request() const {
    proto::Request r;
    r.id = 1;
    r.op = std::string(proto::to_string(proto::ShimOp::ExecAttach));
    r.body = proto::to_json(proto::ExecAttach{session_});
    return proto::encode(r);
}

AttachHandshake::Step AttachHandshake::feed(std::string_view bytes) {
    Step s;
    size_t nl = bytes.find('\n');
    line_.append(bytes.substr(0, nl));
    if (line_.size() > kMaxReplyBytes) {
        s.state = State::Refused;
        s.why = fail(Error::Parse, "exec_attach: the agent's reply is too long");
        return s;
    }
    if (nl == std::string_view::npos) return s;
    auto r = proto::decode_reply(line_, kMaxReplyBytes);
    if (!r || !r->ok) {
        s.state = State::Refused;
        s.why = r ? fail(r->error, "exec_attach refused: " + r->message)
                  : fail(Error::Parse, "exec_attach: " + r.message());
        return s;
    }
    s.state = State::Accepted;
    s.rest = bytes.substr(nl + 1);
    return s;
}

Status AttachHandshake::closed_early(const char *what) const {
    return fail(Error::Unavailable,
                std::string("the agent closed the ") + what + " session's connection");
}

}  // namespace sk::shim
