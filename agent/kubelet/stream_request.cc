#include "agent/kubelet/stream_request.h"

#include <algorithm>
#include <cctype>

#include "agent/kubelet/streams/remotecommand.h"
#include "common/strings.h"

namespace sk {
namespace {

std::string lower(std::string_view s) {
    std::string l(s);
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    return l;
}

// Every value of header `name` (any case), each comma-separated list split.
std::vector<std::string> header_tokens(const Pairs &headers, std::string_view name) {
    std::vector<std::string> out;
    std::string want = lower(name);
    for (const auto &[k, v] : headers) {
        if (lower(k) != want) continue;
        for (const auto &t : split(v, ',')) {
            std::string tok(trim(t));
            if (!tok.empty()) out.push_back(tok);
        }
    }
    return out;
}

bool has_token(const std::vector<std::string> &tokens, std::string_view want) {
    for (const auto &t : tokens)
        if (lower(t) == want) return true;
    return false;
}

// Go's %v of a []string: "[a b c]".
std::string go_list(const std::vector<std::string> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); i++)
        s += (i ? " " : "") + v[i];
    return s + "]";
}

std::string go_list(const std::vector<std::string_view> &v) {
    return go_list(std::vector<std::string>(v.begin(), v.end()));
}

StreamParse refused(int status, std::string body) {
    StreamParse p;
    p.refusal = {status, std::move(body) + "\n"};
    return p;
}

}  // namespace

const std::vector<std::string_view> &exec_protocols(StreamTransport t) {
    static const std::vector<std::string_view> spdy = {remotecommand::kStreamProtocolV4};
    static const std::vector<std::string_view> ws = {"v5.channel.k8s.io", "v4.channel.k8s.io"};
    return t == StreamTransport::Spdy ? spdy : ws;
}

// Port-forward over WebSocket is the channel protocol (data on 2i, errors
// on 2i+1), binary, as the kubelet's; kubectl itself uses SPDY (1.31+ first
// tries SPDY tunnelled in WebSocket, which a 1.28 kubelet does not speak
// either, and falls back).
const std::vector<std::string_view> &port_forward_protocols(StreamTransport t) {
    static const std::vector<std::string_view> spdy = {remotecommand::kPortForwardProtocol};
    static const std::vector<std::string_view> ws = {"v4.channel.k8s.io", "channel.k8s.io"};
    return t == StreamTransport::Spdy ? spdy : ws;
}

StreamParse parse_stream_request(std::string_view method, std::string_view path, const Pairs &query,
                                 const Pairs &headers) {
    StreamParse p;
    auto parts = split(path, '/');
    StreamRequest &r = p.request;
    bool known = false;
    if (parts.size() == 5 && parts[0].empty() && (parts[1] == "exec" || parts[1] == "attach")) {
        r.kind = parts[1] == "exec" ? StreamKind::Exec : StreamKind::Attach;
        r.ns = parts[2];
        r.pod = parts[3];
        r.container = parts[4];
        known = !r.ns.empty() && !r.pod.empty() && !r.container.empty();
    } else if (parts.size() == 4 && parts[0].empty() && parts[1] == "portForward") {
        r.kind = StreamKind::PortForward;
        r.ns = parts[2];
        r.pod = parts[3];
        known = !r.ns.empty() && !r.pod.empty();
    }
    if (!known || (method != "GET" && method != "POST")) {
        p.not_found = true;
        p.refusal = {404, "404 page not found\n"};
        return p;
    }

    if (r.kind == StreamKind::PortForward) {
        for (const auto &[k, v] : query) {
            if (k != "port") continue;
            for (const auto &w : split(v, ',')) {
                auto n = parse_uint(trim(w), "port", 65535);
                if (!n || *n == 0)
                    return refused(400,
                                   "invalid port '" + std::string(trim(w)) + "': must be 1..65535");
                r.ports.push_back(static_cast<uint16_t>(*n));
            }
        }
    } else {
        auto flag = [&](const char *name) {
            for (auto it = query.rbegin(); it != query.rend(); ++it)
                if (it->first == name) return it->second == "1";
            return false;
        };
        r.in = flag("input");
        r.out = flag("output");
        r.err = flag("error");
        r.tty = flag("tty");
        // The kubelet's rule: a terminal has one output stream.
        if (r.tty) r.err = false;
        if (!r.in && !r.out && !r.err)
            return refused(400, "you must specify at least 1 of stdin, stdout, stderr");
        if (r.kind == StreamKind::Exec) {
            for (const auto &[k, v] : query)
                if (k == "command") r.command.push_back(v);
            if (r.command.empty()) return refused(400, "you must specify a command (command=)");
        }
    }

    std::vector<std::string> connection = header_tokens(headers, "Connection");
    std::vector<std::string> upgrade = header_tokens(headers, "Upgrade");
    if (!has_token(connection, "upgrade") || upgrade.empty())
        return refused(400, "unable to upgrade: missing upgrade headers in request");
    const auto &supported = [&]() -> const std::vector<std::string_view> & {
        r.transport =
            has_token(upgrade, "websocket") ? StreamTransport::WebSocket : StreamTransport::Spdy;
        return r.kind == StreamKind::PortForward ? port_forward_protocols(r.transport)
                                                 : exec_protocols(r.transport);
    }();
    if (r.transport == StreamTransport::Spdy && !has_token(upgrade, "spdy/3.1"))
        return refused(400, "unable to upgrade: unsupported protocol '" + upgrade[0] +
                                "' (SPDY/3.1 or websocket)");
    const char *offer_header = r.transport == StreamTransport::WebSocket
                                   ? "Sec-WebSocket-Protocol"
                                   : "X-Stream-Protocol-Version";
    std::vector<std::string> offered = header_tokens(headers, offer_header);
    if (r.transport == StreamTransport::WebSocket) {
        auto keys = header_tokens(headers, "Sec-WebSocket-Key");
        if (keys.size() != 1) return refused(400, "unable to upgrade: no Sec-WebSocket-Key");
        r.websocket_key = keys[0];
    }
    if (offered.empty())
        return refused(400, std::string("unable to upgrade: ") + offer_header + " is required");
    std::vector<std::string_view> offered_views(offered.begin(), offered.end());
    auto chosen = remotecommand::choose_protocol(offered_views, supported);
    if (!chosen)
        return refused(403, "unable to upgrade: unable to negotiate protocol: client supports " +
                                go_list(offered) + ", server accepts " + go_list(supported));
    r.protocol = *chosen;
    p.ok = true;
    return p;
}

}  // namespace sk
