// Strict JSON parsing (common/daemons/json.h), the first step for every socket message
// and, in the agent, for API server replies. Properties:
// - parse never throws, recurses without bound, or accepts a document twice
//   as deep as kMaxDepth;
// - write() of a parsed value is one line that parses back to an equal value;
// - the typed getters never crash on any shape, and a refusal says why.
#include <algorithm>
#include <string>

#include "common/daemons/json.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;

size_t depth(const Json::Value &v) {
    size_t d = 0;
    if (v.isArray() || v.isObject())
        for (const auto &c : v)
            d = std::max(d, depth(c));
    return (v.isArray() || v.isObject()) ? d + 1 : 0;
}

template <typename R>
void refusal_says_why(const R &r) {
    if (!r.ok()) FUZZ_CHECK(!r.message().empty());
}

void getters(const Json::Value &v) {
    // Keys chosen to hit the documents the corpus and the fuzzer build.
    for (const char *key : {"a", "id", "body", "gpus", "labels", "v", ""}) {
        refusal_says_why(json::get_string(v, key, "fuzz"));
        refusal_says_why(json::opt_string(v, key, "fuzz"));
        refusal_says_why(json::get_uint(v, key, "fuzz", 1000));
        refusal_says_why(json::opt_uint(v, key, "fuzz", 0));
        refusal_says_why(json::opt_int(v, key, "fuzz", 0));
        refusal_says_why(json::opt_bool(v, key, "fuzz", false));
        refusal_says_why(json::opt_string_list(v, key, "fuzz"));
        refusal_says_why(json::opt_int_list(v, key, "fuzz", 1023));
        refusal_says_why(json::opt_string_map(v, key, "fuzz"));
    }
}

}  // namespace

SK_FUZZ_TARGET(json) {
    auto v = json::parse(sk::fuzz::as_text(data, size));
    if (!v) {
        FUZZ_CHECK(!v.message().empty());
        return 0;
    }
    FUZZ_CHECK(depth(*v) <= json::kMaxDepth + 1);
    std::string text = json::write(*v);
    FUZZ_CHECK(text.find('\n') == std::string::npos);
    auto back = json::parse(text);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(*back == *v);
    getters(*v);
    return 0;
}
