#include "k8s-shim/http_check.h"

#include <curl/curl.h>

#include <cstring>
#include <memory>

namespace sk::shim {
namespace {

constexpr size_t kMaxBody = size_t{64} * 1024;  // what a check reads of an answer

struct Answer {
    std::string body, grpc_status, grpc_message;
};

size_t on_body(char *data, size_t size, size_t n, void *user) {
    auto *a = static_cast<Answer *>(user);
    size_t len = size * n;
    if (a->body.size() < kMaxBody) a->body.append(data, std::min(len, kMaxBody - a->body.size()));
    return len;
}

// Headers and, over HTTP/2, trailers: grpc-status and grpc-message.
size_t on_header(char *data, size_t size, size_t n, void *user) {
    auto *a = static_cast<Answer *>(user);
    std::string_view line(data, size * n);
    auto value = [&line](size_t colon) {
        std::string v(line.substr(colon + 1));
        while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
            v.pop_back();
        while (!v.empty() && v.front() == ' ')
            v.erase(0, 1);
        return v;
    };
    if (line.size() > 12 && strncasecmp(line.data(), "grpc-status:", 12) == 0)
        a->grpc_status = value(11);
    if (line.size() > 13 && strncasecmp(line.data(), "grpc-message:", 13) == 0)
        a->grpc_message = value(12);
    return size * n;
}

std::string url_host(const std::string &host) {
    return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

struct CurlDeleter {
    void operator()(CURL *c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
    void operator()(curl_slist *l) const { curl_slist_free_all(l); }
};

}  // namespace

std::string grpc_health_request(const std::string &service) {
    std::string msg;
    if (!service.empty()) {  // field 1, length-delimited
        msg += '\x0a';
        size_t n = service.size();
        do {
            unsigned char b = n & 0x7f;
            n >>= 7;
            msg += static_cast<char>(n ? b | 0x80 : b);
        } while (n);
        msg += service;
    }
    std::string out(5, '\0');
    uint32_t len = static_cast<uint32_t>(msg.size());
    out[1] = static_cast<char>(len >> 24);
    out[2] = static_cast<char>(len >> 16);
    out[3] = static_cast<char>(len >> 8);
    out[4] = static_cast<char>(len);
    return out + msg;
}

int grpc_health_status(std::string_view body) {
    if (body.size() < 5 || body[0] != 0) return -1;
    uint32_t len = (uint32_t(uint8_t(body[1])) << 24) | (uint32_t(uint8_t(body[2])) << 16) |
                   (uint32_t(uint8_t(body[3])) << 8) | uint32_t(uint8_t(body[4]));
    if (body.size() - 5 < len) return -1;
    std::string_view msg = body.substr(5, len);
    int status = 0;  // proto3: an absent field is its default, UNKNOWN
    size_t i = 0;
    while (i < msg.size()) {
        uint8_t key = uint8_t(msg[i++]);
        uint64_t v = 0;
        int shift = 0;
        if ((key & 7) == 0) {  // varint
            while (i < msg.size()) {
                uint8_t b = uint8_t(msg[i++]);
                if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
                shift += 7;
                if (!(b & 0x80)) break;
            }
            if (key >> 3 == 1) status = static_cast<int>(v);
        } else if ((key & 7) == 2) {  // length-delimited: skipped
            while (i < msg.size()) {
                uint8_t b = uint8_t(msg[i++]);
                if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
                shift += 7;
                if (!(b & 0x80)) break;
            }
            if (v > msg.size() - i) return -1;
            i += v;
        } else {
            return -1;
        }
    }
    return status;
}

const char *grpc_status_name(int status) {
    switch (status) {
        case 0:
            return "UNKNOWN";
        case 1:
            return "SERVING";
        case 2:
            return "NOT_SERVING";
        case 3:
            return "SERVICE_UNKNOWN";
        default:
            return "an unknown status";
    }
}

CheckResult curl_check(const ProbeSpec &spec, int64_t timeout_ms) {
    std::unique_ptr<CURL, CurlDeleter> h(curl_easy_init());
    if (!h) return {false, "cannot make an HTTP client"};
    CURL *c = h.get();
    Answer a;
    std::unique_ptr<curl_slist, SlistDeleter> headers;
    auto add = [&headers](const std::string &line) {
        headers.reset(curl_slist_append(headers.release(), line.c_str()));
    };
    const bool grpc = spec.action == ProbeAction::Grpc;
    std::string url = std::string(grpc ? "http" : "https") + "://" + url_host(spec.host) + ":" +
                      std::to_string(spec.port) +
                      (grpc ? "/grpc.health.v1.Health/Check" : spec.path);
    std::string body;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85: CURLOPT_PROTOCOLS deprecated
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, grpc ? "http" : "https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, grpc ? CURLPROTO_HTTP : CURLPROTO_HTTPS);
#endif
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "kube-probe/1.28");
    if (grpc) {
        curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        body = grpc_health_request(spec.grpc_service);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
        add("Content-Type: application/grpc");
        add("TE: trailers");
    } else {
        // The kubelet's prober: no certificate check (InsecureSkipVerify).
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
        add("Accept: */*");
        for (const auto &[k, v] : spec.headers)
            add(k + ": " + v);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        if (rc == CURLE_OPERATION_TIMEDOUT)
            return {false, "timeout: " + std::string(grpc ? "grpc" : "HTTPS") +
                               " probe did not answer within " +
                               std::to_string((timeout_ms + 999) / 1000) + "s"};
        return {false, std::string(grpc ? "failed to connect service \"" : "Get \"") +
                           (grpc ? spec.host + ":" + std::to_string(spec.port) : url) +
                           "\": " + curl_easy_strerror(rc)};
    }
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (!grpc) {
        if (code >= 200 && code < 400) return {true, ""};
        return {false, "HTTP probe failed with statuscode: " + std::to_string(code)};
    }
    if (code != 200 || (!a.grpc_status.empty() && a.grpc_status != "0"))
        return {false,
                "health rpc probe failed: rpc error: code = " +
                    (a.grpc_status.empty() ? "HTTP " + std::to_string(code) : a.grpc_status) +
                    (a.grpc_message.empty() ? "" : " desc = " + a.grpc_message)};
    int status = grpc_health_status(a.body);
    if (status == 1) return {true, ""};
    if (status < 0)
        return {false, "health rpc probe failed: the answer is not a HealthCheckResponse"};
    return {false,
            std::string("service unhealthy (responded with \"") + grpc_status_name(status) + "\")"};
}

}  // namespace sk::shim
