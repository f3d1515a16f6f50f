// Strict number/size/duration/index-list parsers (common/strings.h) behind
// every option and config value. Input: 1 selector byte, then the text.
// Properties: no overflow (UBSan), results within the documented bounds,
// index lists format back to text that parses to the same list.
#include <string>

#include "common/strings.h"
#include "tests/fuzz/fuzz_target.h"

SK_FUZZ_TARGET(strings) {
    using namespace sk;
    sk::fuzz::Input in(data, size);
    uint8_t sel = in.byte();
    std::string_view s = in.rest();
    switch (sel % 5) {
        case 0: {
            auto n = parse_uint(s, "fuzz", 1000000);
            if (n) FUZZ_CHECK(*n <= 1000000 && !s.empty());
            break;
        }
        case 1: {
            auto b = parse_bool(s, "fuzz");
            if (!b) FUZZ_CHECK(!b.message().empty());
            break;
        }
        case 2: {
            auto m = parse_size_mib(s, "fuzz");
            if (m) FUZZ_CHECK(*m <= (UINT64_MAX >> 20));  // bytes still fit in 64 bits
            break;
        }
        case 3:
            (void)parse_seconds(s, "fuzz");
            break;
        default: {
            auto v = parse_index_list(s, "fuzz");
            if (!v) break;
            for (int i : *v)
                FUZZ_CHECK(i >= 0 && i <= (1 << 20));
            auto back = parse_index_list(format_index_list(*v), "fuzz");
            FUZZ_CHECK(back.ok() && *back == *v);
            std::string t(trim(s));
            (void)split(t, ',');
            break;
        }
    }
    return 0;
}
