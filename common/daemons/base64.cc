#include "common/daemons/base64.h"

#include <cstdint>

namespace sk {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int value_of(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

Failure invalid() {
    return fail(Error::Invalid, "invalid base64 data");
}

}  // namespace

std::string base64_encode(std::string_view in) {
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        uint32_t n = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) |
                     uint8_t(in[i + 2]);
        for (int s = 18; s >= 0; s -= 6)
            out += kAlphabet[(n >> s) & 63];
    }
    size_t rest = in.size() - i;
    if (rest == 0) return out;
    uint32_t n = uint32_t(uint8_t(in[i])) << 16;
    if (rest == 2) n |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
    return out;
}

Result<std::string> base64_decode(std::string_view in) {
    if (in.size() % 4 != 0) return invalid();
    size_t pad = 0;
    while (pad < 2 && pad < in.size() && in[in.size() - 1 - pad] == '=')
        pad++;
    std::string out;
    out.reserve(in.size() / 4 * 3);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < in.size() - pad; i++) {
        int v = value_of(in[i]);
        if (v < 0) return invalid();
        acc = ((acc << 6) | static_cast<uint32_t>(v)) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xff);
        }
    }
    // The bits left over are the unused low bits of the last character.
    if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return invalid();
    return out;
}

}  // namespace sk
