#include "agent/kubelet/streams/remotecommand.h"

#include <algorithm>
#include <tuple>

#include "common/daemons/json.h"

namespace sk::remotecommand {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

// metav1.Status as Go's encoding/json writes it: an empty "metadata", no
// kind/apiVersion on the error stream.
Json::Value status(const char *result) {
    Json::Value v(Json::objectValue);
    v["metadata"] = Json::Value(Json::objectValue);
    v["status"] = result;
    return v;
}

Json::Value cause(const char *reason, std::string_view message) {
    Json::Value c(Json::objectValue);
    if (reason) c["reason"] = reason;
    c["message"] = std::string(message);
    return c;
}

}  // namespace

std::optional<std::string> choose_protocol(const std::vector<std::string_view> &offered,
                                           const std::vector<std::string_view> &supported) {
    for (std::string_view line : offered) {
        while (!line.empty()) {
            size_t comma = line.find(',');
            std::string_view name = trim(line.substr(0, comma));
            line = comma == std::string_view::npos ? std::string_view() : line.substr(comma + 1);
            if (name.empty()) continue;
            if (std::find(supported.begin(), supported.end(), name) != supported.end())
                return std::string(name);
        }
    }
    return std::nullopt;
}

std::string status_success() {
    return json::write(status("Success"));
}

std::string status_exit_code(int code) {
    Json::Value v = status("Failure");
    v["message"] =
        "command terminated with non-zero exit code: exit status " + std::to_string(code);
    v["reason"] = "NonZeroExitCode";
    v["details"]["causes"].append(cause("ExitCode", std::to_string(code)));
    return json::write(v);
}

std::string status_internal_error(std::string_view message) {
    Json::Value v = status("Failure");
    v["message"] = "Internal error occurred: " + std::string(message);
    v["reason"] = "InternalError";
    v["details"]["causes"].append(cause(nullptr, message));
    v["code"] = 500;
    return json::write(v);
}

std::string status_http_error(int http_code, std::string_view reason, std::string_view message) {
    Json::Value v = status("Failure");
    v["kind"] = "Status";
    v["apiVersion"] = "v1";
    v["message"] = std::string(message);
    v["reason"] = std::string(reason);
    v["code"] = http_code;
    return json::write(v);
}

Result<TerminalSize> parse_terminal_size(std::string_view text) {
    auto doc = json::parse(text);
    if (!doc) return fail(Error::Parse, "resize: " + doc.message());
    if (!doc->isObject()) return fail(Error::Parse, "resize: not a JSON object");
    const Json::Value *width = nullptr, *height = nullptr;
    for (auto it = doc->begin(); it != doc->end(); ++it) {
        std::string key = it.name();
        const Json::Value **slot = iequals(key, "width")    ? &width
                                   : iequals(key, "height") ? &height
                                                            : nullptr;
        if (!slot) continue;
        if (*slot) return fail(Error::Parse, "resize: '" + key + "' given twice");
        *slot = &*it;
    }
    TerminalSize size;
    for (auto [v, name, dst] : {std::make_tuple(width, "Width", &size.width),
                                std::make_tuple(height, "Height", &size.height)}) {
        if (!v) return fail(Error::Parse, std::string("resize: no '") + name + "'");
        bool integer = v->type() == Json::intValue || v->type() == Json::uintValue;
        if (!integer || !v->isUInt() || v->asUInt() > 65535)
            return fail(Error::Parse,
                        std::string("resize: '") + name + "' must be an integer 0 .. 65535");
        *dst = static_cast<uint16_t>(v->asUInt());
    }
    return size;
}

Status ResizeDecoder::take(std::vector<TerminalSize> *out) {
    std::string_view doc = pending_;
    while (!doc.empty() &&
           (doc.back() == '\n' || doc.back() == '\r' || doc.back() == ' ' || doc.back() == '\t'))
        doc.remove_suffix(1);
    if (!doc.empty()) {
        auto size = parse_terminal_size(doc);
        if (!size) {
            failed_ = size.failure();
            return *failed_;
        }
        out->push_back(*size);
    }
    pending_.clear();
    return {};
}

Status ResizeDecoder::feed(std::string_view bytes, std::vector<TerminalSize> *out) {
    if (failed_) return *failed_;
    while (!bytes.empty()) {
        size_t nl = bytes.find('\n');
        std::string_view part = bytes.substr(0, nl);
        if (pending_.size() + part.size() > kMaxDocument) {
            failed_ = fail(Error::TooLarge,
                           "resize: a document over " + std::to_string(kMaxDocument) + " bytes");
            pending_.clear();
            return *failed_;
        }
        pending_.append(part);
        if (nl == std::string_view::npos) break;
        bytes.remove_prefix(nl + 1);
        if (Status st = take(out); !st) return st;
    }
    return {};
}

Status ResizeDecoder::end_message(std::vector<TerminalSize> *out) {
    if (failed_) return *failed_;
    return take(out);
}

}  // namespace sk::remotecommand
