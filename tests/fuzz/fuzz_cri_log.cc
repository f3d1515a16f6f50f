// CRI container log reader (common/cri_log.h): the agent, as root, parses
// files a job user's processes can fill with anything. The input is a log
// file's text; a few leading bytes pick the kubectl query. Properties: every
// record that parses formats back to a line that parses to the same record;
// the query keeps within its bounds; formatting for kubectl never crashes.
#include <string>
#include <vector>

#include "common/cri_log.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;

bool same(const CriLogRecord &a, const CriLogRecord &b) {
    return a.ts_ns == b.ts_ns && a.stream == b.stream && a.partial == b.partial &&
           a.content == b.content;
}

// A UTC ('Z') timestamp that parsed stays in its year: an overflow that
// wrapped would land elsewhere (a leap second may roll into the next year).
void check_year(std::string_view line, int64_t ts_ns) {
    std::string_view ts = line.substr(0, line.find(' '));
    bool utc = ts.back() == 'Z' || ts.back() == 'z';
    if (!utc || ts.substr(17, 2) == "60") return;
    FUZZ_CHECK(format_rfc3339nano(ts_ns, true).substr(0, 4) == ts.substr(0, 4));
}

size_t content_bytes(const std::vector<CriLogRecord> &recs) {
    size_t n = 0;
    for (const auto &r : recs)
        n += r.content.size() + (r.partial ? 0 : 1);
    return n;
}

}  // namespace

SK_FUZZ_TARGET(cri_log) {
    sk::fuzz::Input in(data, size);
    uint8_t flags = in.byte();
    int64_t tail = in.byte();
    int64_t limit = static_cast<int64_t>(in.u32() % 4096);
    std::string_view text = in.rest();

    std::vector<CriLogRecord> recs;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        auto rec = parse_cri_line(line);
        if (!rec) {
            FUZZ_CHECK(!rec.message().empty());
            continue;
        }
        check_year(line, rec->ts_ns);
        std::string again = format_cri_line(*rec);
        FUZZ_CHECK(again.back() == '\n');
        auto back = parse_cri_line(again);
        FUZZ_CHECK(back.ok());
        FUZZ_CHECK(same(*back, *rec));
        (void)format_rfc3339nano(rec->ts_ns, false);
        recs.push_back(std::move(*rec));
    }

    CriLogQuery q;
    if (flags & 1) q.tail_lines = tail - 8;  // negative and zero too
    if (flags & 2) q.limit_bytes = limit;
    if ((flags & 4) && !recs.empty()) q.since_ns = recs[recs.size() / 2].ts_ns;
    size_t before = recs.size();
    apply_cri_query(&recs, q);
    FUZZ_CHECK(recs.size() <= before);
    if (q.limit_bytes) FUZZ_CHECK(content_bytes(recs) <= static_cast<size_t>(*q.limit_bytes));
    if (q.since_ns)
        for (const auto &r : recs)
            FUZZ_CHECK(r.ts_ns >= *q.since_ns);
    (void)format_for_kubectl(recs, flags & 8);
    return 0;
}
