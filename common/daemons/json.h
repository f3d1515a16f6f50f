// JSON over jsoncpp, strict: no comments, no trailing garbage, no duplicate
// keys, bounded nesting. Parse errors keep jsoncpp's message for the log.
#pragma once

#include <json/json.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk::json {

constexpr size_t kMaxDepth = 64;

Result<Json::Value> parse(std::string_view text);
// Compact single-line encoding (no trailing newline), UTF-8 kept as is.
std::string write(const Json::Value &v);

// Typed field access with messages that name the field ("register: 'gpus' must
// be an array of integers"). `ctx` prefixes the message.
Result<std::string> get_string(const Json::Value &obj, const char *key, std::string_view ctx);
Result<std::string> opt_string(const Json::Value &obj, const char *key, std::string_view ctx,
                               std::string dflt = {});
Result<uint64_t> get_uint(const Json::Value &obj, const char *key, std::string_view ctx,
                          uint64_t max = UINT64_MAX);
Result<uint64_t> opt_uint(const Json::Value &obj, const char *key, std::string_view ctx,
                          uint64_t dflt, uint64_t max = UINT64_MAX);
Result<int64_t> opt_int(const Json::Value &obj, const char *key, std::string_view ctx,
                        int64_t dflt);
Result<bool> opt_bool(const Json::Value &obj, const char *key, std::string_view ctx, bool dflt);
Result<std::vector<std::string>> opt_string_list(const Json::Value &obj, const char *key,
                                                 std::string_view ctx);
Result<std::vector<int>> opt_int_list(const Json::Value &obj, const char *key, std::string_view ctx,
                                      int max_value);
Result<std::map<std::string, std::string>> opt_string_map(const Json::Value &obj, const char *key,
                                                          std::string_view ctx);

Json::Value from_strings(const std::vector<std::string> &v);
Json::Value from_ints(const std::vector<int> &v);
Json::Value from_map(const std::map<std::string, std::string> &m);

// The jsoncpp backend of common/wire_codec.h (the agent's and the CLI's side).
struct Api {
    using Value = Json::Value;
    static constexpr auto parse = &json::parse;
    static constexpr auto write = &json::write;
    static Value object() { return Value(Json::objectValue); }
    static void set(Value &obj, const char *key, Value child) { obj[key] = std::move(child); }
    static Value of_string(std::string_view s) { return Value(std::string(s)); }
    static Value of_uint(uint64_t n) { return Value(Json::UInt64(n)); }
    static Value of_int(int64_t n) { return Value(Json::Int64(n)); }
    static Value of_bool(bool b) { return Value(b); }
    static constexpr auto from_ints = &json::from_ints;
    static constexpr auto from_strings = &json::from_strings;
    static constexpr auto from_map = &json::from_map;
    static bool is_object(const Value &v) { return v.isObject(); }
    static bool is_null(const Value &v) { return v.isNull(); }
    static Value member(const Value &obj, const char *key) {
        return obj.isObject() && obj.isMember(key) ? obj[key] : Value();
    }
    static std::optional<bool> bool_member(const Value &obj, const char *key) {
        if (!obj.isObject() || !obj.isMember(key) || !obj[key].isBool()) return std::nullopt;
        return obj[key].asBool();
    }
    static constexpr auto get_string = &json::get_string;
    static constexpr auto opt_string = &json::opt_string;
    static constexpr auto get_uint = &json::get_uint;
    static constexpr auto opt_uint = &json::opt_uint;
    static constexpr auto opt_int = &json::opt_int;
    static constexpr auto opt_bool = &json::opt_bool;
    static constexpr auto opt_string_list = &json::opt_string_list;
    static constexpr auto opt_int_list = &json::opt_int_list;
    static constexpr auto opt_string_map = &json::opt_string_map;
};

}  // namespace sk::json
