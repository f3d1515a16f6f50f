#include "common/jsonc.h"

#include <json-c/json.h>

#include <cmath>
#include <limits>
#include <memory>

namespace sk::jsonc {

namespace {

Failure type_error(std::string_view ctx, const char *key, const char *expect) {
    return fail(Error::Parse, std::string(ctx) + ": '" + key + "' must be " + expect);
}

// The member `key` of `obj` (not owned), or nullptr when `obj` is not an
// object, the member is absent or it is JSON null.
json_object *field(const Value &obj, const char *key) {
    json_object *v = nullptr;
    if (!is_object(obj) || !json_object_object_get_ex(obj.get(), key, &v)) return nullptr;
    return v;
}

bool present(const Value &obj, const char *key) {
    json_object *v = nullptr;
    return is_object(obj) && json_object_object_get_ex(obj.get(), key, &v);
}

std::string string_of(json_object *v) {
    return std::string(json_object_get_string(v),
                       static_cast<size_t>(json_object_get_string_len(v)));
}

// An integer as jsoncpp reads one: an int, or a double with an integral
// value. `neg` says whether it is below zero; `mag` is its value when not.
bool integral(json_object *v, bool *neg, uint64_t *mag, int64_t *sval, bool *fits_int64) {
    if (json_object_is_type(v, json_type_int)) {
        int64_t s = json_object_get_int64(v);
        *neg = s < 0;
        *mag = *neg ? 0 : json_object_get_uint64(v);
        *fits_int64 = *neg || *mag <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
        *sval = s;
        return true;
    }
    if (json_object_is_type(v, json_type_double)) {
        double d = json_object_get_double(v);
        if (!std::isfinite(d) || std::floor(d) != d) return false;
        if (d < -9223372036854775808.0 || d >= 18446744073709551616.0) return false;
        *neg = d < 0;
        *mag = *neg ? 0 : static_cast<uint64_t>(d);
        *fits_int64 = d < 9223372036854775808.0;
        *sval = *fits_int64 ? static_cast<int64_t>(d) : 0;
        return true;
    }
    return false;
}

// True when `text` has a single quote outside double-quoted strings: json-c
// reads 'x' as a string even in strict mode; JSON (and jsoncpp) does not.
bool single_quote_outside_strings(std::string_view text) {
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '\'') {
            return true;
        }
    }
    return false;
}

}  // namespace

Value::Value(const Value &o) noexcept : p_(o.p_ ? json_object_get(o.p_) : nullptr) {}

Value::~Value() {
    if (p_) json_object_put(p_);
}

Result<Value> parse(std::string_view text) {
    if (text.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
        return fail(Error::TooLarge, "invalid JSON: text too large");
    std::unique_ptr<json_tokener, decltype(&json_tokener_free)> tok(json_tokener_new_ex(kMaxDepth),
                                                                    json_tokener_free);
    if (!tok) return fail(Error::Internal, "invalid JSON: out of memory");
    if (single_quote_outside_strings(text))
        return fail(Error::Parse, "invalid JSON: a string in single quotes");
    json_tokener_set_flags(tok.get(), JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    Value v(json_tokener_parse_ex(tok.get(), text.data(), static_cast<int>(text.size())));
    enum json_tokener_error err = json_tokener_get_error(tok.get());
    if (err == json_tokener_continue)
        return fail(Error::Parse, "invalid JSON: unexpected end of text");
    if (err != json_tokener_success)
        return fail(Error::Parse, std::string("invalid JSON: ") + json_tokener_error_desc(err));
    if (!json_object_is_type(v.get(), json_type_object) &&
        !json_object_is_type(v.get(), json_type_array))
        return fail(Error::Parse, "invalid JSON: the root must be an object or an array");
    for (size_t i = json_tokener_get_parse_end(tok.get()); i < text.size(); ++i)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r')
            return fail(Error::Parse, "invalid JSON: extra characters after the value");
    return v;
}

std::string write(const Value &v) {
    size_t len = 0;
    const char *s = json_object_to_json_string_length(
        v.get(), JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    return std::string(s, len);
}

Value object() {
    return Value(json_object_new_object());
}

void set(Value &obj, const char *key, const Value &child) {
    json_object *c = child.get() ? json_object_get(child.get()) : nullptr;
    json_object_object_add(obj.get(), key, c);
}

Value of_string(std::string_view s) {
    return Value(json_object_new_string_len(s.data(), static_cast<int>(s.size())));
}
Value of_uint(uint64_t n) {
    return Value(json_object_new_uint64(n));
}
Value of_int(int64_t n) {
    return Value(json_object_new_int64(n));
}
Value of_bool(bool b) {
    return Value(json_object_new_boolean(b ? 1 : 0));
}

Value from_ints(const std::vector<int> &v) {
    Value a(json_object_new_array());
    for (int i : v)
        json_object_array_add(a.get(), json_object_new_int64(i));
    return a;
}

Value from_strings(const std::vector<std::string> &v) {
    Value a(json_object_new_array());
    for (const auto &s : v)
        json_object_array_add(a.get(),
                              json_object_new_string_len(s.data(), static_cast<int>(s.size())));
    return a;
}

Value from_map(const std::map<std::string, std::string> &m) {
    Value o = object();
    for (const auto &[k, val] : m)
        set(o, k.c_str(), of_string(val));
    return o;
}

bool is_object(const Value &v) {
    return json_object_is_type(v.get(), json_type_object);
}
bool is_null(const Value &v) {
    return v.get() == nullptr;
}

Value member(const Value &obj, const char *key) {
    json_object *v = field(obj, key);
    return Value(v ? json_object_get(v) : nullptr);
}

std::optional<bool> bool_member(const Value &obj, const char *key) {
    json_object *v = field(obj, key);
    if (!v || !json_object_is_type(v, json_type_boolean)) return std::nullopt;
    return json_object_get_boolean(v) != 0;
}

Result<std::string> get_string(const Value &obj, const char *key, std::string_view ctx) {
    if (!present(obj, key)) return fail(Error::Parse, std::string(ctx) + ": missing '" + key + "'");
    json_object *v = field(obj, key);
    if (!v || !json_object_is_type(v, json_type_string)) return type_error(ctx, key, "a string");
    return string_of(v);
}

Result<std::string> opt_string(const Value &obj, const char *key, std::string_view ctx,
                               std::string dflt) {
    json_object *v = field(obj, key);
    if (!v) return dflt;
    if (!json_object_is_type(v, json_type_string)) return type_error(ctx, key, "a string");
    return string_of(v);
}

Result<uint64_t> get_uint(const Value &obj, const char *key, std::string_view ctx, uint64_t max) {
    if (!present(obj, key)) return fail(Error::Parse, std::string(ctx) + ": missing '" + key + "'");
    return opt_uint(obj, key, ctx, 0, max);
}

Result<uint64_t> opt_uint(const Value &obj, const char *key, std::string_view ctx, uint64_t dflt,
                          uint64_t max) {
    json_object *v = field(obj, key);
    if (!v) return dflt;
    bool neg = false, fits = false;
    uint64_t n = 0;
    int64_t s = 0;
    if (!integral(v, &neg, &n, &s, &fits) || neg)
        return type_error(ctx, key, "a non-negative integer");
    if (n > max)
        return fail(Error::Parse,
                    std::string(ctx) + ": '" + key + "' is larger than " + std::to_string(max));
    return n;
}

Result<int64_t> opt_int(const Value &obj, const char *key, std::string_view ctx, int64_t dflt) {
    json_object *v = field(obj, key);
    if (!v) return dflt;
    bool neg = false, fits = false;
    uint64_t n = 0;
    int64_t s = 0;
    if (!integral(v, &neg, &n, &s, &fits) || !fits) return type_error(ctx, key, "an integer");
    return s;
}

Result<bool> opt_bool(const Value &obj, const char *key, std::string_view ctx, bool dflt) {
    json_object *v = field(obj, key);
    if (!v) return dflt;
    if (!json_object_is_type(v, json_type_boolean)) return type_error(ctx, key, "true or false");
    return json_object_get_boolean(v) != 0;
}

Result<std::vector<std::string>> opt_string_list(const Value &obj, const char *key,
                                                 std::string_view ctx) {
    std::vector<std::string> out;
    json_object *v = field(obj, key);
    if (!v) return out;
    if (!json_object_is_type(v, json_type_array))
        return type_error(ctx, key, "an array of strings");
    for (size_t i = 0, n = json_object_array_length(v); i < n; ++i) {
        json_object *e = json_object_array_get_idx(v, i);
        if (!e || !json_object_is_type(e, json_type_string))
            return type_error(ctx, key, "an array of strings");
        out.push_back(string_of(e));
    }
    return out;
}

Result<std::vector<int>> opt_int_list(const Value &obj, const char *key, std::string_view ctx,
                                      int max_value) {
    std::vector<int> out;
    json_object *v = field(obj, key);
    if (!v) return out;
    if (!json_object_is_type(v, json_type_array))
        return type_error(ctx, key, "an array of integers");
    for (size_t i = 0, n = json_object_array_length(v); i < n; ++i) {
        json_object *e = json_object_array_get_idx(v, i);
        bool neg = false, fits = false;
        uint64_t m = 0;
        int64_t s = 0;
        if (!e || !integral(e, &neg, &m, &s, &fits) || neg || m > static_cast<uint64_t>(max_value))
            return type_error(ctx, key, "an array of integers in range");
        out.push_back(static_cast<int>(m));
    }
    return out;
}

Result<std::map<std::string, std::string>> opt_string_map(const Value &obj, const char *key,
                                                          std::string_view ctx) {
    std::map<std::string, std::string> out;
    json_object *v = field(obj, key);
    if (!v) return out;
    if (!json_object_is_type(v, json_type_object))
        return type_error(ctx, key, "an object of strings");
    struct json_object_iterator it = json_object_iter_begin(v), end = json_object_iter_end(v);
    for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
        json_object *val = json_object_iter_peek_value(&it);
        if (!val || !json_object_is_type(val, json_type_string))
            return type_error(ctx, key, "an object of strings");
        out[json_object_iter_peek_name(&it)] = string_of(val);
    }
    return out;
}

}  // namespace sk::jsonc
