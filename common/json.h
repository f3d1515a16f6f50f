// JSON over jsoncpp, strict: no comments, no trailing garbage, no duplicate
// keys, bounded nesting. Parse errors keep jsoncpp's message for the log.
#pragma once

#include <json/json.h>

#include <cstdint>
#include <map>
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

}  // namespace sk::json
