// JSON over json-c: the SPANK plugin's backend of common/wire_codec.h (and of
// its run file, spank/runfile.cc). json-c rather than jsoncpp because
// libjson-c5 is what Slurm's own daemons link on Debian, so it is on every
// node that runs slurmd, and a --disable-daemons build (a login node with the
// Slurm headers) then needs only libjson-c-dev beside them; the agent keeps
// jsoncpp (common/daemons/json.h). Both backends read the same wire format through
// the one codec; tests/unit/test_wire.cc and tests/fuzz/fuzz_protocol.cc
// cross them.
//
// Parsing is strict as common/daemons/json.h is (JSON_TOKENER_STRICT, UTF-8
// validated, no single-quoted strings, an object or an array at the root,
// nothing but white space after it, nesting bounded by kMaxDepth) with one
// difference json-c does not
// let us remove: a repeated key keeps its last value where jsoncpp refuses the
// text. The plugin parses only the root-owned agent's replies and its own
// root-owned run file; the agent, which reads its peers, refuses them.
// Numbers follow jsoncpp's reading: a double with an integral value counts
// as an integer.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

struct json_object;

namespace sk::jsonc {

constexpr int kMaxDepth = 64;

// An owned reference to a json_object (json_object_put on destruction; a
// copy takes another reference). Default: JSON null.
class Value {
  public:
    Value() = default;
    explicit Value(json_object *owned) noexcept : p_(owned) {}
    Value(const Value &o) noexcept;
    Value(Value &&o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    Value &operator=(Value o) noexcept {
        std::swap(p_, o.p_);
        return *this;
    }
    ~Value();
    json_object *get() const noexcept { return p_; }

  private:
    json_object *p_ = nullptr;
};

Result<Value> parse(std::string_view text);
// Compact single-line encoding (no trailing newline), UTF-8 kept as is.
std::string write(const Value &v);

Value object();
void set(Value &obj, const char *key, const Value &child);
Value of_string(std::string_view s);
Value of_uint(uint64_t n);
Value of_int(int64_t n);
Value of_bool(bool b);
Value from_ints(const std::vector<int> &v);
Value from_strings(const std::vector<std::string> &v);
Value from_map(const std::map<std::string, std::string> &m);

bool is_object(const Value &v);
bool is_null(const Value &v);
Value member(const Value &obj, const char *key);
std::optional<bool> bool_member(const Value &obj, const char *key);

// Same contracts and messages as their namesakes in common/daemons/json.h.
Result<std::string> get_string(const Value &obj, const char *key, std::string_view ctx);
Result<std::string> opt_string(const Value &obj, const char *key, std::string_view ctx,
                               std::string dflt = {});
Result<uint64_t> get_uint(const Value &obj, const char *key, std::string_view ctx,
                          uint64_t max = UINT64_MAX);
Result<uint64_t> opt_uint(const Value &obj, const char *key, std::string_view ctx, uint64_t dflt,
                          uint64_t max = UINT64_MAX);
Result<int64_t> opt_int(const Value &obj, const char *key, std::string_view ctx, int64_t dflt);
Result<bool> opt_bool(const Value &obj, const char *key, std::string_view ctx, bool dflt);
Result<std::vector<std::string>> opt_string_list(const Value &obj, const char *key,
                                                 std::string_view ctx);
Result<std::vector<int>> opt_int_list(const Value &obj, const char *key, std::string_view ctx,
                                      int max_value);
Result<std::map<std::string, std::string>> opt_string_map(const Value &obj, const char *key,
                                                          std::string_view ctx);

// The json-c backend of common/wire_codec.h.
struct Api {
    using Value = jsonc::Value;
    static constexpr auto parse = &jsonc::parse;
    static constexpr auto write = &jsonc::write;
    static constexpr auto object = &jsonc::object;
    static constexpr auto set = &jsonc::set;
    static constexpr auto of_string = &jsonc::of_string;
    static constexpr auto of_uint = &jsonc::of_uint;
    static constexpr auto of_int = &jsonc::of_int;
    static constexpr auto of_bool = &jsonc::of_bool;
    static constexpr auto from_ints = &jsonc::from_ints;
    static constexpr auto from_strings = &jsonc::from_strings;
    static constexpr auto from_map = &jsonc::from_map;
    static constexpr auto is_object = &jsonc::is_object;
    static constexpr auto is_null = &jsonc::is_null;
    static constexpr auto member = &jsonc::member;
    static constexpr auto bool_member = &jsonc::bool_member;
    static constexpr auto get_string = &jsonc::get_string;
    static constexpr auto opt_string = &jsonc::opt_string;
    static constexpr auto get_uint = &jsonc::get_uint;
    static constexpr auto opt_uint = &jsonc::opt_uint;
    static constexpr auto opt_int = &jsonc::opt_int;
    static constexpr auto opt_bool = &jsonc::opt_bool;
    static constexpr auto opt_string_list = &jsonc::opt_string_list;
    static constexpr auto opt_int_list = &jsonc::opt_int_list;
    static constexpr auto opt_string_map = &jsonc::opt_string_map;
};

}  // namespace sk::jsonc
