// Who owns a local TCP listener, as /proc/net/tcp and /proc/net/tcp6 show it
// (the socket's owner uid). Pods run on the host's network, so a port number
// alone could name any service of the host, or another user's pod that took
// the port first (docs/security.md): a port-forward reaches only a socket of
// the job's user (find_listener), and an httpGet or tcpSocket probe passes
// only when the socket that accepts its connection is the job user's
// (accepting_listener). Pure: parses the files' text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sk {

struct Listener {
    bool v6 = false;
    std::string connect_to;  // the address to dial: loopback for a wildcard bind
};

// The first socket in LISTEN state on `port` owned by `uid` in the text of
// /proc/net/tcp (v6 = false) or /proc/net/tcp6 (v6 = true); nullopt when
// none is (malformed lines are skipped).
std::optional<Listener> find_listener(std::string_view proc_net_tcp, bool v6, uint16_t port,
                                      uint32_t uid);

// The socket in LISTEN state that takes a connection to `address` (an IPv4
// or IPv6 literal) on `port`, as the kernel picks it: one bound to that very
// address, else a wildcard of the address's family (0.0.0.0 or ::), else,
// for IPv4, a dual-stack :: socket. Its owner's uid and the address it is
// bound to; nullopt when none listens there (or the address is no literal).
// The ranges of /etc/subuid (text) given to the user with this uid, named by
// its name or its uid ("alice:100000:65536", "1000:165536:65536").
struct IdRange {
    uint32_t first = 0, count = 0;
};
std::vector<IdRange> subordinate_ids(std::string_view subuid_text, uint32_t uid);

struct AcceptingListener {
    uint32_t uid = 0;
    std::string bound;  // its local address, "0.0.0.0" or "::" for a wildcard
};
std::optional<AcceptingListener> accepting_listener(std::string_view proc_net_tcp,
                                                    std::string_view proc_net_tcp6,
                                                    const std::string &address, uint16_t port);

}  // namespace sk
