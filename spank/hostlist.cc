#include "spank/hostlist.h"

#include <cstdio>

#include "common/strings.h"

namespace sk::spank {
namespace {

// "1-3" or "07" inside brackets; keeps zero padding ("01-10" -> 01..10).
Status expand_range(const std::string &prefix, const std::string &range, const std::string &all,
                    std::vector<std::string> *out) {
    auto dash = range.find('-');
    std::string a = range.substr(0, dash),
                b = dash == std::string::npos ? a : range.substr(dash + 1);
    auto lo = parse_uint(a, "host list"), hi = parse_uint(b, "host list");
    if (!lo || !hi || *hi < *lo || *hi - *lo > 100000)
        return fail(Error::Parse, "host list '" + all + "': bad range '" + range + "'");
    for (uint64_t i = *lo; i <= *hi; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%0*llu", static_cast<int>(a.size()),
                 static_cast<unsigned long long>(i));
        out->push_back(prefix + buf);
    }
    return {};
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(const std::string &list) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < list.size()) {
        size_t end = i;
        int depth = 0;
        while (end < list.size() && (depth > 0 || list[end] != ',')) {
            if (list[end] == '[') depth++;
            if (list[end] == ']') depth--;
            end++;
        }
        std::string item = list.substr(i, end - i);
        i = end + 1;
        if (item.empty()) return fail(Error::Parse, "host list '" + list + "': empty item");
        auto lb = item.find('[');
        if (lb == std::string::npos) {
            out.push_back(item);
            continue;
        }
        auto rb = item.find(']', lb);
        if (rb == std::string::npos || rb + 1 != item.size())
            return fail(Error::Parse, "host list '" + list + "': bad item '" + item + "'");
        for (const auto &r : split(item.substr(lb + 1, rb - lb - 1), ','))
            if (auto s = expand_range(item.substr(0, lb), r, list, &out); !s) return s.failure();
    }
    return out;
}

}  // namespace sk::spank
