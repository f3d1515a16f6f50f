// CRI container log reader (common/daemons/cri_log.h): the agent, as root, parses
// files a job user's processes can fill with anything. The input is a log
// file's text (binary, no newline, lines longer than a record: whatever a
// container prints or a user writes in place of its log); a few leading bytes
// pick the kubectl query and the file layout. Properties: every record that
// parses formats back to a line that parses to the same record; the query
// keeps within its bounds; formatting for kubectl never crashes. Through real
// files in a private directory: read_cri_log returns what a plain forward
// parse of the whole files gives; with a small byte bound it reads no more
// than the bound and returns a suffix (a prefix with limitBytes) of that; a
// follow's first batch and its polls together return every record once.
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/daemons/cri_log.h"
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

std::string g_dir;  // the private directory, removed at exit

void remove_scratch() {
    unlink((g_dir + "/0.log").c_str());
    unlink((g_dir + "/0.log.1").c_str());
    rmdir(g_dir.c_str());
}

const std::string &scratch_dir() {
    static const std::string dir = [] {
        const char *tmp = getenv("TMPDIR");
        std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/sk-fuzz-crilog-XXXXXX";
        if (!mkdtemp(&templ[0])) abort();
        g_dir = templ;
        atexit(remove_scratch);
        return templ;
    }();
    return dir;
}

void put(const std::string &path, std::string_view text, bool append = false) {
    std::ofstream f(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    FUZZ_CHECK(f.good());
}

// The reference: every '\n'-terminated line of the file, parsed, a line
// longer than kCriMaxRecordBytes malformed; the unterminated tail left out.
void reference(std::string_view text, std::vector<CriLogRecord> *out) {
    size_t pos = 0;
    for (size_t nl; (nl = text.find('\n', pos)) != std::string_view::npos; pos = nl + 1) {
        if (nl - pos > kCriMaxRecordBytes) continue;
        if (auto rec = parse_cri_line(text.substr(pos, nl - pos)); rec.ok())
            out->push_back(std::move(*rec));
    }
}

bool same_list(const std::vector<CriLogRecord> &a, size_t a_from,
               const std::vector<CriLogRecord> &b, size_t b_from, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!same(a[a_from + i], b[b_from + i])) return false;
    return true;
}

// read_cri_log and CriLogFollower over the text as real files.
void check_files(std::string_view text, uint8_t flags, const CriLogQuery &q, size_t small) {
    const std::string &dir = scratch_dir();
    const std::string cur = dir + "/0.log", old = cur + ".1";
    std::string body(text);
    if (flags & 16) body.insert(0, std::string(kCriMaxRecordBytes + 1 + text.size() % 7, 'x'));
    // Split: bit 5 puts the first third in the rotated file; bit 6 keeps
    // the last third back, appended while a follow runs.
    size_t a = (flags & 32) ? body.size() / 3 : 0;
    size_t b = (flags & 64) ? body.size() - body.size() / 3 : body.size();
    std::string_view all(body);
    unlink(old.c_str());
    if (a > 0) put(old, all.substr(0, a));
    put(cur, all.substr(a, b - a));
    const std::vector<std::string> files = {old, cur};

    std::vector<CriLogRecord> ref;
    reference(all.substr(0, a), &ref);
    reference(all.substr(a, b - a), &ref);
    std::vector<CriLogRecord> want = ref;
    apply_cri_query(&want, q);

    CriLogReadStats st;
    auto full = read_cri_log(dir, files, q, &st);
    FUZZ_CHECK(full.ok());
    FUZZ_CHECK(!st.truncated);
    FUZZ_CHECK(st.bytes_read <= body.size());
    FUZZ_CHECK(full->size() == want.size() && same_list(*full, 0, want, 0, want.size()));

    CriLogReadStats bst;
    auto part = read_cri_log(dir, files, q, &bst, small);
    FUZZ_CHECK(part.ok());
    FUZZ_CHECK(bst.bytes_read <= small);
    FUZZ_CHECK(part->size() <= want.size());
    if (q.limit_bytes && !q.tail_lines) {
        // From the start: the records before the last are the full read's.
        if (!part->empty()) FUZZ_CHECK(same_list(*part, 0, want, 0, part->size() - 1));
    } else if (!q.limit_bytes) {
        FUZZ_CHECK(same_list(*part, 0, want, want.size() - part->size(), part->size()));
    }

    // A follow: its first batch is the read; then the rest of the current
    // file, once, with what is appended.
    CriLogFollower f(dir, cur);
    auto first = f.start(files, q);
    FUZZ_CHECK(first.ok());
    FUZZ_CHECK(first->size() == want.size() && same_list(*first, 0, want, 0, want.size()));
    if (b < all.size()) put(cur, all.substr(b), true);
    std::vector<CriLogRecord> more;
    for (int i = 0; i < 3; i++) {
        auto r = f.poll();
        FUZZ_CHECK(r.ok());
        more.insert(more.end(), r->begin(), r->end());
    }
    if (!q.tail_lines && !q.since_ns && !q.limit_bytes) {
        std::vector<CriLogRecord> cur_ref;
        reference(all.substr(a, b - a), &cur_ref);
        std::vector<CriLogRecord> grown;
        reference(all.substr(a), &grown);
        FUZZ_CHECK(more.size() == grown.size() - cur_ref.size());
        FUZZ_CHECK(same_list(more, 0, grown, cur_ref.size(), more.size()));
    }
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

    check_files(text, flags, q, 1 + static_cast<size_t>(limit % 512));
    return 0;
}
