// The normal-build driver for the fuzz targets (see fuzz_target.h): replays
// the seed corpus and every saved crash input through each target, so a bug
// the fuzzer once found stays fixed in a plain `make check` (and is caught
// with its real cause under --enable-sanitizers).
//
//   fuzz_replay                      all targets, inputs under $SK_TOP_SRCDIR/tests/fuzz
//   fuzz_replay TARGET FILE|DIR...   one target, the given inputs
//
// A target that crashes or violates a FUZZ_CHECK kills this program: that is
// the failure the test harness reports, with the file name printed just before.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

namespace sk::fuzz {

static std::map<std::string, TargetFn> &registry() {
    static std::map<std::string, TargetFn> targets;
    return targets;
}

bool register_target(const char *name, TargetFn fn) {
    registry()[name] = fn;
    return true;
}

}  // namespace sk::fuzz

namespace {

bool is_dir(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Regular files under `path` (or `path` itself), sorted for a stable order.
void collect(const std::string &path, std::vector<std::string> *out) {
    if (!is_dir(path)) {
        out->push_back(path);
        return;
    }
    DIR *d = opendir(path.c_str());
    if (!d) return;
    std::vector<std::string> names;
    while (struct dirent *e = readdir(d)) {
        if (e->d_name[0] == '.') continue;  // ".", "..", README-like dot files
        names.emplace_back(e->d_name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto &n : names)
        collect(path + '/' + n, out);
}

bool read_file(const std::string &path, std::string *out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    return true;
}

// Returns the number of inputs run; -1 when a named input cannot be read.
long replay(const char *name, sk::fuzz::TargetFn fn, const std::vector<std::string> &paths) {
    std::vector<std::string> files;
    for (const auto &p : paths)
        collect(p, &files);
    long n = 0;
    for (const auto &f : files) {
        std::string data;
        if (!read_file(f, &data)) {
            std::fprintf(stderr, "fuzz_replay: %s: cannot read %s\n", name, f.c_str());
            return -1;
        }
        // Printed first so that a crash names its input.
        std::fprintf(stderr, "fuzz_replay: %s: %s\n", name, f.c_str());
        fn(reinterpret_cast<const uint8_t *>(data.data()), data.size());
        n++;
    }
    return n;
}

}  // namespace

int main(int argc, char **argv) {
    const auto &targets = sk::fuzz::registry();
    if (argc >= 2) {
        auto it = targets.find(argv[1]);
        if (it == targets.end()) {
            std::fprintf(stderr, "fuzz_replay: unknown target '%s'; known:", argv[1]);
            for (const auto &t : targets)
                std::fprintf(stderr, " %s", t.first.c_str());
            std::fprintf(stderr, "\n");
            return 2;
        }
        std::vector<std::string> paths(argv + 2, argv + argc);
        long n = replay(argv[1], it->second, paths);
        std::printf("%s: %ld inputs replayed\n", argv[1], n < 0 ? 0 : n);
        return n < 0 ? 1 : 0;
    }
    const char *top = std::getenv("SK_TOP_SRCDIR");
    if (!top || !*top) {
        std::fprintf(stderr, "fuzz_replay: set SK_TOP_SRCDIR (make check does) or name a target\n");
        return 2;
    }
    int passed = 0, failed = 0;
    for (const auto &[name, fn] : targets) {
        std::string base = std::string(top) + "/tests/fuzz/";
        std::vector<std::string> dirs;
        for (const char *kind : {"corpus/", "regressions/"})
            if (is_dir(base + kind + name)) dirs.push_back(base + kind + name);
        long n = replay(name.c_str(), fn, dirs);
        // A target without a single seed is a setup mistake, not a pass.
        if (n <= 0) {
            std::printf("FAIL: %s: no inputs under %scorpus/%s\n", name.c_str(), base.c_str(),
                        name.c_str());
            failed++;
        } else {
            std::printf("PASS: %s: %ld inputs replayed\n", name.c_str(), n);
            passed++;
        }
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
