#include "common/daemons/cri_log.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/fs.h"

namespace sk {
namespace {

constexpr int64_t kNsPerSec = 1000000000;

std::string errno_text(const char *what, const std::string &path, int err) {
    return std::string(what) + " " + path + ": " + std::strerror(err);
}

bool valid_stream(std::string_view s) {
    return s == "stdout" || s == "stderr";
}

bool parse_digits(std::string_view s, size_t pos, size_t n, int *out) {
    if (pos + n > s.size()) return false;
    int v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

Status write_all(int fd, const std::string &path, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return fail(Error::Io, errno_text("cannot write container log", path, errno));
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
    return {};
}

// Appends the records of the complete lines in `chunk` to *out; *partial
// holds the bytes of an unterminated line before and after it. A line longer
// than kCriMaxRecordBytes is not held: *skipping drops its bytes up to its
// '\n', and it counts as malformed.
void split_lines(std::string_view chunk, std::string *partial, bool *skipping,
                 std::vector<CriLogRecord> *out, CriLogReadStats *stats) {
    size_t pos = 0;
    while (pos < chunk.size()) {
        size_t nl = chunk.find('\n', pos);
        std::string_view piece = chunk.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
        if (!*skipping) {
            if (partial->size() + piece.size() > kCriMaxRecordBytes) {
                *skipping = true;
                partial->clear();
            } else {
                partial->append(piece);
            }
        }
        if (nl == std::string_view::npos) return;
        if (*skipping) {
            *skipping = false;
            if (stats) ++stats->malformed_lines;
        } else if (auto rec = parse_cri_line(*partial); rec.ok()) {
            out->push_back(std::move(*rec));
        } else if (stats) {
            ++stats->malformed_lines;
        }
        partial->clear();
        pos = nl + 1;
    }
}

constexpr size_t kChunkBytes = 65536;

// pread(2) of up to n bytes at off, resumed after EINTR and short reads; fewer
// bytes only at the end of the file.
Result<size_t> pread_full(int fd, const std::string &path, char *buf, size_t n, off_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = ::pread(fd, buf + got, n - got, off + static_cast<off_t>(got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return fail(Error::Io, errno_text("cannot read container log", path, errno));
        if (r == 0) break;
        got += static_cast<size_t>(r);
    }
    return got;
}

// Where a forward read of one file stands.
struct ForwardState {
    off_t offset = 0;
    std::string partial;
    bool skipping = false;
};

// Reads `fd` from st->offset toward its end in chunks, at most *budget
// bytes, into *out. *eof: the end was reached. `enough`, when given, is asked
// after each chunk whether to stop early.
Status read_forward(int fd, const std::string &path, ForwardState *st, size_t *budget,
                    std::vector<CriLogRecord> *out, CriLogReadStats *stats, bool *eof,
                    const std::function<bool()> &enough = {}) {
    *eof = false;
    std::string buf(kChunkBytes, '\0');
    while (*budget > 0) {
        size_t want = std::min(kChunkBytes, *budget);
        auto n = pread_full(fd, path, buf.data(), want, st->offset);
        if (!n.ok()) return n.failure();
        *budget -= *n;
        if (stats) stats->bytes_read += *n;
        st->offset += static_cast<off_t>(*n);
        split_lines(std::string_view(buf.data(), *n), &st->partial, &st->skipping, out, stats);
        if (*n < want) {
            *eof = true;
            return {};
        }
        if (enough && enough()) return {};
    }
    return {};
}

// The lines of one file from its end toward its start, without their '\n'.
// The bytes after the file's last '\n' are no line (a writer may be in the
// middle of it, or a crash cut it). Holds at most kCriMaxRecordBytes plus a
// chunk: a longer line is skipped as malformed without being held.
class ReverseLines {
  public:
    ReverseLines(int fd, const std::string &path, off_t end) : fd_(fd), path_(path), lo_(end) {}

    // The next line toward the start (true), or false at the start of the
    // file or when *budget is spent (then exhausted()).
    Result<bool> next(std::string *line, size_t *budget, CriLogReadStats *stats) {
        for (;;) {
            if (done_) return false;
            size_t i = buf_.rfind('\n');
            if (i != std::string::npos) {
                bool too_long = overlong_ || buf_.size() - i - 1 > kCriMaxRecordBytes;
                std::string piece = buf_.substr(i + 1);
                buf_.resize(i);
                overlong_ = false;
                if (tail_offset_ < 0) {
                    tail_offset_ = lo_ + static_cast<off_t>(i) + 1;
                    continue;
                }
                if (too_long) {
                    if (stats) ++stats->malformed_lines;
                    continue;
                }
                *line = std::move(piece);
                return true;
            }
            if (lo_ == 0) {
                // buf_ is the file's first line, if the file has a '\n' at all.
                done_ = true;
                if (tail_offset_ < 0) return false;
                if (overlong_ || buf_.size() > kCriMaxRecordBytes) {
                    if (stats) ++stats->malformed_lines;
                    return false;
                }
                *line = std::move(buf_);
                buf_.clear();
                return true;
            }
            if (*budget == 0) {
                done_ = exhausted_ = true;
                return false;
            }
            size_t n = std::min({kChunkBytes, static_cast<size_t>(lo_), *budget});
            std::string chunk(n, '\0');
            auto got = pread_full(fd_, path_, chunk.data(), n, lo_ - static_cast<off_t>(n));
            if (!got.ok()) return got.failure();
            if (*got < n) {  // the file shrank under us: what is left is gone
                done_ = true;
                return false;
            }
            *budget -= n;
            if (stats) stats->bytes_read += n;
            lo_ -= static_cast<off_t>(n);
            if (!overlong_) chunk.append(buf_);
            buf_.swap(chunk);
            if (buf_.find('\n') == std::string::npos && buf_.size() > kCriMaxRecordBytes) {
                overlong_ = true;  // inside a line too long to hold: drop it up to its start
                buf_.clear();
            }
        }
    }

    // Just after the file's last '\n' once the reader went past it, else -1.
    off_t tail_offset() const { return tail_offset_; }
    bool exhausted() const { return exhausted_; }
    bool at_start() const { return lo_ == 0; }

  private:
    int fd_;
    const std::string &path_;
    off_t lo_;         // file offset of buf_[0]
    std::string buf_;  // bytes [lo_, lo_ + size) not yet returned
    bool overlong_ = false;
    bool done_ = false;
    bool exhausted_ = false;
    off_t tail_offset_ = -1;
};

// One log file, opened with open_file_beneath.
struct OpenLog {
    std::string path;
    int fd = -1;
    off_t size = 0;
    dev_t dev = 0;
    ino_t ino = 0;

    OpenLog() = default;
    OpenLog(const OpenLog &) = delete;
    OpenLog &operator=(const OpenLog &) = delete;
    OpenLog(OpenLog &&o) noexcept
        : path(std::move(o.path)),
          fd(std::exchange(o.fd, -1)),
          size(o.size),
          dev(o.dev),
          ino(o.ino) {}
    ~OpenLog() {
        if (fd >= 0) ::close(fd);
    }
};

// Opens `path` below `dir`; an OpenLog with fd -1 when it does not exist.
Result<OpenLog> open_log(const std::string &dir, const std::string &path) {
    OpenLog f;
    f.path = path;
    auto fd = open_file_beneath(dir, path);
    if (!fd.ok()) {
        if (fd.error() == Error::NotFound) return f;
        return fail(fd.error(), "cannot open container log: " + fd.message());
    }
    f.fd = *fd;
    struct stat st;
    if (fstat(f.fd, &st) != 0)
        return fail(Error::Io, errno_text("cannot stat container log", path, errno));
    f.size = st.st_size;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    return f;
}

// The files of a read, oldest first (missing ones left out). The newest is
// opened first: when a rotation moves it to an older name between the
// opens, that older name is the same file and is not read twice.
Result<std::vector<OpenLog>> open_logs(const std::string &dir,
                                       const std::vector<std::string> &paths_oldest_first) {
    std::vector<OpenLog> rev;
    for (size_t i = paths_oldest_first.size(); i-- > 0;) {
        auto f = open_log(dir, paths_oldest_first[i]);
        if (!f.ok()) return f.failure();
        if (f->fd < 0) continue;
        bool seen = false;
        for (const auto &o : rev)
            seen = seen || (o.dev == f->dev && o.ino == f->ino);
        if (!seen) rev.push_back(std::move(*f));
    }
    return std::vector<OpenLog>(std::make_move_iterator(rev.rbegin()),
                                std::make_move_iterator(rev.rend()));
}

size_t content_bytes(const CriLogRecord &r) {
    return r.content.size() + (r.partial ? 0 : 1);
}

// The records the query needs, read within max_bytes; *follow, when given,
// is where a follow of `current` (one of `files`, or null) goes on.
Status read_records(const std::vector<OpenLog> &files, const OpenLog *current, const CriLogQuery &q,
                    size_t max_bytes, CriLogReadStats *stats, std::vector<CriLogRecord> *recs,
                    ForwardState *follow) {
    size_t budget = max_bytes;
    if (q.limit_bytes && !q.tail_lines) {
        // The first limit_bytes of the log: read from the start.
        size_t kept = 0;
        const size_t want = static_cast<size_t>(std::max<int64_t>(*q.limit_bytes, 0));
        for (const auto &f : files) {
            ForwardState st;
            size_t from = recs->size();
            auto enough = [&] {
                for (; from < recs->size(); ++from)
                    if (!q.since_ns || (*recs)[from].ts_ns >= *q.since_ns)
                        kept += content_bytes((*recs)[from]);
                return kept >= want;
            };
            bool eof = false;
            Status s = read_forward(f.fd, f.path, &st, &budget, recs, stats, &eof, enough);
            if (!s.ok()) return s;
            // An unterminated last line stays in st.partial: no record yet.
            if (&f == current && follow) *follow = std::move(st);
            if (enough()) return {};
            if (!eof) {
                if (stats) stats->truncated = true;
                return {};
            }
        }
        return {};
    }
    // The newest records: read backwards until the tail is complete.
    std::vector<CriLogRecord> rev;
    int64_t lines = 0;
    bool seen = false;
    bool need_more = true;
    for (size_t i = files.size(); i-- > 0 && need_more;) {
        const OpenLog &f = files[i];
        ReverseLines rl(f.fd, f.path, f.size);
        std::string line;
        for (;;) {
            auto more = rl.next(&line, &budget, stats);
            if (!more.ok()) return more.failure();
            if (!*more) break;
            auto rec = parse_cri_line(line);
            if (!rec.ok()) {
                if (stats) ++stats->malformed_lines;
                continue;
            }
            if (q.tail_lines && (!q.since_ns || rec->ts_ns >= *q.since_ns)) {
                // As tail_start(): a line ends at an F record or at the last one.
                if (!rec->partial || !seen) {
                    if (lines >= *q.tail_lines) {
                        need_more = false;
                        break;
                    }
                    ++lines;
                }
                seen = true;
            }
            rev.push_back(std::move(*rec));
        }
        if (&f == current && follow) {
            if (rl.tail_offset() >= 0)
                follow->offset = rl.tail_offset();
            else if (rl.at_start())
                follow->offset = 0;  // no '\n' yet: the first line is still being written
            else {
                follow->offset = f.size;  // inside a line too long to be a record
                follow->skipping = true;
            }
        }
        if (rl.exhausted()) {
            if (stats) stats->truncated = true;
            break;
        }
    }
    recs->insert(recs->end(), std::make_move_iterator(rev.rbegin()),
                 std::make_move_iterator(rev.rend()));
    return {};
}

// Index of the first record of the last `n` lines. A line is a run of P
// records closed by an F record (or by the end of the records).
size_t tail_start(const std::vector<CriLogRecord> &recs, int64_t n) {
    if (n <= 0) return recs.size();
    size_t i = recs.size();
    int64_t lines = 0;
    while (i > 0) {
        // records[i-1] ends a line if it is F, or if it is the very last one.
        bool ends_line = !recs[i - 1].partial || i == recs.size();
        if (ends_line) {
            if (lines == n) break;
            ++lines;
        }
        --i;
    }
    return i;
}

}  // namespace

int64_t cri_realtime_ns() noexcept {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

Result<int64_t> parse_rfc3339nano(std::string_view s) {
    auto bad = [&] {
        return fail(Error::Parse, "invalid RFC 3339 timestamp '" + std::string(s) + "'");
    };
    struct tm tm {};
    int y, mo, d, h, mi, se;
    if (s.size() < 20 || !parse_digits(s, 0, 4, &y) || s[4] != '-' || !parse_digits(s, 5, 2, &mo) ||
        s[7] != '-' || !parse_digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
        !parse_digits(s, 11, 2, &h) || s[13] != ':' || !parse_digits(s, 14, 2, &mi) ||
        s[16] != ':' || !parse_digits(s, 17, 2, &se))
        return bad();
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return bad();
    static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > kDays[mo - 1] + (mo == 2 && leap ? 1 : 0)) return bad();  // no 2024-02-31
    size_t pos = 19;
    int64_t frac = 0;
    if (pos < s.size() && s[pos] == '.') {
        ++pos;
        size_t digits = 0;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
            if (digits < 9) frac = frac * 10 + (s[pos] - '0');
            ++digits;
            ++pos;
        }
        if (digits == 0 || digits > 9) return bad();
        for (size_t i = digits; i < 9; ++i)
            frac *= 10;
    }
    int64_t offset = 0;
    if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
        ++pos;
    } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
        int oh, om;
        if (!parse_digits(s, pos + 1, 2, &oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
            !parse_digits(s, pos + 4, 2, &om) || oh > 23 || om > 59)
            return bad();
        offset = static_cast<int64_t>(oh * 3600 + om * 60) * (s[pos] == '+' ? 1 : -1);
        pos += 6;
    } else {
        return bad();
    }
    if (pos != s.size()) return bad();
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    int64_t sec = static_cast<int64_t>(timegm(&tm)) - offset;
    // Nanoseconds in int64_t reach years 1678..2261; outside, sec * kNsPerSec
    // would overflow (found by tests/fuzz/fuzz_cri_log).
    if (sec < INT64_MIN / kNsPerSec + 1 || sec > INT64_MAX / kNsPerSec - 1) return bad();
    return sec * kNsPerSec + frac;
}

Result<CriLogRecord> parse_cri_line(std::string_view line) {
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    size_t a = line.find(' ');
    if (a == std::string_view::npos) return fail(Error::Parse, "CRI log line without a stream");
    auto ts = parse_rfc3339nano(line.substr(0, a));
    if (!ts.ok()) return ts.failure();
    size_t b = line.find(' ', a + 1);
    if (b == std::string_view::npos) return fail(Error::Parse, "CRI log line without a tag");
    std::string_view stream = line.substr(a + 1, b - a - 1);
    if (!valid_stream(stream)) return fail(Error::Parse, "CRI log line with an unknown stream");
    size_t c = line.find(' ', b + 1);
    if (c == std::string_view::npos) return fail(Error::Parse, "CRI log line without content");
    // The tag may carry more ':'-separated tags after F/P (CRI allows it).
    std::string_view tag = line.substr(b + 1, c - b - 1);
    tag = tag.substr(0, tag.find(':'));
    if (tag != "F" && tag != "P") return fail(Error::Parse, "CRI log line with an unknown tag");
    CriLogRecord rec;
    rec.ts_ns = *ts;
    rec.stream = std::string(stream);
    rec.partial = tag == "P";
    rec.content = std::string(line.substr(c + 1));
    return rec;
}

std::string format_cri_line(const CriLogRecord &rec) {
    std::string s = format_rfc3339nano(rec.ts_ns, true);
    s.reserve(s.size() + rec.stream.size() + rec.content.size() + 5);
    s += ' ';
    s += rec.stream;
    s += rec.partial ? " P " : " F ";
    s += rec.content;
    s += '\n';
    return s;
}

// ---- writer ----

CriLogWriter::CriLogWriter(std::string path, size_t max_bytes, int fd, size_t size)
    : path_(std::move(path)), max_bytes_(max_bytes), fd_(fd), size_(size) {}

Result<CriLogWriter> CriLogWriter::open(const std::string &path, size_t max_bytes) {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) return fail(Error::Io, errno_text("cannot open container log", path, errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        ::close(fd);
        return fail(Error::Io, errno_text("cannot stat container log", path, err));
    }
    return CriLogWriter(path, max_bytes, fd, static_cast<size_t>(st.st_size));
}

CriLogWriter::CriLogWriter(CriLogWriter &&o) noexcept
    : path_(std::move(o.path_)),
      max_bytes_(o.max_bytes_),
      fd_(std::exchange(o.fd_, -1)),
      size_(o.size_),
      tail_out_(std::move(o.tail_out_)),
      tail_err_(std::move(o.tail_err_)),
      clock_(std::move(o.clock_)) {}

CriLogWriter &CriLogWriter::operator=(CriLogWriter &&o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) (void)flush();
        close_fd();
        path_ = std::move(o.path_);
        max_bytes_ = o.max_bytes_;
        fd_ = std::exchange(o.fd_, -1);
        size_ = o.size_;
        tail_out_ = std::move(o.tail_out_);
        tail_err_ = std::move(o.tail_err_);
        clock_ = std::move(o.clock_);
    }
    return *this;
}

CriLogWriter::~CriLogWriter() {
    if (fd_ >= 0) (void)flush();
    close_fd();
}

void CriLogWriter::close_fd() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

Status CriLogWriter::rotate() {
    std::string old = path_ + ".1";
    if (::rename(path_.c_str(), old.c_str()) != 0)
        return fail(Error::Io, errno_text("cannot rotate container log", path_, errno));
    int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0) return fail(Error::Io, errno_text("cannot open container log", path_, errno));
    close_fd();
    fd_ = fd;
    size_ = 0;
    return {};
}

Status CriLogWriter::emit(std::string_view stream, bool partial, std::string_view content) {
    if (fd_ < 0) return fail(Error::Internal, "container log " + path_ + " is closed");
    CriLogRecord rec;
    rec.ts_ns = clock_ ? clock_() : cri_realtime_ns();
    rec.stream = std::string(stream);
    rec.partial = partial;
    rec.content = std::string(content);
    std::string line = format_cri_line(rec);
    if (max_bytes_ > 0 && size_ > 0 && size_ + line.size() > max_bytes_) {
        Status st = rotate();
        if (!st.ok()) return st;
    }
    Status st = write_all(fd_, path_, line.data(), line.size());
    if (st.ok()) size_ += line.size();
    return st;
}

Status CriLogWriter::write(std::string_view stream, const char *data, size_t len) {
    if (!valid_stream(stream))
        return fail(Error::InvalidArgument, "container log stream must be stdout or stderr, not '" +
                                                std::string(stream) + "'");
    std::string &tail = stream == "stdout" ? tail_out_ : tail_err_;
    std::string_view in(data, len);
    while (!in.empty()) {
        size_t nl = in.find('\n');
        if (nl == std::string_view::npos) {
            tail.append(in);
            in = {};
            break;
        }
        tail.append(in.substr(0, nl));
        in.remove_prefix(nl + 1);
        // A terminated line: P records for all but its last kCriMaxLineBytes.
        std::string_view line(tail);
        while (line.size() > kCriMaxLineBytes) {
            Status st = emit(stream, true, line.substr(0, kCriMaxLineBytes));
            if (!st.ok()) return st;
            line.remove_prefix(kCriMaxLineBytes);
        }
        Status st = emit(stream, false, line);
        tail.clear();
        if (!st.ok()) return st;
    }
    // An unterminated tail is kept up to the bound; beyond it, it goes out
    // as P records so a process that never prints '\n' is still visible.
    size_t off = 0;
    while (tail.size() - off > kCriMaxLineBytes) {
        Status st = emit(stream, true, std::string_view(tail).substr(off, kCriMaxLineBytes));
        if (!st.ok()) {
            tail.erase(0, off);
            return st;
        }
        off += kCriMaxLineBytes;
    }
    tail.erase(0, off);
    return {};
}

Status CriLogWriter::flush() {
    Status result;
    for (auto *p : {&tail_out_, &tail_err_}) {
        if (p->empty()) continue;
        Status st = emit(p == &tail_out_ ? "stdout" : "stderr", true, *p);
        p->clear();
        if (!st.ok() && result.ok()) result = st;
    }
    return result;
}

// ---- reader ----

Result<std::vector<CriLogRecord>> read_cri_log(const std::string &trusted_dir,
                                               const std::vector<std::string> &paths_oldest_first,
                                               const CriLogQuery &q, CriLogReadStats *stats,
                                               size_t max_bytes) {
    auto files = open_logs(trusted_dir, paths_oldest_first);
    if (!files.ok()) return files.failure();
    if (files->empty()) {
        std::string names = paths_oldest_first.empty() ? "(none)" : paths_oldest_first.back();
        return fail(Error::NotFound, "no container log file " + names);
    }
    std::vector<CriLogRecord> recs;
    Status st = read_records(*files, nullptr, q, max_bytes, stats, &recs, nullptr);
    if (!st.ok()) return st.failure();
    apply_cri_query(&recs, q);
    return recs;
}

void apply_cri_query(std::vector<CriLogRecord> *recs_in, const CriLogQuery &q) {
    std::vector<CriLogRecord> &recs = *recs_in;
    if (q.since_ns) {
        std::vector<CriLogRecord> kept;
        for (auto &r : recs)
            if (r.ts_ns >= *q.since_ns) kept.push_back(std::move(r));
        recs.swap(kept);
    }
    if (q.tail_lines) {
        size_t start = tail_start(recs, *q.tail_lines);
        recs.erase(recs.begin(), recs.begin() + static_cast<std::ptrdiff_t>(start));
    }
    if (q.limit_bytes) {
        int64_t left = *q.limit_bytes < 0 ? 0 : *q.limit_bytes;
        size_t i = 0;
        for (; i < recs.size() && left > 0; ++i) {
            int64_t need = static_cast<int64_t>(recs[i].content.size()) + (recs[i].partial ? 0 : 1);
            if (need <= left) {
                left -= need;
                continue;
            }
            // The limit falls inside this record (or on its newline).
            recs[i].content.resize(static_cast<size_t>(left));
            recs[i].partial = true;
            left = 0;
        }
        recs.resize(i);
    }
}

std::string format_for_kubectl(const std::vector<CriLogRecord> &recs, bool timestamps) {
    std::string out;
    bool line_start = true;
    for (const auto &r : recs) {
        if (timestamps && line_start) {
            out += format_rfc3339nano(r.ts_ns, false);
            out += ' ';
        }
        out += r.content;
        if (!r.partial) out += '\n';
        line_start = !r.partial;
    }
    return out;
}

// ---- follower ----

CriLogFollower::CriLogFollower(std::string trusted_dir, std::string path)
    : trusted_dir_(std::move(trusted_dir)), path_(std::move(path)) {}

CriLogFollower::~CriLogFollower() {
    if (fd_ >= 0) ::close(fd_);
}

Result<std::vector<CriLogRecord>> CriLogFollower::start(
    const std::vector<std::string> &paths_oldest_first, const CriLogQuery &q,
    CriLogReadStats *stats, size_t max_bytes) {
    if (paths_oldest_first.empty() || paths_oldest_first.back() != path_)
        return fail(Error::Internal, "a follow of " + path_ + " started on other files");
    auto files = open_logs(trusted_dir_, paths_oldest_first);
    if (!files.ok()) return files.failure();
    OpenLog *current = !files->empty() && files->back().path == path_ ? &files->back() : nullptr;
    std::vector<CriLogRecord> recs;
    ForwardState follow;
    Status st = read_records(*files, current, q, max_bytes, stats, &recs, &follow);
    if (!st.ok()) return st.failure();
    apply_cri_query(&recs, q);
    if (current) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(current->fd, -1);
        dev_ = current->dev;
        ino_ = current->ino;
        offset_ = follow.offset;
        partial_line_ = std::move(follow.partial);
        skipping_ = follow.skipping;
    }
    return recs;
}

Result<std::vector<CriLogRecord>> CriLogFollower::poll(CriLogReadStats *stats) {
    std::vector<CriLogRecord> out;
    size_t budget = kCriMaxPollBytes;
    ForwardState st;
    auto drain = [&](bool *eof) -> Status {
        st.offset = offset_;
        st.partial.swap(partial_line_);
        st.skipping = skipping_;
        Status s = read_forward(fd_, path_, &st, &budget, &out, stats, eof);
        offset_ = st.offset;
        partial_line_.swap(st.partial);
        skipping_ = st.skipping;
        return s;
    };
    bool eof = true;
    if (fd_ >= 0) {
        if (Status d = drain(&eof); !d.ok()) return d.failure();
        if (!eof) return out;  // more next call
    }
    auto now = open_log(trusted_dir_, path_);
    if (!now.ok()) return now.failure();
    if (now->fd < 0) return out;  // not created yet, or between rename and create
    if (fd_ >= 0 && now->dev == dev_ && now->ino == ino_) return out;
    if (fd_ >= 0) {
        // Rotated: the writer no longer appends to the old file; finish it
        // (what it wrote just before the rename included), then switch.
        if (Status d = drain(&eof); !d.ok()) return d.failure();
        if (!eof) return out;  // the rest of the old file first
        ::close(fd_);
    }
    fd_ = std::exchange(now->fd, -1);
    dev_ = now->dev;
    ino_ = now->ino;
    offset_ = 0;
    partial_line_.clear();
    skipping_ = false;
    if (Status d = drain(&eof); !d.ok()) return d.failure();
    return out;
}

}  // namespace sk
