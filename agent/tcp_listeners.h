// Which local TCP listener a port-forward may reach (docs/security.md,
// "port-forward"): pods run on the host's network, so a port number alone
// could name any service of the host (sshd, the agent's own endpoints). The
// agent forwards only to a socket that listens on the port and belongs to
// the job's user, as /proc/net/tcp and /proc/net/tcp6 show it (the socket's
// owner uid). Pure: parses the files' text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sk::agent {

struct Listener {
    bool v6 = false;
    std::string connect_to;  // the address to dial: loopback for a wildcard bind
};

// The first socket in LISTEN state on `port` owned by `uid` in the text of
// /proc/net/tcp (v6 = false) or /proc/net/tcp6 (v6 = true); nullopt when
// none is (malformed lines are skipped).
std::optional<Listener> find_listener(std::string_view proc_net_tcp, bool v6, uint16_t port,
                                      uint32_t uid);

}  // namespace sk::agent
