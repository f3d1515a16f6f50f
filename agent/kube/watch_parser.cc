#include "agent/kube/watch_parser.h"

#include "common/daemons/json.h"

namespace sk::agent {

Result<WatchEvent> parse_watch_line(std::string_view line) {
    auto v = json::parse(line);
    if (!v) return fail(Error::Parse, "watch event: " + v.message());
    if (!v->isObject() || !(*v)["type"].isString() || !(*v)["object"].isObject())
        return fail(Error::Parse, "watch event: expected {\"type\":...,\"object\":{...}}");
    WatchEvent e;
    std::string t = (*v)["type"].asString();
    if (t == "ADDED")
        e.type = WatchType::Added;
    else if (t == "MODIFIED")
        e.type = WatchType::Modified;
    else if (t == "DELETED")
        e.type = WatchType::Deleted;
    else if (t == "BOOKMARK")
        e.type = WatchType::Bookmark;
    else if (t == "ERROR")
        e.type = WatchType::Error;
    else
        return fail(Error::Parse, "watch event: unknown type '" + t + "'");
    e.object = std::move((*v)["object"]);
    if (e.type == WatchType::Error) {
        const Json::Value &st = e.object;
        e.error_code = st["code"].isInt() && st["code"].asInt() != 0 ? st["code"].asInt() : 500;
        e.error_message = st["message"].isString() ? st["message"].asString() : "";
        return e;
    }
    // Const lookups: metadata may be any JSON type, and the mutable
    // operator[] throws on a non-object (the caller is a curl callback).
    const Json::Value &obj = e.object;
    const Json::Value &rv = obj["metadata"].isObject() ? obj["metadata"]["resourceVersion"]
                                                       : Json::Value::nullSingleton();
    if (!rv.isString() || rv.asString().empty())
        return fail(Error::Parse, "watch event " + t + ": object has no metadata.resourceVersion");
    e.resource_version = rv.asString();
    return e;
}

Result<std::vector<WatchEvent>> WatchParser::feed(std::string_view chunk) {
    std::vector<WatchEvent> out;
    buf_.append(chunk.data(), chunk.size());
    size_t start = 0;
    for (size_t nl; (nl = buf_.find('\n', start)) != std::string::npos; start = nl + 1) {
        // The bound holds for every line, whether it arrived whole in one
        // chunk or piecewise (then the tail check below catches it first).
        if (nl - start > max_line_) {
            buf_.clear();
            return fail(Error::TooLarge,
                        "watch event over " + std::to_string(max_line_) + " bytes");
        }
        std::string_view line(buf_.data() + start, nl - start);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
            line.remove_suffix(1);
        if (line.empty()) continue;
        auto e = parse_watch_line(line);
        if (!e) {
            buf_.clear();
            return e.failure();
        }
        out.push_back(std::move(*e));
    }
    buf_.erase(0, start);
    if (buf_.size() > max_line_) {
        buf_.clear();
        return fail(Error::TooLarge, "watch event over " + std::to_string(max_line_) + " bytes");
    }
    return out;
}

}  // namespace sk::agent
