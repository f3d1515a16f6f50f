#include "agent/tcp_listeners.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace sk::agent {

namespace {

std::vector<std::string_view> fields(std::string_view line) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
            i++;
        size_t j = i;
        while (j < line.size() && line[j] != ' ' && line[j] != '\t')
            j++;
        if (j > i) out.push_back(line.substr(i, j - i));
        i = j;
    }
    return out;
}

bool hex_value(std::string_view s, uint64_t *out) {
    if (s.empty() || s.size() > 16) return false;
    uint64_t v = 0;
    for (char c : s) {
        int d = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                         : -1;
        if (d < 0) return false;
        v = v * 16 + static_cast<uint64_t>(d);
    }
    *out = v;
    return true;
}

bool dec_value(std::string_view s, uint64_t *out) {
    if (s.empty() || s.size() > 10) return false;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    *out = v;
    return true;
}

// The kernel prints an address as its bytes in the host's order, 32 bits
// at a time ("0100007F" is 127.0.0.1 on little-endian machines).
bool address_of(std::string_view hex, bool v6, unsigned char *bytes) {
    size_t words = v6 ? 4 : 1;
    if (hex.size() != words * 8) return false;
    for (size_t w = 0; w < words; w++) {
        uint64_t v = 0;
        if (!hex_value(hex.substr(w * 8, 8), &v)) return false;
        auto word = static_cast<uint32_t>(v);
        memcpy(bytes + w * 4, &word, 4);
    }
    return true;
}

}  // namespace

std::optional<Listener> find_listener(std::string_view text, bool v6, uint16_t port, uint32_t uid) {
    size_t pos = 0;
    bool header = true;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line =
            text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        if (header) {  // "  sl  local_address rem_address   st ..."
            header = false;
            continue;
        }
        auto f = fields(line);
        // sl local rem st tx:rx tr:when retrnsmt uid ...
        if (f.size() < 8) continue;
        size_t colon = f[1].find(':');
        if (colon == std::string_view::npos) continue;
        uint64_t p = 0, st = 0, owner = 0;
        if (!hex_value(f[1].substr(colon + 1), &p) || p != port) continue;
        if (!hex_value(f[3], &st) || st != 0x0A) continue;  // TCP_LISTEN
        if (!dec_value(f[7], &owner) || owner != uid) continue;
        unsigned char a[16] = {};
        if (!address_of(f[1].substr(0, colon), v6, a)) continue;
        Listener l;
        l.v6 = v6;
        char buf[INET6_ADDRSTRLEN] = {};
        static const unsigned char zero[16] = {};
        if (memcmp(a, zero, v6 ? 16 : 4) == 0) {
            l.connect_to = v6 ? "::1" : "127.0.0.1";  // a wildcard bind answers on loopback
        } else {
            if (!inet_ntop(v6 ? AF_INET6 : AF_INET, a, buf, sizeof buf)) continue;
            l.connect_to = buf;
        }
        return l;
    }
    return std::nullopt;
}

}  // namespace sk::agent
