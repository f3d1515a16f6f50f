#include "common/daemons/tcp_listeners.h"

#include <arpa/inet.h>
#include <pwd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace sk {

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

// Calls fn(local address bytes, uid) for every LISTEN socket on `port`.
template <typename Fn>
void each_listener(std::string_view text, bool v6, uint16_t port, Fn fn) {
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
        if (!dec_value(f[7], &owner) || owner > UINT32_MAX) continue;
        unsigned char a[16] = {};
        if (!address_of(f[1].substr(0, colon), v6, a)) continue;
        fn(a, static_cast<uint32_t>(owner));
    }
}

}  // namespace

std::vector<IdRange> subordinate_ids(std::string_view text, uint32_t uid) {
    std::string name;
    struct passwd pw, *found = nullptr;
    std::vector<char> buf(16384);
    if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) name = pw.pw_name;
    std::vector<IdRange> out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line =
            text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
        if (b == std::string_view::npos) continue;
        std::string_view who = line.substr(0, a);
        if (who != std::to_string(uid) && (name.empty() || who != name)) continue;
        uint64_t first = 0, count = 0;
        if (!dec_value(line.substr(a + 1, b - a - 1), &first) ||
            !dec_value(line.substr(b + 1), &count) || first > UINT32_MAX || count > UINT32_MAX)
            continue;
        out.push_back({static_cast<uint32_t>(first), static_cast<uint32_t>(count)});
    }
    return out;
}

std::optional<AcceptingListener> accepting_listener(std::string_view tcp, std::string_view tcp6,
                                                    const std::string &address, uint16_t port) {
    unsigned char want[16] = {};
    bool v6 = inet_pton(AF_INET6, address.c_str(), want) == 1;
    if (!v6 && inet_pton(AF_INET, address.c_str(), want) != 1) return std::nullopt;
    static const unsigned char zero[16] = {};
    // v4 as mapped into v6 (::ffff:a.b.c.d), for a v6 socket taking it.
    unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!v6) memcpy(mapped + 12, want, 4);
    // Rank: 3 the very address, 2 the family's wildcard, 1 a dual-stack ::.
    int best = 0;
    AcceptingListener out;
    auto consider = [&](int rank, uint32_t uid, bool sock_v6, const unsigned char *a) {
        if (rank <= best) return;
        best = rank;
        char buf[INET6_ADDRSTRLEN] = {};
        out.uid = uid;
        out.bound = inet_ntop(sock_v6 ? AF_INET6 : AF_INET, a, buf, sizeof buf) ? buf : "";
    };
    if (!v6)
        each_listener(tcp, false, port, [&](const unsigned char *a, uint32_t uid) {
            if (memcmp(a, want, 4) == 0)
                consider(3, uid, false, a);
            else if (memcmp(a, zero, 4) == 0)
                consider(2, uid, false, a);
        });
    each_listener(tcp6, true, port, [&](const unsigned char *a, uint32_t uid) {
        if (v6 ? memcmp(a, want, 16) == 0 : memcmp(a, mapped, 16) == 0)
            consider(3, uid, true, a);
        else if (memcmp(a, zero, 16) == 0)
            consider(v6 ? 2 : 1, uid, true, a);
    });
    if (!best) return std::nullopt;
    return out;
}

std::optional<Listener> find_listener(std::string_view text, bool v6, uint16_t port, uint32_t uid) {
    std::optional<Listener> out;
    each_listener(text, v6, port, [&](const unsigned char *a, uint32_t owner) {
        if (out || owner != uid) return;
        static const unsigned char zero[16] = {};
        Listener l;
        l.v6 = v6;
        if (memcmp(a, zero, v6 ? 16 : 4) == 0) {
            l.connect_to = v6 ? "::1" : "127.0.0.1";  // a wildcard bind answers on loopback
        } else {
            char buf[INET6_ADDRSTRLEN] = {};
            if (!inet_ntop(v6 ? AF_INET6 : AF_INET, a, buf, sizeof buf)) return;
            l.connect_to = buf;
        }
        out = l;
    });
    return out;
}

}  // namespace sk
