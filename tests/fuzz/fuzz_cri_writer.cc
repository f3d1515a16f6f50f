// CRI log writer -> reader round trip (common/daemons/cri_log.h), through a real file
// in a private temporary directory. The shim writes whatever bytes a
// container prints; `kubectl logs` must show exactly those bytes. Input:
// (control byte, chunk-length byte, chunk) triples; the control byte picks the
// stream and how often the chunk is repeated (to reach the 16 KiB line split).
// Property: per stream, the records read back, joined the kubectl way, equal
// the bytes written, and no record's content holds a '\n'.
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "common/daemons/cri_log.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sk;

std::string g_dir;  // the private directory, removed at exit

void remove_scratch() {
    unlink((g_dir + "/0.log").c_str());
    rmdir(g_dir.c_str());
}

const std::string &scratch_file() {
    static const std::string path = [] {
        const char *tmp = getenv("TMPDIR");
        std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/sk-fuzz-cri-XXXXXX";
        if (!mkdtemp(&templ[0])) abort();
        g_dir = templ;
        atexit(remove_scratch);
        return templ + "/0.log";
    }();
    return path;
}

}  // namespace

SK_FUZZ_TARGET(cri_writer) {
    const std::string &path = scratch_file();
    unlink(path.c_str());
    std::string want[2];
    {
        auto w = CriLogWriter::open(path, 0);
        FUZZ_CHECK(w.ok());
        int64_t now = 1700000000LL * 1000000000LL;
        w->set_clock([&now] { return now++; });
        sk::fuzz::Input in(data, size);
        while (!in.empty()) {
            uint8_t ctl = in.byte();
            std::string_view chunk = in.take(in.byte());
            int stream = ctl & 1;
            int repeat = 1 + ((ctl >> 1) & 63);
            for (int i = 0; i < repeat; i++) {
                FUZZ_CHECK(w->write(stream ? "stderr" : "stdout", chunk.data(), chunk.size()).ok());
                want[stream].append(chunk);
            }
        }
        FUZZ_CHECK(w->flush().ok());
    }
    auto recs = read_cri_log(g_dir, {path}, CriLogQuery{});
    if (want[0].empty() && want[1].empty()) {
        FUZZ_CHECK(!recs.ok() || recs->empty());
        return 0;
    }
    FUZZ_CHECK(recs.ok());
    std::string got[2];
    for (const auto &r : *recs) {
        FUZZ_CHECK(r.content.find('\n') == std::string::npos);
        FUZZ_CHECK(r.content.size() <= kCriMaxLineBytes);
        int stream = r.stream == "stderr";
        got[stream] += r.content;
        if (!r.partial) got[stream] += '\n';
    }
    FUZZ_CHECK(got[0] == want[0]);
    FUZZ_CHECK(got[1] == want[1]);
    return 0;
}
