// LineBuffer framing under arbitrary chunking: the agent reads a socket in
// whatever pieces the kernel hands over. Input: 1 byte picks the line bound,
// then (chunk-length byte, chunk) pairs. Properties, against a trivial
// reference split of the whole stream:
// - the lines come out identical whatever the chunking ('\r' before '\n' dropped);
// - feed() fails (TooLarge) exactly when some line, or the unterminated tail,
//   exceeds the bound; until then every line was delivered;
// - buffered() is the number of bytes after the last delivered line.
#include <string>
#include <vector>

#include "common/protocol.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

struct Reference {
    std::vector<std::string> lines;  // terminated lines, '\r' stripped
    bool too_large = false;
};

Reference reference_split(const std::string &stream, size_t max) {
    Reference ref;
    size_t start = 0;
    for (;;) {
        size_t nl = stream.find('\n', start);
        if (nl == std::string::npos) break;
        if (nl - start > max) {
            ref.too_large = true;
            return ref;
        }
        std::string line = stream.substr(start, nl - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        ref.lines.push_back(line);
        start = nl + 1;
    }
    if (stream.size() - start > max) ref.too_large = true;
    return ref;
}

}  // namespace

SK_FUZZ_TARGET(line_buffer) {
    sk::fuzz::Input in(data, size);
    // Small bounds exercise the limit; 0 means "the real one".
    size_t max = in.byte() % 64;
    if (max == 0) max = sk::proto::kMaxMessageBytes;
    sk::proto::LineBuffer lb(max);
    std::string stream;
    std::vector<std::string> got;
    bool failed = false;
    while (!in.empty()) {
        std::string_view chunk = in.take(in.byte());
        stream.append(chunk);
        auto st = lb.feed(chunk.data(), chunk.size());
        if (!st) {
            FUZZ_CHECK(st.error() == sk::Error::TooLarge);
            failed = true;
            break;  // the agent closes the connection here
        }
        // Drain only sometimes: lines may pile up across feeds.
        if (!chunk.empty() && (chunk[0] & 1)) continue;
        while (auto line = lb.next())
            got.push_back(*line);
    }
    Reference ref = reference_split(stream, max);
    if (failed) {
        // The stream so far really holds an over-long line.
        FUZZ_CHECK(ref.too_large);
        return 0;
    }
    FUZZ_CHECK(!ref.too_large);
    while (auto line = lb.next())
        got.push_back(*line);
    FUZZ_CHECK(got == ref.lines);
    size_t last_nl = stream.rfind('\n');
    size_t tail = last_nl == std::string::npos ? stream.size() : stream.size() - last_nl - 1;
    FUZZ_CHECK(lb.buffered() == tail);
    return 0;
}
