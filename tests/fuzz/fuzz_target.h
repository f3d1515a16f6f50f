// One fuzz target source, two drivers.
//
// Every tests/fuzz/fuzz_<name>.cc defines its entry point with
//     SK_FUZZ_TARGET(name) { ... use data, size ... return 0; }
// - In the libFuzzer build (tests/fuzz/build-and-run.sh, clang, -DSK_FUZZ_LIBFUZZER)
//   that is LLVMFuzzerTestOneInput, and each target is its own binary.
// - In the normal build (g++, `make check`) it registers the function under
//   `name` in one replay program (tests/fuzz/replay_main.cc) that feeds it
//   every file in tests/fuzz/corpus/<name>/ and tests/fuzz/regressions/<name>/.
// So a target source must define nothing else with external linkage: keep
// helpers in an anonymous namespace.
//
// FUZZ_CHECK states a property the code under test promises (a round trip,
// an invariant); a violation aborts, which libFuzzer reports as a crash and
// the replay program as a failed test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#define FUZZ_CHECK(cond)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n", __FILE__, __LINE__, \
                         #cond);                                                            \
            std::abort();                                                                   \
        }                                                                                   \
    } while (0)

#ifdef SK_FUZZ_LIBFUZZER
#define SK_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
#else
namespace sk::fuzz {
using TargetFn = int (*)(const uint8_t *data, size_t size);
// Called from static initialisers; returns true so it can initialise a constant.
bool register_target(const char *name, TargetFn fn);
}  // namespace sk::fuzz
#define SK_FUZZ_TARGET(name)                                       \
    static int sk_fuzz_##name(const uint8_t *data, size_t size);   \
    [[maybe_unused]] static const bool sk_fuzz_registered_##name = \
        sk::fuzz::register_target(#name, sk_fuzz_##name);          \
    static int sk_fuzz_##name(const uint8_t *data, size_t size)
#endif

namespace sk::fuzz {

// Splits the input into the pieces a target needs without reading past its end.
class Input {
  public:
    Input(const uint8_t *data, size_t size) : p_(data), n_(size) {}
    bool empty() const { return n_ == 0; }
    size_t left() const { return n_; }
    uint8_t byte() {
        if (n_ == 0) return 0;
        n_--;
        return *p_++;
    }
    uint32_t u32() {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++)
            v = (v << 8) | byte();
        return v;
    }
    // Up to `max` bytes.
    std::string_view take(size_t max) {
        size_t k = max < n_ ? max : n_;
        std::string_view s(reinterpret_cast<const char *>(p_), k);
        p_ += k;
        n_ -= k;
        return s;
    }
    std::string_view rest() { return take(n_); }

  private:
    const uint8_t *p_;
    size_t n_;
};

inline std::string_view as_text(const uint8_t *data, size_t size) {
    return std::string_view(reinterpret_cast<const char *>(data), size);
}

}  // namespace sk::fuzz
