// The checks a kubelet makes with its own HTTP/2 and TLS clients, made with
// libcurl: an httpGet probe or hook of scheme HTTPS (TLS, the server's
// certificate not verified, as a kubelet's prober does) and a grpc probe
// (grpc.health.v1.Health/Check over cleartext HTTP/2, as the kubelet's
// prober calls it: a SERVING answer passes). Blocking, bounded by the
// timeout: the shim runs them in libuv's thread pool (probe_runner.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "k8s-shim/pod_plan.h"

namespace sk::shim {

struct CheckResult {
    bool ok = false;
    std::string output;  // why it failed, in the kubelet's words
};

// spec: HttpGet with https, or Grpc; host an IP address.
CheckResult curl_check(const ProbeSpec &spec, int64_t timeout_ms);

// Pure: a gRPC message (5-byte prefix: not compressed, big-endian length)
// of grpc.health.v1.HealthCheckRequest{service}.
std::string grpc_health_request(const std::string &service);
// The status of a grpc.health.v1.HealthCheckResponse body (one
// length-prefixed message): 0 UNKNOWN, 1 SERVING, 2 NOT_SERVING,
// 3 SERVICE_UNKNOWN; -1 when the body is not such a message.
int grpc_health_status(std::string_view body);
// The kubelet's name of a serving status ("SERVING", "NOT_SERVING", ...).
const char *grpc_status_name(int status);

}  // namespace sk::shim
