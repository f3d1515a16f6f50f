#include "common/cri_log.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>

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

// Splits a file's text into records; a last line without '\n' is left in
// *rest (a writer may be in the middle of it).
void parse_lines(std::string_view text, std::vector<CriLogRecord> *out, CriLogReadStats *stats,
                 std::string *rest) {
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) break;
        auto rec = parse_cri_line(text.substr(pos, nl - pos));
        if (rec.ok())
            out->push_back(std::move(*rec));
        else if (stats)
            ++stats->malformed_lines;
        pos = nl + 1;
    }
    if (rest) rest->assign(text.substr(pos));
}

Result<std::string> read_whole(const std::string &path, bool *missing) {
    *missing = false;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            *missing = true;
            return std::string();
        }
        return fail(Error::Io, errno_text("cannot open container log", path, errno));
    }
    std::string data;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            ::close(fd);
            return fail(Error::Io, errno_text("cannot read container log", path, err));
        }
        if (n == 0) break;
        data.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return data;
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

Result<std::vector<CriLogRecord>> read_cri_log(const std::vector<std::string> &paths_oldest_first,
                                               const CriLogQuery &q, CriLogReadStats *stats) {
    std::vector<CriLogRecord> recs;
    bool any = false;
    for (const auto &path : paths_oldest_first) {
        bool missing = false;
        auto text = read_whole(path, &missing);
        if (!text.ok()) return text.failure();
        if (missing) continue;
        any = true;
        std::string rest;
        parse_lines(*text, &recs, stats, &rest);
        // A last line without '\n' is being written (or was cut by a crash):
        // not a record yet; a crash-cut line would not parse reliably.
    }
    if (!any) {
        std::string names = paths_oldest_first.empty() ? "(none)" : paths_oldest_first.back();
        return fail(Error::NotFound, "no container log file " + names);
    }
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

CriLogFollower::CriLogFollower(std::string path) : path_(std::move(path)) {}

CriLogFollower::~CriLogFollower() {
    if (fd_ >= 0) ::close(fd_);
}

Status CriLogFollower::drain(std::vector<CriLogRecord> *out, CriLogReadStats *stats) {
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail(Error::Io, errno_text("cannot read container log", path_, errno));
        if (n == 0) return {};
        partial_line_.append(buf, static_cast<size_t>(n));
        std::string rest;
        parse_lines(partial_line_, out, stats, &rest);
        partial_line_.swap(rest);
    }
}

Status CriLogFollower::reopen_if_rotated(std::vector<CriLogRecord> *out, CriLogReadStats *stats) {
    struct stat st;
    if (::stat(path_.c_str(), &st) != 0) {
        if (errno == ENOENT) return {};  // not created yet, or between rename and create
        return fail(Error::Io, errno_text("cannot stat container log", path_, errno));
    }
    if (fd_ >= 0 && st.st_dev == dev_ && st.st_ino == ino_) return {};
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return {};
        return fail(Error::Io, errno_text("cannot open container log", path_, errno));
    }
    struct stat fst;
    if (fstat(fd, &fst) != 0) {
        int err = errno;
        ::close(fd);
        return fail(Error::Io, errno_text("cannot stat container log", path_, err));
    }
    if (fd_ >= 0) {
        // Rotated: the writer no longer appends to the old file; finish it.
        Status d = drain(out, stats);
        ::close(fd_);
        partial_line_.clear();
        if (!d.ok()) {
            fd_ = fd;
            dev_ = fst.st_dev;
            ino_ = fst.st_ino;
            return d;
        }
    }
    fd_ = fd;
    dev_ = fst.st_dev;
    ino_ = fst.st_ino;
    return {};
}

Result<std::vector<CriLogRecord>> CriLogFollower::poll(CriLogReadStats *stats) {
    std::vector<CriLogRecord> out;
    if (fd_ >= 0) {
        Status d = drain(&out, stats);
        if (!d.ok()) return d.failure();
    }
    Status r = reopen_if_rotated(&out, stats);
    if (!r.ok()) return r.failure();
    if (fd_ >= 0) {
        Status d = drain(&out, stats);
        if (!d.ok()) return d.failure();
    }
    return out;
}

}  // namespace sk
