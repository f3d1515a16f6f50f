// Strict key=value configuration (common/config.h): agent.conf text and
// plugstack.conf argument words, both written by admins and read by root
// daemons. A schema with every setter kind is applied to what parses.
// Input: 1 selector byte, then the text (for argv: words split at NUL bytes).
// Properties: no crash; a refusal names its source; every accepted pair has a
// valid key and a `where` naming the source; list entries are never empty.
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;

struct Dest {
    std::string socket, name, mode;
    uint64_t timeout = 0, max_gpus = 0;
    bool enabled = false;
    std::vector<std::string> namespaces;
};

ConfigSchema schema(Dest *d) {
    ConfigSchema s;
    s.add_path("socket", &d->socket, "agent socket");
    s.add_string("name", &d->name, "a name");
    s.add_enum("mode", &d->mode, {"uid", "cgroup"}, "auth mode");
    s.add_seconds("timeout", &d->timeout, 1, 3600, "timeout");
    s.add_uint("max_gpus", &d->max_gpus, 0, 64, "max GPUs");
    s.add_bool("enabled", &d->enabled, "on/off");
    s.add_list("namespaces", &d->namespaces, "allowed namespaces");
    return s;
}

void check_and_apply(const Result<std::vector<KeyValue>> &kvs, std::string_view source) {
    if (!kvs) {
        FUZZ_CHECK(kvs.message().find(source) != std::string::npos);
        return;
    }
    for (const auto &kv : *kvs) {
        FUZZ_CHECK(!kv.key.empty());
        FUZZ_CHECK(kv.where.find(source) == 0);
    }
    Dest d;
    ConfigSchema s = schema(&d);
    auto st = s.apply(*kvs);
    if (!st) {
        FUZZ_CHECK(!st.message().empty());
        return;
    }
    for (const auto &ns : d.namespaces)
        FUZZ_CHECK(!ns.empty());
    if (!d.socket.empty()) FUZZ_CHECK(d.socket[0] == '/');
    FUZZ_CHECK(d.max_gpus <= 64);
}

}  // namespace

SK_FUZZ_TARGET(config) {
    sk::fuzz::Input in(data, size);
    bool as_args = in.byte() & 1;
    std::string_view text = in.rest();
    if (!as_args) {
        check_and_apply(parse_kv_text(text, "agent.conf"), "agent.conf");
        return 0;
    }
    std::vector<std::string> words;
    size_t start = 0;
    for (;;) {
        size_t nul = text.find('\0', start);
        words.emplace_back(text.substr(start, nul == std::string_view::npos ? nul : nul - start));
        if (nul == std::string_view::npos) break;
        start = nul + 1;
    }
    std::vector<const char *> argv;
    argv.reserve(words.size());
    for (const auto &w : words)
        argv.push_back(w.c_str());
    check_and_apply(parse_kv_args(static_cast<int>(argv.size()), argv.data(), "plugstack.conf"),
                    "plugstack.conf");
    return 0;
}
