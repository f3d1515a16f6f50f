#include "common/config.h"

#include <algorithm>
#include <set>

#include "common/strings.h"

namespace sk {

static bool valid_key(std::string_view k) {
    if (k.empty()) return false;
    return std::all_of(k.begin(), k.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    });
}

Result<std::vector<KeyValue>> parse_kv_args(int argc, const char *const *argv,
                                            std::string_view source) {
    std::vector<KeyValue> out;
    for (int i = 0; i < argc; i++) {
        std::string_view word = argv[i] ? argv[i] : "";
        std::string where = std::string(source) + " argument " + std::to_string(i + 1);
        auto eq = word.find('=');
        if (eq == std::string_view::npos)
            return fail(Error::InvalidArgument,
                        where + ": '" + std::string(word) + "' is not key=value");
        std::string key(word.substr(0, eq));
        if (!valid_key(key))
            return fail(Error::InvalidArgument, where + ": '" + key + "' is not a valid key name");
        out.push_back({key, std::string(word.substr(eq + 1)), where});
    }
    return out;
}

Result<std::vector<KeyValue>> parse_kv_text(std::string_view text, std::string_view source) {
    std::vector<KeyValue> out;
    size_t lineno = 0;
    for (const auto &raw : split(text, '\n')) {
        lineno++;
        std::string where = std::string(source) + ":" + std::to_string(lineno);
        std::string_view line = trim(raw);
        if (line.empty() || line[0] == '#') continue;
        auto eq = line.find('=');
        if (eq == std::string_view::npos)
            return fail(Error::Parse,
                        where + ": expected 'key = value', got '" + std::string(line) + "'");
        std::string key(trim(line.substr(0, eq)));
        std::string_view value = trim(line.substr(eq + 1));
        if (!valid_key(key))
            return fail(Error::Parse, where + ": '" + key + "' is not a valid key name");
        std::string v;
        if (!value.empty() && value[0] == '"') {
            auto close = value.find('"', 1);
            if (close == std::string_view::npos)
                return fail(Error::Parse, where + ": unterminated quote in value of " + key);
            std::string_view rest = trim(value.substr(close + 1));
            if (!rest.empty() && rest[0] != '#')
                return fail(Error::Parse, where + ": text after the closing quote of " + key);
            v = std::string(value.substr(1, close - 1));
        } else {
            auto hash = value.find(" #");
            v = std::string(trim(value.substr(0, hash)));
        }
        out.push_back({key, v, where});
    }
    return out;
}

void ConfigSchema::add(std::string key, std::string doc, Setter set, bool repeatable) {
    entries_.push_back({std::move(key), std::move(doc), std::move(set), repeatable});
}

void ConfigSchema::add_string(std::string key, std::string *dst, std::string doc) {
    add(std::move(key), std::move(doc), [dst](const std::string &v, const std::string &) -> Status {
        *dst = v;
        return {};
    });
}

void ConfigSchema::add_path(std::string key, std::string *dst, std::string doc) {
    add(std::move(key), std::move(doc),
        [dst](const std::string &v, const std::string &k) -> Status {
            if (v.empty() || v[0] != '/')
                return fail(Error::InvalidArgument, k + "='" + v + "' must be an absolute path");
            *dst = v;
            return {};
        });
}

void ConfigSchema::add_uint(std::string key, uint64_t *dst, uint64_t min, uint64_t max,
                            std::string doc) {
    add(std::move(key), std::move(doc),
        [dst, min, max](const std::string &v, const std::string &k) -> Status {
            auto n = parse_uint(v, k, UINT64_MAX);
            if (!n) return n.failure();
            if (*n < min || *n > max)
                return fail(Error::InvalidArgument, k + "=" + v + " is out of range (allowed " +
                                                        std::to_string(min) + ".." +
                                                        std::to_string(max) + ")");
            *dst = *n;
            return {};
        });
}

void ConfigSchema::add_nice(std::string key, int *dst, std::string doc) {
    add(std::move(key), std::move(doc),
        [dst](const std::string &v, const std::string &k) -> Status {
            auto n = parse_nice(v, k);
            if (!n) return n.failure();
            *dst = *n;
            return {};
        });
}

void ConfigSchema::add_bool(std::string key, bool *dst, std::string doc) {
    add(std::move(key), std::move(doc),
        [dst](const std::string &v, const std::string &k) -> Status {
            auto b = parse_bool(v, k);
            if (!b) return b.failure();
            *dst = *b;
            return {};
        });
}

void ConfigSchema::add_seconds(std::string key, uint64_t *dst, uint64_t min, uint64_t max,
                               std::string doc) {
    add(std::move(key), std::move(doc),
        [dst, min, max](const std::string &v, const std::string &k) -> Status {
            auto n = parse_seconds(v, k);
            if (!n) return n.failure();
            if (*n < min || *n > max)
                return fail(Error::InvalidArgument, k + "=" + v + " is out of range (allowed " +
                                                        std::to_string(min) + "s.." +
                                                        std::to_string(max) + "s)");
            *dst = *n;
            return {};
        });
}

void ConfigSchema::add_enum(std::string key, std::string *dst, std::vector<std::string> choices,
                            std::string doc) {
    add(std::move(key), std::move(doc),
        [dst, choices = std::move(choices)](const std::string &v, const std::string &k) -> Status {
            if (std::find(choices.begin(), choices.end(), v) == choices.end())
                return fail(Error::InvalidArgument,
                            k + "='" + v + "' is not one of: " + join(choices, ", "));
            *dst = v;
            return {};
        });
}

void ConfigSchema::add_list(std::string key, std::vector<std::string> *dst, std::string doc) {
    add(
        std::move(key), std::move(doc),
        [dst](const std::string &v, const std::string &k) -> Status {
            if (v.empty()) {  // "key=" clears the list: an explicit "none"
                dst->clear();
                return {};
            }
            for (const auto &item : split(v, ',')) {
                std::string t(trim(item));
                if (t.empty())
                    return fail(Error::InvalidArgument, k + "='" + v + "' has an empty list item");
                dst->push_back(t);
            }
            return {};
        },
        true);
}

const ConfigSchema::Entry *ConfigSchema::find(std::string_view key) const {
    for (const auto &e : entries_)
        if (e.key == key) return &e;
    return nullptr;
}

Status ConfigSchema::apply(const std::vector<KeyValue> &kvs) const {
    std::set<std::string> seen;
    for (const auto &kv : kvs) {
        const Entry *e = find(kv.key);
        if (!e)
            return fail(Error::InvalidArgument, kv.where + ": unknown key '" + kv.key +
                                                    "' (known keys: " + join(keys(), ", ") + ")");
        if (!e->repeatable && !seen.insert(kv.key).second)
            return fail(Error::InvalidArgument, kv.where + ": key '" + kv.key + "' is set twice");
        auto st = e->set(kv.value, kv.key);
        if (!st) return fail(st.error(), kv.where + ": " + st.message());
    }
    return {};
}

std::vector<std::string> ConfigSchema::keys() const {
    std::vector<std::string> out;
    for (const auto &e : entries_)
        out.push_back(e.key);
    return out;
}

std::string ConfigSchema::describe() const {
    std::string out;
    for (const auto &e : entries_)
        out += e.key + ": " + e.doc + "\n";
    return out;
}

}  // namespace sk
