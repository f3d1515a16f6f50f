// CRI container log files, the format kubelets read (paths: common/daemons/log_paths.h):
// one record per line
//     <RFC3339Nano UTC timestamp> <stdout|stderr> <F|P> <content>\n
// F = the record ends a line, P = partial: the line continues in the next
// record of the same stream (a line longer than kCriMaxLineBytes, or a tail
// that was still unterminated when it was flushed). Content is raw bytes,
// never escaped; it contains no '\n'.
//
// The shim writes (CriLogWriter, one per container and restart), the agent
// reads (read_cri_log, CriLogFollower) to serve `kubectl logs`.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/rfc3339.h"

namespace sk {

// Lines longer than this are split into P records (containerd's default).
constexpr size_t kCriMaxLineBytes = size_t{16} * 1024;

struct CriLogRecord {
    int64_t ts_ns = 0;     // nanoseconds since the Unix epoch, UTC
    std::string stream;    // "stdout" or "stderr"
    bool partial = false;  // P record: no newline after content
    std::string content;   // without the trailing '\n'
};

// Nanosecond wall clock; injectable so tests get stable timestamps.
using CriClock = std::function<int64_t()>;
int64_t cri_realtime_ns() noexcept;

// Timestamps are written with format_rfc3339nano (common/rfc3339.h).
// Accepts RFC 3339 with 0-9 fraction digits and 'Z' or a +hh:mm/-hh:mm offset.
Result<int64_t> parse_rfc3339nano(std::string_view s);

// One record line, with or without its trailing '\n'. Parse failure for
// anything that is not exactly the format above.
Result<CriLogRecord> parse_cri_line(std::string_view line);
// The line for a record, with the trailing '\n'.
std::string format_cri_line(const CriLogRecord &rec);

// Appends records for one container to `path`. Each record is written with
// one write(2) on an O_APPEND descriptor, so a reader never sees half a
// record unless the disk is full. Not thread-safe: one writer per file.
class CriLogWriter {
  public:
    // Opens (creating, mode 0640) `path` for appending. max_bytes > 0: before a
    // record would take the file past max_bytes, the file is renamed to
    // path + ".1" (replacing an older rotation) and a new one is started.
    // max_bytes == 0 never rotates.
    static Result<CriLogWriter> open(const std::string &path, size_t max_bytes);

    CriLogWriter(CriLogWriter &&other) noexcept;
    CriLogWriter &operator=(CriLogWriter &&other) noexcept;
    CriLogWriter(const CriLogWriter &) = delete;
    CriLogWriter &operator=(const CriLogWriter &) = delete;
    // Flushes unterminated tails as P records (best effort, like containerd at
    // EOF) and closes the file.
    ~CriLogWriter();

    // `stream` is "stdout" or "stderr". Splits data into lines: every
    // terminated line becomes F records (P records first if it is longer than
    // kCriMaxLineBytes); an unterminated tail is kept per stream and written
    // as a P record once it exceeds kCriMaxLineBytes or on flush().
    Status write(std::string_view stream, const char *data, size_t len);
    // Writes the buffered unterminated tails as P records. Call when the
    // container's pipes reach EOF.
    Status flush();

    void set_clock(CriClock clock) { clock_ = std::move(clock); }
    const std::string &path() const { return path_; }
    size_t file_bytes() const { return size_; }  // bytes in the current file

  private:
    CriLogWriter(std::string path, size_t max_bytes, int fd, size_t size);
    Status emit(std::string_view stream, bool partial, std::string_view content);
    Status rotate();
    void close_fd() noexcept;

    std::string path_;
    size_t max_bytes_ = 0;
    int fd_ = -1;
    size_t size_ = 0;
    std::string tail_out_;  // unterminated stdout bytes
    std::string tail_err_;  // unterminated stderr bytes
    CriClock clock_;
};

struct CriLogQuery {
    std::optional<int64_t> tail_lines;   // last N lines (a line = P records + their F record)
    std::optional<int64_t> since_ns;     // records with ts_ns >= since_ns
    std::optional<int64_t> limit_bytes;  // at most this many content bytes (newlines count)
};

struct CriLogReadStats {
    size_t malformed_lines = 0;  // lines skipped because they did not parse (or were too long)
    size_t bytes_read = 0;       // bytes read from the files
    bool truncated = false;      // a read stopped at its byte bound before the query was answered
};

// The reader's bounds. The agent reads, as root, files that a job's user can
// fill with anything, so nothing it holds or reads grows with the file:
// - a line longer than kCriMaxRecordBytes (more than the writer ever writes:
//   kCriMaxLineBytes of content and the prefix) is malformed; it is skipped
//   without being held, however long it is, a file without '\n' included;
// - one read_cri_log (one `kubectl logs` request) reads at most
//   kCriMaxReadBytes of the files: from the end (tailLines, sinceTime or no
//   query: the newest records) or, with limitBytes and no tailLines, from the
//   start; where the bound cuts, the rest is left out and stats say so;
// - one CriLogFollower::poll() reads at most kCriMaxPollBytes.
constexpr size_t kCriMaxRecordBytes = kCriMaxLineBytes + 256;
constexpr size_t kCriMaxReadBytes = size_t{8} * 1024 * 1024;
constexpr size_t kCriMaxPollBytes = size_t{1} * 1024 * 1024;

// Reads the files oldest first (e.g. {"0.log.1", "0.log"}); missing files are
// skipped, NotFound when none exists. Every path lies below `trusted_dir`
// (the job's shim state dir) and is opened with open_file_beneath
// (common/fs.h): a symlink at any component below it, a FIFO, a device or a
// file not of trusted_dir's owner is refused (Error::Refused), never read.
// Applies since, then tail, then limit (the last record is cut and marked
// partial when the limit falls inside it) to the records of at most
// `max_bytes` of the files (see kCriMaxReadBytes). Malformed lines are skipped
// and counted in *stats.
Result<std::vector<CriLogRecord>> read_cri_log(const std::string &trusted_dir,
                                               const std::vector<std::string> &paths_oldest_first,
                                               const CriLogQuery &q,
                                               CriLogReadStats *stats = nullptr,
                                               size_t max_bytes = kCriMaxReadBytes);

// The since/tail/limit part of read_cri_log, for records read otherwise.
void apply_cri_query(std::vector<CriLogRecord> *recs, const CriLogQuery &q);

// What `kubectl logs` prints: content, '\n' after F records, P records joined
// to the next one. timestamps=true prefixes each line (not each record) with
// the trimmed RFC3339Nano timestamp of its first record and a space.
std::string format_for_kubectl(const std::vector<CriLogRecord> &recs, bool timestamps);

// Incremental reader for `kubectl logs -f`: returns records appended to
// `path` (below `trusted_dir`, opened as read_cri_log does, also when it
// reopens the file) since the last call, and follows a rotation (the file
// replaced by a new one: the rest of the old file, now at path + ".1", is
// read first). Does not block, and reads at most kCriMaxPollBytes a call, so
// that its caller sees a stop between calls. Not thread-safe; one per follower.
class CriLogFollower {
  public:
    // Without start(), the first poll() reads the file from its beginning.
    CriLogFollower(std::string trusted_dir, std::string path);
    CriLogFollower(const CriLogFollower &) = delete;
    CriLogFollower &operator=(const CriLogFollower &) = delete;
    ~CriLogFollower();

    // The first batch of a follow: read_cri_log(trusted_dir, paths_oldest_first,
    // q, stats), paths_oldest_first.back() being this follower's path; poll()
    // then returns what follows it in that file. A file that replaced the
    // current one between the opens is not read twice. No file at all is no
    // records (not NotFound): the follow waits for the file.
    Result<std::vector<CriLogRecord>> start(const std::vector<std::string> &paths_oldest_first,
                                            const CriLogQuery &q, CriLogReadStats *stats = nullptr,
                                            size_t max_bytes = kCriMaxReadBytes);

    // New complete records (an unterminated last line waits for the next call).
    Result<std::vector<CriLogRecord>> poll(CriLogReadStats *stats = nullptr);

  private:
    std::string trusted_dir_;
    std::string path_;
    int fd_ = -1;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
    off_t offset_ = 0;          // where the next read of fd_ starts
    std::string partial_line_;  // bytes of an unterminated line, at most kCriMaxRecordBytes
    bool skipping_ = false;     // inside a line longer than that, up to its '\n'
};

}  // namespace sk
