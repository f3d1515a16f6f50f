// Strict key=value configuration: plugstack.conf arguments ("key=value" words)
// and agent.conf (one "key = value" per line, '#' comments). A schema maps each
// known key to a typed destination; an unknown key, a bad value or a scalar set
// twice is an error that names the key, the value, where it came from and what
// is allowed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk {

struct KeyValue {
    std::string key;
    std::string value;
    std::string where;  // "plugstack.conf argument 3", "/etc/slurm-k8s/agent.conf:12"
};

// Each argv word must be key=value (value may be empty).
Result<std::vector<KeyValue>> parse_kv_args(int argc, const char *const *argv,
                                            std::string_view source);
// Lines "key = value" or "key=value"; blank lines and '#' comments skipped;
// a value may be double-quoted to keep leading/trailing spaces or '#'.
Result<std::vector<KeyValue>> parse_kv_text(std::string_view text, std::string_view source);

class ConfigSchema {
  public:
    // Setters get the raw value and return an error message ("" = accepted).
    using Setter = std::function<Status(const std::string &value, const std::string &key)>;

    void add(std::string key, std::string doc, Setter set, bool repeatable = false);

    void add_string(std::string key, std::string *dst, std::string doc);
    void add_path(std::string key, std::string *dst, std::string doc);  // must be absolute
    void add_uint(std::string key, uint64_t *dst, uint64_t min, uint64_t max, std::string doc);
    void add_bool(std::string key, bool *dst, std::string doc);
    // A CPU scheduling nice value, -20..19 (setpriority(2)).
    void add_nice(std::string key, int *dst, std::string doc);
    void add_seconds(std::string key, uint64_t *dst, uint64_t min, uint64_t max, std::string doc);
    void add_enum(std::string key, std::string *dst, std::vector<std::string> choices,
                  std::string doc);
    // Comma-separated, empty fields rejected; repeated keys append.
    void add_list(std::string key, std::vector<std::string> *dst, std::string doc);

    Status apply(const std::vector<KeyValue> &kvs) const;
    std::vector<std::string> keys() const;
    // "key: doc" lines, for --help and documentation.
    std::string describe() const;

  private:
    struct Entry {
        std::string key, doc;
        Setter set;
        bool repeatable;
    };
    const Entry *find(std::string_view key) const;
    std::vector<Entry> entries_;
};

}  // namespace sk
