// Kubernetes name/label/taint parsing (common/k8s_names.h): user text from
// --k8s-labels/--k8s-taints/--k8s-namespace and register bodies. Input:
// 1 selector byte, then the text. Properties: whatever parses satisfies the
// validators it was checked against, and formats back to an equal value.
#include <string>

#include "common/k8s_names.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;
using namespace sk::k8s;

bool valid_effect(const std::string &e) {
    return e == "NoSchedule" || e == "PreferNoSchedule" || e == "NoExecute";
}

void taint_round_trip(const Taint &t) {
    FUZZ_CHECK(is_qualified_name(t.key) && is_label_value(t.value) && valid_effect(t.effect));
    auto back = parse_taint(format_taint(t));
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(*back == t);
}

void validators(std::string_view s) {
    bool label = is_dns1123_label(s);
    bool sub = is_dns1123_subdomain(s);
    FUZZ_CHECK(!label || sub);  // a label is a one-part subdomain
    FUZZ_CHECK(!label || s.size() <= 63);
    FUZZ_CHECK(!sub || s.size() <= 253);
    if (is_qualified_name(s)) FUZZ_CHECK(s.size() <= 253 + 1 + 63);
    FUZZ_CHECK(!is_label_value(s) || s.size() <= 63);
}

}  // namespace

SK_FUZZ_TARGET(k8s_names) {
    sk::fuzz::Input in(data, size);
    uint8_t sel = in.byte();
    std::string_view s = in.rest();
    validators(s);
    switch (sel % 3) {
        case 0: {
            auto labels = parse_labels(s);
            if (!labels) break;
            std::string joined;
            for (const auto &[k, v] : *labels) {
                FUZZ_CHECK(is_qualified_name(k) && is_label_value(v));
                joined += (joined.empty() ? "" : ",") + k + "=" + v;
            }
            auto back = parse_labels(joined);
            FUZZ_CHECK(back.ok() && *back == *labels);
            break;
        }
        case 1: {
            auto taints = parse_taints(s);
            if (taints)
                for (const auto &t : *taints)
                    taint_round_trip(t);
            break;
        }
        default: {
            auto t = parse_taint(s);
            if (t)
                taint_round_trip(*t);
            else
                FUZZ_CHECK(!t.message().empty());
            break;
        }
    }
    return 0;
}
