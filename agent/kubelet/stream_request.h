// The kubelet's streaming requests, as the API server relays them
// (docs/protocol.md "Kubelet streaming protocols"; the wire facts of a 1.28
// API server are recorded in tests/kube/README.md's proxy section):
//
//   POST|GET /exec/NS/POD/CONTAINER?command=W1&command=W2&input=1&output=1&error=1&tty=1
//   POST|GET /attach/NS/POD/CONTAINER?input=1&output=1&error=1&tty=1
//   POST|GET /portForward/NS/POD[?port=P1,P2]
//
// SPDY/3.1 (`Upgrade: SPDY/3.1`, the protocol offered in
// X-Stream-Protocol-Version headers) or WebSocket (`Upgrade: websocket`,
// Sec-WebSocket-Protocol), each with `Connection: Upgrade`. Pure: parsing and
// the kubelet's checks, before any pod is looked up; the answer of a refusal
// is the HTTP status and text the kubelet gives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace sk {

enum class StreamKind { Exec, Attach, PortForward };
enum class StreamTransport { Spdy, WebSocket };

struct StreamRequest {
    StreamKind kind = StreamKind::Exec;
    std::string ns, pod, container;    // container "" for port-forward
    std::vector<std::string> command;  // exec: one per command= (at least one)
    bool in = false, out = false, err = false, tty = false;
    std::vector<uint16_t> ports;  // port-forward: from port= (WebSocket clients send it)
    StreamTransport transport = StreamTransport::Spdy;
    std::string protocol;       // the negotiated subprotocol
    std::string websocket_key;  // Sec-WebSocket-Key (WebSocket)
};

// A refusal: the HTTP status and the body the kubelet sends.
struct StreamRefusal {
    int status = 400;
    std::string body;
};

using Pairs = std::vector<std::pair<std::string, std::string>>;

// method "GET" or "POST"; path decoded without the query; query and headers
// in order, repeated names kept (header names in any case).
// NotFound for a path that is none of the three; then the refusals, in the
// kubelet's order: a bad query (400 "you must specify at least 1 of stdin,
// stdout, stderr", an exec without a command, a bad port), a request that
// is no upgrade (400 "unable to upgrade: missing upgrade headers in
// request"), no protocol in common (403 "unable to upgrade: unable to
// negotiate protocol: ...").
struct StreamParse {
    bool ok = false;
    bool not_found = false;
    StreamRequest request;
    StreamRefusal refusal;
};
StreamParse parse_stream_request(std::string_view method, std::string_view path, const Pairs &query,
                                 const Pairs &headers);

// The protocols the endpoint speaks, in its order of preference.
const std::vector<std::string_view> &exec_protocols(StreamTransport t);
const std::vector<std::string_view> &port_forward_protocols(StreamTransport t);

}  // namespace sk
