#include "common/daemons/json.h"

#include <memory>
#include <sstream>

namespace sk::json {

namespace {

const Json::CharReaderBuilder &reader_builder() {
    static const Json::CharReaderBuilder b = [] {
        Json::CharReaderBuilder rb;
        Json::CharReaderBuilder::strictMode(&rb.settings_);
        rb.settings_["stackLimit"] = static_cast<int>(kMaxDepth);
        return rb;
    }();
    return b;
}

Failure type_error(std::string_view ctx, const char *key, const char *expect) {
    return fail(Error::Parse, std::string(ctx) + ": '" + key + "' must be " + expect);
}

}  // namespace

Result<Json::Value> parse(std::string_view text) {
    // A reader per call: CharReader is not thread-safe, and building one is
    // cheap next to parsing (measured in bench/).
    std::unique_ptr<Json::CharReader> reader(reader_builder().newCharReader());
    Json::Value root;
    std::string errs;
    bool ok;
    try {
        ok = reader->parse(text.data(), text.data() + text.size(), &root, &errs);
    } catch (const std::exception &e) {  // jsoncpp throws past its stackLimit
        ok = false;
        errs = e.what();
    }
    if (!ok) {
        while (!errs.empty() && (errs.back() == '\n' || errs.back() == ' '))
            errs.pop_back();
        for (auto &c : errs)
            if (c == '\n') c = ' ';
        return fail(Error::Parse, "invalid JSON: " + errs);
    }
    return root;
}

std::string write(const Json::Value &v) {
    static const Json::StreamWriterBuilder wb = [] {
        Json::StreamWriterBuilder b;
        b["indentation"] = "";
        b["emitUTF8"] = true;
        return b;
    }();
    return Json::writeString(wb, v);
}

Result<std::string> get_string(const Json::Value &obj, const char *key, std::string_view ctx) {
    if (!obj.isObject() || !obj.isMember(key))
        return fail(Error::Parse, std::string(ctx) + ": missing '" + key + "'");
    const Json::Value &v = obj[key];
    if (!v.isString()) return type_error(ctx, key, "a string");
    return v.asString();
}

Result<std::string> opt_string(const Json::Value &obj, const char *key, std::string_view ctx,
                               std::string dflt) {
    if (!obj.isObject() || !obj.isMember(key) || obj[key].isNull()) return dflt;
    if (!obj[key].isString()) return type_error(ctx, key, "a string");
    return obj[key].asString();
}

Result<uint64_t> get_uint(const Json::Value &obj, const char *key, std::string_view ctx,
                          uint64_t max) {
    if (!obj.isObject() || !obj.isMember(key))
        return fail(Error::Parse, std::string(ctx) + ": missing '" + key + "'");
    return opt_uint(obj, key, ctx, 0, max);
}

Result<uint64_t> opt_uint(const Json::Value &obj, const char *key, std::string_view ctx,
                          uint64_t dflt, uint64_t max) {
    if (!obj.isObject() || !obj.isMember(key) || obj[key].isNull()) return dflt;
    const Json::Value &v = obj[key];
    if (!v.isIntegral() || (v.isInt64() && v.asInt64() < 0))
        return type_error(ctx, key, "a non-negative integer");
    uint64_t n = v.asUInt64();
    if (n > max)
        return fail(Error::Parse,
                    std::string(ctx) + ": '" + key + "' is larger than " + std::to_string(max));
    return n;
}

Result<int64_t> opt_int(const Json::Value &obj, const char *key, std::string_view ctx,
                        int64_t dflt) {
    if (!obj.isObject() || !obj.isMember(key) || obj[key].isNull()) return dflt;
    const Json::Value &v = obj[key];
    if (!v.isInt64()) return type_error(ctx, key, "an integer");
    return v.asInt64();
}

Result<bool> opt_bool(const Json::Value &obj, const char *key, std::string_view ctx, bool dflt) {
    if (!obj.isObject() || !obj.isMember(key) || obj[key].isNull()) return dflt;
    if (!obj[key].isBool()) return type_error(ctx, key, "true or false");
    return obj[key].asBool();
}

Result<std::vector<std::string>> opt_string_list(const Json::Value &obj, const char *key,
                                                 std::string_view ctx) {
    std::vector<std::string> out;
    if (!obj.isObject() || !obj.isMember(key) || obj[key].isNull()) return out;
    const Json::Value &v = obj[key];
    if (!v.isArray()) return type_error(ctx, key, "an array of strings");
    for (const auto &e : v) {
        if (!e.isString()) return type_error(ctx, key, "an array of strings");
        out.push_back(e.asString());
    }
    return out;
}

Result<std::vector<int>> opt_int_list(const Json::Value &obj, const char *key, std::string_view ctx,
                                      int max_value) {
    std::vector<int> out;
    if (!obj.isObject() || !obj.isMember(key) || obj[key].isNull()) return out;
    const Json::Value &v = obj[key];
    if (!v.isArray()) return type_error(ctx, key, "an array of integers");
    for (const auto &e : v) {
        if (!e.isIntegral() || !e.isInt() || e.asInt() < 0 || e.asInt() > max_value)
            return type_error(ctx, key, "an array of integers in range");
        out.push_back(e.asInt());
    }
    return out;
}

Result<std::map<std::string, std::string>> opt_string_map(const Json::Value &obj, const char *key,
                                                          std::string_view ctx) {
    std::map<std::string, std::string> out;
    if (!obj.isObject() || !obj.isMember(key) || obj[key].isNull()) return out;
    const Json::Value &v = obj[key];
    if (!v.isObject()) return type_error(ctx, key, "an object of strings");
    for (const auto &name : v.getMemberNames()) {
        if (!v[name].isString()) return type_error(ctx, key, "an object of strings");
        out[name] = v[name].asString();
    }
    return out;
}

Json::Value from_strings(const std::vector<std::string> &v) {
    Json::Value a(Json::arrayValue);
    for (const auto &s : v)
        a.append(s);
    return a;
}

Json::Value from_ints(const std::vector<int> &v) {
    Json::Value a(Json::arrayValue);
    for (int i : v)
        a.append(i);
    return a;
}

Json::Value from_map(const std::map<std::string, std::string> &m) {
    Json::Value o(Json::objectValue);
    for (const auto &[k, val] : m)
        o[k] = val;
    return o;
}

}  // namespace sk::json
