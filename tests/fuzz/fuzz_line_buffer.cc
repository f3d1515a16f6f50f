// LineBuffer framing under arbitrary chunking: the agent reads a socket in
// whatever pieces the kernel hands over. Input: 1 byte picks the line bound,
// then (chunk-length byte, chunk) pairs. Properties, against a trivial
// reference split of the whole stream:
// - the lines within the bound come out identical whatever the chunking
//   ('\r' before '\n' dropped), a line over the bound is dropped whole and
//   the lines after it still come out (an attached shim's link carries on);
// - feed() fails (TooLarge) exactly for the chunks holding the byte at which
//   some line, or the unterminated tail, first exceeds the bound;
// - buffered() is the number of bytes after the last delivered line, 0 when
//   the tail is being dropped, and never exceeds the bound.
#include <string>
#include <utility>
#include <vector>

#include "common/daemons/protocol.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

struct Reference {
    std::vector<std::string> lines;  // terminated lines within the bound, '\r' stripped
    std::vector<size_t> crossings;   // stream offset where each dropped line crosses the bound
    size_t tail = 0;                 // bytes buffered after the last line
};

Reference reference_split(const std::string &stream, size_t max) {
    Reference ref;
    size_t start = 0;
    for (;;) {
        size_t nl = stream.find('\n', start);
        if (nl == std::string::npos) break;
        if (nl - start > max) {
            ref.crossings.push_back(start + max);
        } else {
            std::string line = stream.substr(start, nl - start);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            ref.lines.push_back(line);
        }
        start = nl + 1;
    }
    if (stream.size() - start > max)
        ref.crossings.push_back(start + max);
    else
        ref.tail = stream.size() - start;
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
    std::vector<std::pair<size_t, size_t>> failed;  // [begin, end) of the chunks that failed
    while (!in.empty()) {
        std::string_view chunk = in.take(in.byte());
        size_t begin = stream.size();
        stream.append(chunk);
        auto st = lb.feed(chunk.data(), chunk.size());
        if (!st) {
            FUZZ_CHECK(st.error() == sk::Error::TooLarge);
            failed.emplace_back(begin, stream.size());
        }
        FUZZ_CHECK(lb.buffered() <= stream.size());
        // Drain only sometimes: lines may pile up across feeds.
        if (!chunk.empty() && (chunk[0] & 1)) continue;
        while (auto line = lb.next())
            got.push_back(*line);
        FUZZ_CHECK(lb.buffered() <= max);
    }
    Reference ref = reference_split(stream, max);
    // Each failed chunk holds at least one crossing, and each crossing lies in a failed chunk.
    for (auto [b, e] : failed) {
        bool holds = false;
        for (size_t c : ref.crossings)
            holds = holds || (c >= b && c < e);
        FUZZ_CHECK(holds);
    }
    for (size_t c : ref.crossings) {
        bool in_failed = false;
        for (auto [b, e] : failed)
            in_failed = in_failed || (c >= b && c < e);
        FUZZ_CHECK(in_failed);
    }
    while (auto line = lb.next())
        got.push_back(*line);
    FUZZ_CHECK(got == ref.lines);
    FUZZ_CHECK(lb.buffered() == ref.tail);
    return 0;
}
