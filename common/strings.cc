#include "common/strings.h"

#include <algorithm>
#include <cctype>

namespace sk {

std::string_view trim(std::string_view s) noexcept {
    size_t b = 0, e = s.size();
    while (b < e && isspace(static_cast<unsigned char>(s[b])))
        b++;
    while (e > b && isspace(static_cast<unsigned char>(s[e - 1])))
        e--;
    return s.substr(b, e - b);
}

std::vector<std::string> split(std::string_view s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t pos = s.find(sep, start);
        if (pos == std::string_view::npos) {
            out.emplace_back(s.substr(start));
            return out;
        }
        out.emplace_back(s.substr(start, pos - start));
        start = pos + 1;
    }
}

bool starts_with(std::string_view s, std::string_view p) noexcept {
    return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}
bool ends_with(std::string_view s, std::string_view x) noexcept {
    return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

std::string join(const std::vector<std::string> &parts, std::string_view sep) {
    std::string out;
    for (size_t i = 0; i < parts.size(); i++) {
        if (i) out += sep;
        out += parts[i];
    }
    return out;
}

std::string hex_encode(const void *data, size_t n) {
    static const char kDigits[] = "0123456789abcdef";
    const auto *p = static_cast<const unsigned char *>(data);
    std::string out(2 * n, '0');
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = kDigits[p[i] >> 4];
        out[2 * i + 1] = kDigits[p[i] & 0x0f];
    }
    return out;
}

static Failure bad_value(std::string_view what, std::string_view s, std::string_view expect) {
    return fail(Error::InvalidArgument,
                std::string(what) + ": '" + std::string(s) + "' is not " + std::string(expect));
}

Result<uint64_t> parse_uint(std::string_view s, std::string_view what, uint64_t max) {
    if (s.empty()) return bad_value(what, s, "a number (empty value)");
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return bad_value(what, s, "a non-negative whole number");
        uint64_t d = static_cast<uint64_t>(c - '0');
        if (v > (UINT64_MAX - d) / 10) return bad_value(what, s, "a number in range");
        v = v * 10 + d;
    }
    if (v > max)
        return fail(Error::InvalidArgument, std::string(what) + ": " + std::string(s) +
                                                " is too large (at most " + std::to_string(max) +
                                                ")");
    return v;
}

std::optional<uint64_t> to_uint(std::string_view s) {
    auto n = parse_uint(s, "value");
    if (!n) return std::nullopt;
    return *n;
}

Result<int> parse_nice(std::string_view s, std::string_view what) {
    bool neg = !s.empty() && s[0] == '-';
    auto n = parse_uint(neg ? s.substr(1) : s, what, 20);
    if (!n || (!neg && *n > 19))
        return fail(Error::InvalidArgument, std::string(what) + "='" + std::string(s) +
                                                "' is not a nice value (allowed -20..19)");
    return neg ? -static_cast<int>(*n) : static_cast<int>(*n);
}

Result<bool> parse_bool(std::string_view s, std::string_view what) {
    std::string l(s);
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return tolower(c); });
    if (l == "yes" || l == "true" || l == "1" || l == "on") return true;
    if (l == "no" || l == "false" || l == "0" || l == "off") return false;
    return bad_value(what, s, "a boolean (yes/no, true/false, 1/0, on/off)");
}

Result<uint64_t> parse_size_mib(std::string_view s, std::string_view what) {
    std::string_view num = s, suf;
    size_t i = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9')
        i++;
    num = s.substr(0, i);
    suf = s.substr(i);
    auto n = parse_uint(num, what, UINT64_MAX >> 20);
    if (!n) return bad_value(what, s, "a size like 512M, 16G or 1T");
    uint64_t mult;
    if (suf.empty() || suf == "M" || suf == "m" || suf == "Mi" || suf == "MB")
        mult = 1;
    else if (suf == "G" || suf == "g" || suf == "Gi" || suf == "GB")
        mult = 1024;
    else if (suf == "T" || suf == "t" || suf == "Ti" || suf == "TB")
        mult = 1024ull * 1024;
    else
        return bad_value(what, s, "a size like 512M, 16G or 1T (suffix M, G or T)");
    if (*n > UINT64_MAX / (mult << 20)) return bad_value(what, s, "a size in range");
    return *n * mult;
}

Result<uint64_t> parse_seconds(std::string_view s, std::string_view what) {
    uint64_t mult = 1;
    std::string_view num = s;
    if (!s.empty()) {
        switch (s.back()) {
            case 's':
                mult = 1;
                num = s.substr(0, s.size() - 1);
                break;
            case 'm':
                mult = 60;
                num = s.substr(0, s.size() - 1);
                break;
            case 'h':
                mult = 3600;
                num = s.substr(0, s.size() - 1);
                break;
            default:
                break;
        }
    }
    auto n = parse_uint(num, what, UINT64_MAX / 3600);
    if (!n) return bad_value(what, s, "a duration like 30, 30s, 5m or 2h");
    return *n * mult;
}

Result<std::vector<int>> parse_index_list(std::string_view s, std::string_view what) {
    std::vector<int> out;
    if (trim(s).empty()) return out;
    for (const auto &part : split(s, ',')) {
        auto dash = part.find('-');
        if (dash == std::string::npos) {
            auto v = parse_uint(trim(part), what, 1u << 20);
            if (!v) return v.failure();
            out.push_back(static_cast<int>(*v));
            continue;
        }
        auto lo = parse_uint(trim(std::string_view(part).substr(0, dash)), what, 1u << 20);
        auto hi = parse_uint(trim(std::string_view(part).substr(dash + 1)), what, 1u << 20);
        if (!lo) return lo.failure();
        if (!hi) return hi.failure();
        if (*lo > *hi) return bad_value(what, part, "an ascending range");
        if (*hi - *lo > 4096) return bad_value(what, part, "a range of at most 4096 entries");
        for (uint64_t i = *lo; i <= *hi; i++)
            out.push_back(static_cast<int>(i));
    }
    return out;
}

std::string format_index_list(const std::vector<int> &v) {
    std::string out;
    for (size_t i = 0; i < v.size(); i++) {
        if (i) out += ',';
        out += std::to_string(v[i]);
    }
    return out;
}

}  // namespace sk
