#include "common/daemons/exec_frames.h"

#include <json/json.h>

#include "common/daemons/json.h"

namespace sk::proto {

namespace {

bool carried(ExecDirection dir, uint8_t ch) {
    switch (static_cast<ExecChannel>(ch)) {
        case ExecChannel::Stdin:
        case ExecChannel::Resize:
        case ExecChannel::Close:
            return dir == ExecDirection::ToShim;
        case ExecChannel::Stdout:
        case ExecChannel::Stderr:
        case ExecChannel::Exit:
            return dir == ExecDirection::ToAgent;
    }
    return false;
}

}  // namespace

std::string encode_exec_frame(ExecChannel channel, std::string_view payload) {
    std::string f;
    f.reserve(kExecFrameHeader + payload.size());
    f.push_back(static_cast<char>(channel));
    uint32_t n = static_cast<uint32_t>(payload.size());
    for (int shift = 24; shift >= 0; shift -= 8)
        f.push_back(static_cast<char>((n >> shift) & 0xff));
    f.append(payload);
    return f;
}

Status ExecFrameDecoder::feed(std::string_view data, std::vector<ExecFrame> *out) {
    if (!failed_.empty()) return fail(Error::Parse, failed_);
    buf_.append(data);
    size_t pos = 0;
    while (buf_.size() - pos >= kExecFrameHeader) {
        auto *h = reinterpret_cast<const unsigned char *>(buf_.data() + pos);
        uint32_t n = (uint32_t{h[1]} << 24) | (uint32_t{h[2]} << 16) | (uint32_t{h[3]} << 8) | h[4];
        if (!carried(dir_, h[0])) {
            failed_ = "exec frame: channel " + std::to_string(h[0]) + " is not sent " +
                      (dir_ == ExecDirection::ToShim ? "to the shim" : "to the agent");
            break;
        }
        if (n > kMaxExecFramePayload) {
            failed_ = "exec frame: payload of " + std::to_string(n) + " bytes is over " +
                      std::to_string(kMaxExecFramePayload);
            break;
        }
        if (buf_.size() - pos - kExecFrameHeader < n) break;
        ExecFrame f;
        f.channel = static_cast<ExecChannel>(h[0]);
        f.payload.assign(buf_, pos + kExecFrameHeader, n);
        out->push_back(std::move(f));
        pos += kExecFrameHeader + n;
    }
    buf_.erase(0, pos);
    if (!failed_.empty()) {
        buf_.clear();
        return fail(Error::Parse, failed_);
    }
    return {};
}

std::string exit_payload(int exit_code) {
    Json::Value v(Json::objectValue);
    v["exit_code"] = exit_code;
    return json::write(v);
}

std::string exit_error_payload(const std::string &why) {
    Json::Value v(Json::objectValue);
    v["error"] = why;
    return json::write(v);
}

Result<TerminalSize> resize_from_payload(std::string_view payload) {
    auto v = json::parse(payload);
    if (!v || !v->isObject())
        return fail(Error::Parse, "resize: the payload must be a JSON object");
    TerminalSize t;
    for (const char *key : {"Width", "Height"}) {
        const Json::Value &n = (*v)[key];
        if (!n.isIntegral() || n.asLargestInt() < 0 || n.asLargestInt() > 65535)
            return fail(Error::Parse, std::string("resize: '") + key + "' must be 0..65535");
        (key[0] == 'W' ? t.width : t.height) = static_cast<uint16_t>(n.asLargestInt());
    }
    return t;
}

}  // namespace sk::proto
