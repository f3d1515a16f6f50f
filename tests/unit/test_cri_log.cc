// common/daemons/cri_log: the CRI container log format, writer, reader, follower.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/daemons/cri_log.h"
#include "tests/unit/check_main.h"

using namespace sk;

static std::string make_tmpdir() {
    return sk_test_tmpdir("/tmp/sk-cri-XXXXXX");
}

static std::string slurp(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

static void spit(const std::string &path, const std::string &text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
}

// A clock that starts at 2024-05-01T12:00:00Z and ticks 1 ms per record.
static CriClock test_clock() {
    auto t = std::make_shared<int64_t>(1714564800LL * 1000000000LL);
    return [t] {
        int64_t now = *t;
        *t += 1000000;
        return now;
    };
}

// Compact view of records: "o F hello|e P ab|" (o=stdout, e=stderr).
static std::string describe(const std::vector<CriLogRecord> &recs) {
    std::string s;
    for (const auto &r : recs) {
        s += r.stream == "stdout" ? "o " : "e ";
        s += r.partial ? "P " : "F ";
        s += r.content.size() > 40 ? std::to_string(r.content.size()) + "B" : r.content;
        s += "|";
    }
    return s;
}

// ---- timestamps ----
struct TsCase {
    const char *in;
    bool ok;
    int64_t ns;
    const char *fixed;    // format_rfc3339nano(ns, true)
    const char *trimmed;  // format_rfc3339nano(ns, false)
};
static const TsCase kTs[] = {
    {"2024-05-01T12:00:00.000000001Z", true, 1714564800000000001LL,
     "2024-05-01T12:00:00.000000001Z", "2024-05-01T12:00:00.000000001Z"},
    {"2024-05-01T12:00:00.5Z", true, 1714564800500000000LL, "2024-05-01T12:00:00.500000000Z",
     "2024-05-01T12:00:00.5Z"},
    {"2024-05-01T12:00:00Z", true, 1714564800000000000LL, "2024-05-01T12:00:00.000000000Z",
     "2024-05-01T12:00:00Z"},
    {"2024-05-01T14:00:00.25+02:00", true, 1714564800250000000LL, "2024-05-01T12:00:00.250000000Z",
     "2024-05-01T12:00:00.25Z"},
    {"1970-01-01T00:00:00Z", true, 0, "1970-01-01T00:00:00.000000000Z", "1970-01-01T00:00:00Z"},
    {"", false, 0, "", ""},
    {"2024-05-01 12:00:00Z", false, 0, "", ""},
    {"2024-05-01T12:00:00", false, 0, "", ""},
    {"2024-05-01T12:00:00.Z", false, 0, "", ""},
    {"2024-05-01T12:00:00.1234567891Z", false, 0, "", ""},
    {"2024-13-01T12:00:00Z", false, 0, "", ""},
    {"2024-05-01T12:00:00Zjunk", false, 0, "", ""},
    {"2024-05-01T12:00:00+2:00", false, 0, "", ""},
};
START_TEST(timestamp_table) {
    const auto &c = kTs[_i];
    auto r = parse_rfc3339nano(c.in);
    ck_assert_msg(r.ok() == c.ok, "'%s'", c.in);
    if (!c.ok) return;
    ck_assert_int_eq(*r, c.ns);
    ck_assert_sstr_eq(format_rfc3339nano(c.ns, true), c.fixed);
    ck_assert_sstr_eq(format_rfc3339nano(c.ns, false), c.trimmed);
}
END_TEST

// ---- one line ----
struct LineCase {
    const char *line;
    bool ok;
    const char *want;  // describe() of the one record
};
static const LineCase kLines[] = {
    {"2024-05-01T12:00:00.000000000Z stdout F hello world", true, "o F hello world|"},
    {"2024-05-01T12:00:00.000000000Z stderr P part", true, "e P part|"},
    {"2024-05-01T12:00:00.000000000Z stdout F ", true, "o F |"},
    {"2024-05-01T12:00:00.000000000Z stdout F  two  spaces ", true, "o F  two  spaces |"},
    {"2024-05-01T12:00:00.000000000Z stdout F:x tagged\n", true, "o F tagged|"},
    {"", false, ""},
    {"hello world", false, ""},
    {"2024-05-01T12:00:00.000000000Z stdin F x", false, ""},
    {"2024-05-01T12:00:00.000000000Z stdout X x", false, ""},
    {"2024-05-01T12:00:00.000000000Z stdout F", false, ""},
    {"2024-05-01T12:00:00.000000000Z stdout", false, ""},
    {"yesterday stdout F x", false, ""},
    {"2024-02-31T12:00:00Z stdout F impossible date", false, ""},
    {"2023-02-29T12:00:00Z stdout F not a leap year", false, ""},
    {"2024-02-29T12:00:00Z stdout F leap day", true, "o F leap day|"},
};
START_TEST(line_table) {
    const auto &c = kLines[_i];
    auto r = parse_cri_line(c.line);
    ck_assert_msg(r.ok() == c.ok, "'%s'", c.line);
    if (!c.ok) {
        ck_assert(r.error() == Error::Parse);
        return;
    }
    ck_assert_sstr_eq(describe({*r}), c.want);
    // format then parse gives the same record back
    auto again = parse_cri_line(format_cri_line(*r));
    ck_assert(again.ok());
    ck_assert_sstr_eq(describe({*again}), c.want);
}
END_TEST

// ---- writer -> reader round trips ----
struct Chunk {
    const char *stream;
    std::string data;
};
struct WriteCase {
    const char *name;
    std::vector<Chunk> chunks;
    bool flush;
    const char *want;     // describe() of what read_cri_log returns
    const char *kubectl;  // format_for_kubectl(.., false); nullptr: skip
};
static const std::string kLong(kCriMaxLineBytes + 10, 'x');
static const std::string kExact(kCriMaxLineBytes, 'y');
static const WriteCase kWrites[] = {
    {"one line", {{"stdout", "hello\n"}}, false, "o F hello|", "hello\n"},
    {"two lines one write", {{"stdout", "a\nb\n"}}, false, "o F a|o F b|", "a\nb\n"},
    {"line across writes", {{"stdout", "hel"}, {"stdout", "lo\n"}}, false, "o F hello|", "hello\n"},
    {"empty line", {{"stderr", "\n"}}, false, "e F |", "\n"},
    {"tail waits", {{"stdout", "a\nunfinished"}}, false, "o F a|", "a\n"},
    {"tail flushed as P",
     {{"stdout", "a\nunfinished"}},
     true,
     "o F a|o P unfinished|",
     "a\nunfinished"},
    {"streams keep separate tails",
     {{"stdout", "out-"}, {"stderr", "err-"}, {"stdout", "1\n"}, {"stderr", "2\n"}},
     false,
     "o F out-1|e F err-2|",
     "out-1\nerr-2\n"},
    {"long line split", {{"stdout", kLong + "\n"}}, false, "o P 16384B|o F xxxxxxxxxx|", nullptr},
    {"exact bound is one record", {{"stdout", kExact + "\n"}}, false, "o F 16384B|", nullptr},
    {"long tail goes out without newline", {{"stdout", kLong}}, false, "o P 16384B|", nullptr},
    {"long tail then newline",
     {{"stdout", kLong}, {"stdout", "!\n"}},
     false,
     "o P 16384B|o F xxxxxxxxxx!|",
     nullptr},
    {"carriage return kept", {{"stdout", "50%\r100%\n"}}, false, "o F 50%\r100%|", "50%\r100%\n"},
    {"nothing written", {}, true, "", ""},
};
START_TEST(write_read_table) {
    const auto &c = kWrites[_i];
    std::string dir = make_tmpdir();
    std::string path = dir + "/0.log";
    {
        auto w = CriLogWriter::open(path, 0);
        ck_assert_msg(w.ok(), "%s", w.ok() ? "" : w.message().c_str());
        w->set_clock(test_clock());
        for (const auto &ch : c.chunks)
            ck_assert(w->write(ch.stream, ch.data.data(), ch.data.size()).ok());
        if (c.flush) ck_assert(w->flush().ok());
        // Check what a reader sees before the writer is destroyed (dtor flushes).
        CriLogReadStats stats;
        auto recs = read_cri_log(dir, {path + ".1", path}, {}, &stats);
        ck_assert_msg(recs.ok(), "%s", c.name);
        ck_assert_msg(describe(*recs) == c.want, "%s: got '%s'", c.name, describe(*recs).c_str());
        ck_assert_int_eq(stats.malformed_lines, 0);
        if (c.kubectl) ck_assert_sstr_eq(format_for_kubectl(*recs, false), c.kubectl);
        // Timestamps come from the injected clock, 1 ms apart.
        for (size_t i = 0; i < recs->size(); ++i)
            ck_assert_int_eq((*recs)[i].ts_ns, 1714564800LL * 1000000000LL + i * 1000000);
    }
    // A failed ck_assert leaves through a noreturn call (the test process
    // exits), so the analyzer sees the writer's buffer leak on that path.
    // NOLINTNEXTLINE(clang-analyzer-cplusplus.NewDeleteLeaks): no leak on a passing run
}
END_TEST

START_TEST(write_rejects_unknown_stream) {
    std::string dir = make_tmpdir();
    auto w = CriLogWriter::open(dir + "/0.log", 0);
    ck_assert(w.ok());
    Status st = w->write("stdin", "x\n", 2);
    ck_assert(!st.ok());
    ck_assert(st.error() == Error::InvalidArgument);
    ck_assert_sstr_eq(slurp(dir + "/0.log"), "");
}
END_TEST

START_TEST(open_fails_with_path_in_message) {
    auto w = CriLogWriter::open("/nonexistent-dir/x/0.log", 0);
    ck_assert(!w.ok());
    ck_assert(w.error() == Error::Io);
    ck_assert(w.message().find("/nonexistent-dir/x/0.log") != std::string::npos);
}
END_TEST

START_TEST(destructor_flushes_tail_and_file_format) {
    std::string dir = make_tmpdir();
    std::string path = dir + "/0.log";
    {
        auto w = CriLogWriter::open(path, 0);
        ck_assert(w.ok());
        w->set_clock(test_clock());
        ck_assert(w->write("stdout", "done\nno newline", 15).ok());
        CriLogWriter moved = std::move(*w);  // movable: the moved-from one owns nothing
        (void)moved;
    }
    ck_assert_sstr_eq(slurp(path),
                      "2024-05-01T12:00:00.000000000Z stdout F done\n"
                      "2024-05-01T12:00:00.001000000Z stdout P no newline\n");
}
END_TEST

START_TEST(appends_to_existing_file) {
    std::string dir = make_tmpdir();
    std::string path = dir + "/0.log";
    spit(path, "2024-05-01T11:00:00.000000000Z stdout F old\n");
    auto w = CriLogWriter::open(path, 0);
    ck_assert(w.ok());
    ck_assert_int_eq(w->file_bytes(), 44);
    ck_assert(w->write("stdout", "new\n", 4).ok());
    auto recs = read_cri_log(dir, {path}, {});
    ck_assert(recs.ok());
    ck_assert_sstr_eq(format_for_kubectl(*recs, false), "old\nnew\n");
}
END_TEST

// ---- rotation ----
START_TEST(rotation_keeps_one_previous_file) {
    std::string dir = make_tmpdir();
    std::string path = dir + "/0.log";
    // Every record here is 30 (timestamp) + 1 + 6 + 3 + 6 ("line-N") + 1 = 47 bytes;
    // 100 bytes hold two records.
    auto w = CriLogWriter::open(path, 100);
    ck_assert(w.ok());
    w->set_clock(test_clock());
    for (int i = 0; i < 7; ++i) {
        std::string line = "line-" + std::to_string(i) + "\n";
        ck_assert(w->write("stdout", line.data(), line.size()).ok());
        ck_assert_uint_le(w->file_bytes(), 100);
    }
    // 0.log holds line-6, 0.log.1 holds line-4 and line-5; lines 0-3 are gone.
    auto cur = read_cri_log(dir, {path}, {});
    auto old = read_cri_log(dir, {path + ".1"}, {});
    ck_assert(cur.ok() && old.ok());
    ck_assert_sstr_eq(format_for_kubectl(*cur, false), "line-6\n");
    ck_assert_sstr_eq(format_for_kubectl(*old, false), "line-4\nline-5\n");
    auto all = read_cri_log(dir, {path + ".1", path}, {});
    ck_assert(all.ok());
    ck_assert_sstr_eq(format_for_kubectl(*all, false), "line-4\nline-5\nline-6\n");
}
END_TEST

START_TEST(oversized_record_still_written) {
    // A record larger than max_bytes goes into a fresh file of its own.
    std::string dir = make_tmpdir();
    std::string path = dir + "/0.log";
    auto w = CriLogWriter::open(path, 60);
    ck_assert(w.ok());
    std::string big(100, 'b');
    big += "\n";
    ck_assert(w->write("stdout", "a\n", 2).ok());
    ck_assert(w->write("stdout", big.data(), big.size()).ok());
    auto cur = read_cri_log(dir, {path}, {});
    ck_assert(cur.ok());
    ck_assert_int_eq(cur->size(), 1);
    ck_assert_int_eq((*cur)[0].content.size(), 100);
    auto all = read_cri_log(dir, {path + ".1", path}, {});
    ck_assert_int_eq(all->size(), 2);
}
END_TEST

// ---- queries ----
// 6 records: two full lines, a line in two parts, then stderr and stdout lines.
static const char *kQueryFile =
    "2024-05-01T12:00:01.000000000Z stdout F one\n"
    "2024-05-01T12:00:02.000000000Z stdout F two\n"
    "2024-05-01T12:00:03.000000000Z stdout P thr\n"
    "2024-05-01T12:00:03.500000000Z stdout F ee\n"
    "2024-05-01T12:00:04.000000000Z stderr F four\n"
    "2024-05-01T12:00:05.000000000Z stdout F five\n";
static const int64_t kT0 = 1714564800LL * 1000000000LL;  // 12:00:00
struct QueryCase {
    const char *name;
    std::optional<int64_t> tail, since, limit;
    bool timestamps;
    const char *want;
};
static const QueryCase kQueries[] = {
    {"everything", {}, {}, {}, false, "one\ntwo\nthree\nfour\nfive\n"},
    {"tail 1", 1, {}, {}, false, "five\n"},
    {"tail 3 counts a split line once", 3, {}, {}, false, "three\nfour\nfive\n"},
    {"tail 0", 0, {}, {}, false, ""},
    {"tail more than there is", 100, {}, {}, false, "one\ntwo\nthree\nfour\nfive\n"},
    {"since is inclusive", {}, kT0 + 4000000000LL, {}, false, "four\nfive\n"},
    {"since in the future", {}, kT0 + 99000000000LL, {}, false, ""},
    {"since then tail", 1, kT0 + 2000000000LL, {}, false, "five\n"},
    {"limit inside a record", {}, {}, 6, false, "one\ntw"},
    {"limit on a newline", {}, {}, 4, false, "one\n"},
    {"limit 0", {}, {}, 0, false, ""},
    {"timestamps per line, not per record",
     3,
     {},
     {},
     true,
     "2024-05-01T12:00:03Z three\n2024-05-01T12:00:04Z four\n2024-05-01T12:00:05Z five\n"},
};
START_TEST(query_table) {
    const auto &c = kQueries[_i];
    std::string dir = make_tmpdir();
    spit(dir + "/0.log", kQueryFile);
    CriLogQuery q;
    q.tail_lines = c.tail;
    q.since_ns = c.since;
    q.limit_bytes = c.limit;
    auto recs = read_cri_log(dir, {dir + "/0.log.1", dir + "/0.log"}, q);
    ck_assert(recs.ok());
    std::string got = format_for_kubectl(*recs, c.timestamps);
    ck_assert_msg(got == c.want, "%s: got '%s'", c.name, got.c_str());
}
END_TEST

START_TEST(malformed_lines_skipped_and_counted) {
    std::string dir = make_tmpdir();
    spit(dir + "/0.log",
         "2024-05-01T12:00:01.000000000Z stdout F good\n"
         "garbage\n"
         "2024-05-01T12:00:02.000000000Z stdin F bad stream\n"
         "\n"
         "2024-05-01T12:00:03.000000000Z stderr F also good\n"
         "2024-05-01T12:00:04.000000000Z stdout F being writ");
    CriLogReadStats stats;
    auto recs = read_cri_log(dir, {dir + "/0.log"}, {}, &stats);
    ck_assert(recs.ok());
    ck_assert_sstr_eq(format_for_kubectl(*recs, false), "good\nalso good\n");
    ck_assert_int_eq(stats.malformed_lines, 3);
}
END_TEST

START_TEST(missing_files) {
    std::string dir = make_tmpdir();
    auto none = read_cri_log(dir, {dir + "/0.log.1", dir + "/0.log"}, {});
    ck_assert(!none.ok());
    ck_assert(none.error() == Error::NotFound);
    ck_assert(none.message().find("0.log") != std::string::npos);
    spit(dir + "/0.log", "");
    auto empty = read_cri_log(dir, {dir + "/0.log.1", dir + "/0.log"}, {});
    ck_assert(empty.ok());
    ck_assert_int_eq(empty->size(), 0);
}
END_TEST

// ---- follower ----
START_TEST(follower_reads_growth_and_rotation) {
    std::string dir = make_tmpdir();
    std::string path = dir + "/0.log";
    CriLogFollower f(dir, path);
    auto r0 = f.poll();
    ck_assert(r0.ok());
    ck_assert_int_eq(r0->size(), 0);  // file not there yet: nothing, no error

    auto w = CriLogWriter::open(path, 100);  // two 47-byte records per file
    ck_assert(w.ok());
    ck_assert(w->write("stdout", "line-0\n", 7).ok());
    auto r1 = f.poll();
    ck_assert(r1.ok());
    ck_assert_sstr_eq(format_for_kubectl(*r1, false), "line-0\n");
    ck_assert_int_eq(f.poll()->size(), 0);  // nothing new

    // line-1 goes to the old file, line-2 to a new one after the rotation:
    // the follower finishes the old file first, then continues in the new one.
    ck_assert(w->write("stdout", "line-1\nline-2\n", 14).ok());
    ck_assert_int_eq(w->file_bytes(), 47);
    auto r2 = f.poll();
    ck_assert(r2.ok());
    ck_assert_sstr_eq(format_for_kubectl(*r2, false), "line-1\nline-2\n");
    ck_assert(w->write("stdout", "line-3\n", 7).ok());
    ck_assert_sstr_eq(format_for_kubectl(*f.poll(), false), "line-3\n");
}
END_TEST

START_TEST(follower_waits_for_complete_lines) {
    std::string dir = make_tmpdir();
    std::string path = dir + "/0.log";
    spit(path, "2024-05-01T12:00:01.000000000Z stdout F a\n2024-05-01T12:00:02.0000");
    CriLogFollower f(dir, path);
    auto r1 = f.poll();
    ck_assert_sstr_eq(format_for_kubectl(*r1, false), "a\n");
    std::ofstream(path, std::ios::app) << "00000Z stdout F b\n";
    auto r2 = f.poll();
    ck_assert_sstr_eq(format_for_kubectl(*r2, false), "b\n");
}
END_TEST

// The pod deleted at once when it stops (the job's end): its directory goes
// while a follow has lines still unread in the open file. They are served,
// not lost with an error on the reopen that looks for a rotation.
START_TEST(follower_reads_the_rest_after_the_directory_goes) {
    std::string top = make_tmpdir();
    std::string dir = top + "/pod";
    ck_assert_int_eq(mkdir(dir.c_str(), 0700), 0);
    std::string path = dir + "/0.log";
    spit(path, "2024-05-01T12:00:01.000000000Z stdout F a\n");
    CriLogFollower f(top, path);
    ck_assert_sstr_eq(format_for_kubectl(*f.poll(), false), "a\n");
    std::ofstream(path, std::ios::app) << "2024-05-01T12:00:02.000000000Z stdout F last words\n";
    ck_assert_int_eq(unlink(path.c_str()), 0);
    ck_assert_int_eq(rmdir(dir.c_str()), 0);
    auto r = f.poll();
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert_sstr_eq(format_for_kubectl(*r, false), "last words\n");
    auto again = f.poll();
    ck_assert(again.ok() && again->empty());
}
END_TEST

// ---- hostile files: what a job's user can put where the agent reads ----
// Each case lays out <dir>/pods/u/main/0.log (dir is the trusted directory)
// in a way the reader must refuse, with a secret it must never return.
static const char kSecret[] = "2024-05-01T12:00:00.000000000Z stdout F the secret\n";

struct Refusal {
    const char *name;
    const char *why;  // in the error message
    void (*setup)(const std::string &dir, const std::string &log);
};

static const Refusal kRefusals[] = {
    {"symlinked 0.log", "a symbolic link",
     [](const std::string &dir, const std::string &log) {
         spit(dir + "/secret", kSecret);
         ck_assert_int_eq(symlink((dir + "/secret").c_str(), log.c_str()), 0);
     }},
    {"symlinked container dir", "a symbolic link",
     [](const std::string &dir, const std::string &) {
         ck_assert_int_eq(mkdir((dir + "/elsewhere").c_str(), 0755), 0);
         spit(dir + "/elsewhere/0.log", kSecret);
         ck_assert_int_eq(rmdir((dir + "/pods/u/main").c_str()), 0);
         ck_assert_int_eq(symlink((dir + "/elsewhere").c_str(), (dir + "/pods/u/main").c_str()), 0);
     }},
    {"symlinked pod dir", "a symbolic link",
     [](const std::string &dir, const std::string &) {
         ck_assert_int_eq(mkdir((dir + "/elsewhere").c_str(), 0755), 0);
         ck_assert_int_eq(mkdir((dir + "/elsewhere/main").c_str(), 0755), 0);
         spit(dir + "/elsewhere/main/0.log", kSecret);
         ck_assert_int_eq(rmdir((dir + "/pods/u/main").c_str()), 0);
         ck_assert_int_eq(rmdir((dir + "/pods/u").c_str()), 0);
         ck_assert_int_eq(symlink((dir + "/elsewhere").c_str(), (dir + "/pods/u").c_str()), 0);
     }},
    {"FIFO", "not a regular file",
     [](const std::string &, const std::string &log) {
         ck_assert_int_eq(mkfifo(log.c_str(), 0644), 0);
     }},
    {"directory", "not a regular file",
     [](const std::string &, const std::string &log) {
         ck_assert_int_eq(mkdir(log.c_str(), 0755), 0);
     }},
    {"hard link", "hard links",
     [](const std::string &dir, const std::string &log) {
         spit(dir + "/secret", kSecret);
         ck_assert_int_eq(link((dir + "/secret").c_str(), log.c_str()), 0);
     }},
    {"file of another owner", "owned by uid",
     [](const std::string &, const std::string &log) {
         spit(log, kSecret);
         if (geteuid() == 0) ck_assert_int_eq(chown(log.c_str(), 65534, 65534), 0);
     }},
};

START_TEST(hostile_files_refused) {
    const Refusal &c = kRefusals[_i];
    if (std::string(c.why) == "owned by uid" && geteuid() != 0) {
        printf("%s: needs root to make a file of another owner, not checked\n", c.name);
        return;
    }
    std::string dir = make_tmpdir();
    ck_assert_int_eq(mkdir((dir + "/pods").c_str(), 0755), 0);
    ck_assert_int_eq(mkdir((dir + "/pods/u").c_str(), 0755), 0);
    ck_assert_int_eq(mkdir((dir + "/pods/u/main").c_str(), 0755), 0);
    std::string log = dir + "/pods/u/main/0.log";
    c.setup(dir, log);
    std::vector<std::string> files = {log + ".1", log};

    auto r = read_cri_log(dir, files, {});
    ck_assert_msg(!r.ok(), "%s: read, not refused", c.name);
    ck_assert_msg(r.error() == Error::Refused, "%s: %s", c.name, r.message().c_str());
    ck_assert_msg(r.message().find(c.why) != std::string::npos, "%s: %s", c.name,
                  r.message().c_str());
    ck_assert_msg(r.message().find(dir + "/pods/u") != std::string::npos,
                  "%s: the message names the path: %s", c.name, r.message().c_str());

    CriLogFollower f(dir, log);
    auto s = f.start(files, {});
    ck_assert_msg(!s.ok() && s.error() == Error::Refused, "%s: follow start not refused", c.name);
    CriLogFollower g(dir, log);
    auto p = g.poll();
    ck_assert_msg(!p.ok() && p.error() == Error::Refused, "%s: follow poll not refused", c.name);
}
END_TEST

// A follow that is under way when the file is replaced by a symlink ends
// with a refusal; it never reads the link's target.
START_TEST(follower_refuses_a_symlink_swapped_in) {
    std::string dir = make_tmpdir();
    std::string path = dir + "/0.log";
    spit(path, "2024-05-01T12:00:01.000000000Z stdout F mine\n");
    spit(dir + "/secret", kSecret);
    CriLogFollower f(dir, path);
    auto r1 = f.start({path + ".1", path}, {});
    ck_assert(r1.ok());
    ck_assert_sstr_eq(format_for_kubectl(*r1, false), "mine\n");
    ck_assert_int_eq(rename(path.c_str(), (path + ".1").c_str()), 0);
    ck_assert_int_eq(symlink((dir + "/secret").c_str(), path.c_str()), 0);
    auto r2 = f.poll();
    ck_assert(!r2.ok());
    ck_assert_int_eq(static_cast<int>(r2.error()), static_cast<int>(Error::Refused));
}
END_TEST

// A path outside the trusted directory, or with ".." in it, is no path to read.
START_TEST(paths_outside_the_trusted_dir) {
    std::string dir = make_tmpdir();
    for (const std::string &p : {std::string("/etc/passwd"), dir + "x/0.log", dir + "/../x.log",
                                 dir + "/./0.log", dir + "//0.log"}) {
        auto r = read_cri_log(dir, {p}, {});
        ck_assert_msg(!r.ok() && r.error() == Error::InvalidArgument, "%s", p.c_str());
    }
}
END_TEST

// A file of 1.5 GB without a newline (sparse: no disk used), alone and with
// records after it: every read stays within its byte bound and returns what
// fits, whatever the size.
static std::string make_huge(const std::string &dir, const std::string &after) {
    std::string path = dir + "/0.log";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640);
    ck_assert_int_ge(fd, 0);
    const off_t huge = off_t{1536} * 1024 * 1024;
    ck_assert_int_eq(ftruncate(fd, huge), 0);
    ck_assert_int_eq(pwrite(fd, after.data(), after.size(), huge), (ssize_t)after.size());
    close(fd);
    return path;
}

START_TEST(huge_file_without_newline_is_bounded) {
    std::string dir = make_tmpdir();
    std::string path = make_huge(dir, "");
    std::vector<std::string> files = {path + ".1", path};
    CriLogQuery tail;
    tail.tail_lines = 10;
    CriLogQuery limit;
    limit.limit_bytes = 100;
    CriLogQuery since;
    since.since_ns = 0;
    for (const CriLogQuery &q : {CriLogQuery{}, tail, limit, since}) {
        CriLogReadStats st;
        auto r = read_cri_log(dir, files, q, &st);
        ck_assert(r.ok());
        ck_assert_int_eq(r->size(), 0);
        ck_assert_uint_le(st.bytes_read, kCriMaxReadBytes);
        ck_assert(st.truncated);
    }
    // A follow: the first batch within the bound, then nothing more to read
    // (the rest is the middle of a line too long to be a record).
    CriLogFollower f(dir, path);
    CriLogReadStats st;
    auto first = f.start(files, tail, &st);
    ck_assert(first.ok());
    ck_assert_int_eq(first->size(), 0);
    ck_assert_uint_le(st.bytes_read, kCriMaxReadBytes);
    CriLogReadStats ps;
    auto next = f.poll(&ps);
    ck_assert(next.ok());
    ck_assert_int_eq(next->size(), 0);
    ck_assert_uint_eq(ps.bytes_read, 0);
    // A follower from the start of the file reads at most a poll's bound per
    // call and holds no line (it would be longer than a record).
    CriLogFollower g(dir, path);
    for (int i = 0; i < 3; i++) {
        CriLogReadStats gs;
        auto r = g.poll(&gs);
        ck_assert(r.ok());
        ck_assert_int_eq(r->size(), 0);
        ck_assert_uint_le(gs.bytes_read, kCriMaxPollBytes);
        ck_assert_uint_gt(gs.bytes_read, 0);
    }
}
END_TEST

START_TEST(huge_line_before_records_is_skipped) {
    std::string dir = make_tmpdir();
    std::string path = make_huge(dir,
                                 "\n2024-05-01T12:00:01.000000000Z stdout F one\n"
                                 "2024-05-01T12:00:02.000000000Z stdout F two\n"
                                 "2024-05-01T12:00:03.000000000Z stdout F thr");
    CriLogQuery q;
    q.tail_lines = 5;
    CriLogReadStats st;
    auto r = read_cri_log(dir, {path}, q, &st);
    ck_assert(r.ok());
    ck_assert_sstr_eq(format_for_kubectl(*r, false), "one\ntwo\n");
    ck_assert_uint_le(st.bytes_read, kCriMaxReadBytes);
    // The follow goes on after the last complete line.
    CriLogFollower f(dir, path);
    auto first = f.start({path}, q);
    ck_assert(first.ok());
    ck_assert_int_eq(first->size(), 2);
    std::ofstream(path, std::ios::app) << "ee\n";
    auto next = f.poll();
    ck_assert(next.ok());
    ck_assert_sstr_eq(format_for_kubectl(*next, false), "three\n");
}
END_TEST

// Lines longer than a record are skipped as malformed wherever they are,
// never held whole; the records around them are read. A small read bound
// shows the newest records are the ones kept.
START_TEST(long_lines_and_the_read_bound) {
    std::string dir = make_tmpdir();
    std::string path = dir + "/0.log";
    std::string big(kCriMaxRecordBytes + 1, 'x');
    std::string text = "2024-05-01T12:00:01.000000000Z stdout F a\n" + big + "\n" +
                       "2024-05-01T12:00:02.000000000Z stdout F b\n" + big + big + "\n" +
                       "2024-05-01T12:00:03.000000000Z stdout F c\n";
    spit(path, text);
    for (const CriLogQuery &q : {CriLogQuery{}, CriLogQuery{std::nullopt, std::nullopt, 1000}}) {
        CriLogReadStats st;
        auto r = read_cri_log(dir, {path}, q, &st);
        ck_assert(r.ok());
        ck_assert_sstr_eq(format_for_kubectl(*r, false), "a\nb\nc\n");
        ck_assert_int_eq(st.malformed_lines, 2);
        ck_assert_uint_eq(st.bytes_read, text.size());
        ck_assert(!st.truncated);
    }
    CriLogReadStats st;
    auto r = read_cri_log(dir, {path}, {}, &st, 100);
    ck_assert(r.ok());
    ck_assert_sstr_eq(format_for_kubectl(*r, false), "c\n");
    ck_assert_uint_eq(st.bytes_read, 100);
    ck_assert(st.truncated);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cri_log");
    TCase *tc = tcase_create("format");
    tcase_add_loop_test(tc, timestamp_table, 0, TABLE_SIZE(kTs));
    tcase_add_loop_test(tc, line_table, 0, TABLE_SIZE(kLines));
    suite_add_tcase(s, tc);
    tc = tcase_create("writer");
    tcase_add_loop_test(tc, write_read_table, 0, TABLE_SIZE(kWrites));
    tcase_add_test(tc, write_rejects_unknown_stream);
    tcase_add_test(tc, open_fails_with_path_in_message);
    tcase_add_test(tc, destructor_flushes_tail_and_file_format);
    tcase_add_test(tc, appends_to_existing_file);
    tcase_add_test(tc, rotation_keeps_one_previous_file);
    tcase_add_test(tc, oversized_record_still_written);
    suite_add_tcase(s, tc);
    tc = tcase_create("reader");
    tcase_add_loop_test(tc, query_table, 0, TABLE_SIZE(kQueries));
    tcase_add_test(tc, malformed_lines_skipped_and_counted);
    tcase_add_test(tc, missing_files);
    tcase_add_test(tc, follower_reads_growth_and_rotation);
    tcase_add_test(tc, follower_waits_for_complete_lines);
    tcase_add_test(tc, follower_reads_the_rest_after_the_directory_goes);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_set_timeout(tc, 60);  // a FIFO read before the refusal blocked for ever
    tcase_add_loop_test(tc, hostile_files_refused, 0, TABLE_SIZE(kRefusals));
    tcase_add_test(tc, follower_refuses_a_symlink_swapped_in);
    tcase_add_test(tc, paths_outside_the_trusted_dir);
    tcase_add_test(tc, huge_file_without_newline_is_bounded);
    tcase_add_test(tc, huge_line_before_records_is_skipped);
    tcase_add_test(tc, long_lines_and_the_read_bound);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
