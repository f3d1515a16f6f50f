// Kubernetes watch stream parser (agent/kube/watch_parser.h) under arbitrary
// chunking: curl hands the agent the body in whatever pieces arrive. Input:
// 1 byte picks the line bound, 1 byte seeds the chunk sizes, the rest is the
// stream (readable seeds: "\x00\x07" then one watch event per line).
// Properties, against a reference that parses the whole stream line by line:
// - the events delivered are a prefix of the reference's, identical in type,
//   object, resourceVersion and error code/message, whatever the chunking;
// - feed() fails exactly when the reference fails (first malformed line, or a
//   line over the bound: TooLarge), with the same error, and then holds nothing;
// - without a failure every event comes out and buffered() is the
//   unterminated tail;
// - ADDED/MODIFIED/DELETED/BOOKMARK carry the object's resourceVersion;
//   ERROR carries a code (410 = relist) and never a resourceVersion.
#include <string>
#include <vector>

#include "agent/kube/watch_parser.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using sk::agent::WatchEvent;
using sk::agent::WatchType;

struct Reference {
    std::vector<WatchEvent> events;
    bool failed = false;
    sk::Error error = sk::Error::Parse;
};

Reference reference_parse(const std::string &stream, size_t max) {
    Reference ref;
    size_t start = 0;
    for (size_t nl; (nl = stream.find('\n', start)) != std::string::npos; start = nl + 1) {
        if (nl - start > max) {
            ref.failed = true;
            ref.error = sk::Error::TooLarge;
            return ref;
        }
        std::string_view line(stream.data() + start, nl - start);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
            line.remove_suffix(1);
        if (line.empty()) continue;
        auto e = sk::agent::parse_watch_line(line);
        if (!e) {
            FUZZ_CHECK(!e.message().empty());
            ref.failed = true;
            ref.error = e.error();
            return ref;
        }
        ref.events.push_back(std::move(*e));
    }
    if (stream.size() - start > max) {
        ref.failed = true;
        ref.error = sk::Error::TooLarge;
    }
    return ref;
}

bool same(const WatchEvent &a, const WatchEvent &b) {
    return a.type == b.type && a.object == b.object && a.resource_version == b.resource_version &&
           a.error_code == b.error_code && a.error_message == b.error_message;
}

void check_event(const WatchEvent &e) {
    if (e.type == WatchType::Error) {
        FUZZ_CHECK(e.resource_version.empty());
        FUZZ_CHECK(e.error_code != 0);
    } else {
        FUZZ_CHECK(!e.resource_version.empty());
        FUZZ_CHECK(e.error_code == 0);
    }
}

}  // namespace

SK_FUZZ_TARGET(watch_parser) {
    sk::fuzz::Input in(data, size);
    // Small bounds exercise the limit; 0 means "the real one".
    size_t max = in.byte() % 128;
    if (max == 0) max = 64u << 20;
    uint32_t rng = in.byte() * 2654435761u + 1;
    std::string stream(in.rest());

    sk::agent::WatchParser parser(max);
    std::vector<WatchEvent> got;
    bool failed = false;
    sk::Error error = sk::Error::Parse;
    for (size_t pos = 0; pos < stream.size() && !failed;) {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        size_t n = rng % 4 == 0 ? 0 : rng % 97;  // empty chunks too
        n = std::min(n, stream.size() - pos);
        auto evs = parser.feed(std::string_view(stream).substr(pos, n));
        pos += n;
        if (!evs) {
            FUZZ_CHECK(!evs.message().empty());
            FUZZ_CHECK(parser.buffered() == 0);
            failed = true;
            error = evs.error();
            break;  // the agent restarts the watch here
        }
        FUZZ_CHECK(parser.buffered() <= max);
        for (auto &e : *evs)
            got.push_back(std::move(e));
    }

    Reference ref = reference_parse(stream, max);
    FUZZ_CHECK(failed == ref.failed);
    if (failed) FUZZ_CHECK(error == ref.error);
    FUZZ_CHECK(got.size() <= ref.events.size());
    for (size_t i = 0; i < got.size(); i++) {
        FUZZ_CHECK(same(got[i], ref.events[i]));
        check_event(got[i]);
    }
    if (!failed) {
        FUZZ_CHECK(got.size() == ref.events.size());
        size_t last_nl = stream.rfind('\n');
        size_t tail = last_nl == std::string::npos ? stream.size() : stream.size() - last_nl - 1;
        FUZZ_CHECK(parser.buffered() == tail);
    }
    return 0;
}
