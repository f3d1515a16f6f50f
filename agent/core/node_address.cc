#include "agent/core/node_address.h"

#include <arpa/inet.h>
#include <gnutls/x509.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/fs.h"

namespace sk::agent {

namespace {

std::string default_route_source() {
    // connect() on a UDP socket sends nothing: it only picks the route and so
    // the source address. 192.0.2.1 (TEST-NET-1) is never local; a host
    // without a default route answers ENETUNREACH.
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    inet_pton(AF_INET, "192.0.2.1", &to.sin_addr);
    std::string out;
    sockaddr_in me{};
    socklen_t len = sizeof me;
    if (connect(fd, reinterpret_cast<sockaddr *>(&to), sizeof to) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr *>(&me), &len) == 0 &&
        me.sin_addr.s_addr != htonl(INADDR_ANY) && me.sin_addr.s_addr != htonl(INADDR_LOOPBACK)) {
        char buf[INET_ADDRSTRLEN];
        if (inet_ntop(AF_INET, &me.sin_addr, buf, sizeof buf)) out = buf;
    }
    close(fd);
    return out;
}

std::string first_interface_ipv4() {
    struct ifaddrs *ifs = nullptr;
    std::string out;
    if (getifaddrs(&ifs) != 0) return out;
    for (auto *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP))
            continue;
        char buf[INET_ADDRSTRLEN];
        if (inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr, buf,
                      sizeof buf)) {
            out = buf;
            break;
        }
    }
    freeifaddrs(ifs);
    return out;
}

// The numeric form of an address literal ("10.0.0.1", "fd00::1"); "" if it is not one.
std::string canonical_ip(const std::string &literal) {
    unsigned char raw[sizeof(in6_addr)];
    char buf[INET6_ADDRSTRLEN];
    if (inet_pton(AF_INET, literal.c_str(), raw) == 1)
        return inet_ntop(AF_INET, raw, buf, sizeof buf) ? buf : "";
    if (inet_pton(AF_INET6, literal.c_str(), raw) == 1)
        return inet_ntop(AF_INET6, raw, buf, sizeof buf) ? buf : "";
    return "";
}

}  // namespace

std::string primary_ipv4() {
    std::string a = default_route_source();
    if (a.empty()) a = first_interface_ipv4();
    return a.empty() ? "127.0.0.1" : a;
}

std::string host_name() {
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) return "";
    addrinfo hints{};
    hints.ai_flags = AI_CANONNAME;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    std::string out = host;
    if (getaddrinfo(host, nullptr, &hints, &res) == 0 && res && res->ai_canonname &&
        res->ai_canonname[0])
        out = res->ai_canonname;
    if (res) freeaddrinfo(res);
    return out;
}

Status hostname_usable(const std::string &name, const std::string &address,
                       const std::string &cert_file) {
    if (name.empty()) return fail(Error::InvalidArgument, "no host name");
    std::string want = canonical_ip(address);
    if (want.empty())
        return fail(Error::InvalidArgument, "node_address '" + address + "' is not an IP address");
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res); rc != 0)
        return fail(Error::NotFound, "'" + name + "' does not resolve (" + gai_strerror(rc) + ")");
    bool found = false;
    std::string seen;
    for (auto *r = res; r; r = r->ai_next) {
        char buf[INET6_ADDRSTRLEN] = "";
        const void *src =
            r->ai_family == AF_INET
                ? static_cast<const void *>(&reinterpret_cast<sockaddr_in *>(r->ai_addr)->sin_addr)
                : static_cast<const void *>(
                      &reinterpret_cast<sockaddr_in6 *>(r->ai_addr)->sin6_addr);
        if (!inet_ntop(r->ai_family, src, buf, sizeof buf)) continue;
        if (want == buf) found = true;
        if (seen.find(buf) == std::string::npos)
            seen += std::string(seen.empty() ? "" : ", ") + buf;
    }
    freeaddrinfo(res);
    if (!found)
        return fail(Error::InvalidArgument,
                    "'" + name + "' resolves to " + seen + ", not to node_address " + address);
    if (cert_file.empty()) return {};
    auto pem = read_file(cert_file, 1 << 20);
    if (!pem) return fail(pem.error(), "serving certificate: " + pem.message());
    gnutls_x509_crt_t crt = nullptr;
    if (gnutls_x509_crt_init(&crt) < 0) return fail(Error::Internal, "gnutls_x509_crt_init failed");
    gnutls_datum_t d{reinterpret_cast<unsigned char *>(pem->data()),
                     static_cast<unsigned>(pem->size())};
    int rc = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM);
    // The leaf is the first certificate of the file; GnuTLS reads that one.
    bool ok = rc >= 0 && gnutls_x509_crt_check_hostname2(crt, name.c_str(), 0) != 0;
    gnutls_x509_crt_deinit(crt);
    if (rc < 0)
        return fail(Error::InvalidArgument,
                    cert_file + ": not a PEM certificate (" + gnutls_strerror(rc) + ")");
    if (!ok)
        return fail(Error::InvalidArgument,
                    "the serving certificate " + cert_file + " is not valid for '" + name + "'");
    return {};
}

}  // namespace sk::agent
