// Result<T>: a value or an sk::Error with a message. No exceptions cross the
// project's C boundaries (SPANK hooks, libuv and curl callbacks); code inside
// returns Result and the boundary turns failures into log lines + return codes.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "common/error.h"

namespace sk {

struct Failure {
    Error code;
    std::string message;  // says what failed and, for users, what to do next
    // The server's Retry-After (an HTTP 429 or 503) in seconds; 0 = none. A
    // retry waits at least this long (Backoff::next_ms(const Failure &)).
    uint32_t retry_after_s = 0;

    // "not_found: node slurm-n1-42 does not exist"
    std::string describe() const;
};

inline Failure fail(Error code, std::string message) {
    return Failure{code, std::move(message)};
}

template <typename T>
class [[nodiscard]] Result {
  public:
    Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
    Result(Failure failure) : v_(std::move(failure)) {}  // NOLINT: implicit by design

    bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }

    T &value() & {
        assert(ok());
        return std::get<0>(v_);
    }
    const T &value() const & {
        assert(ok());
        return std::get<0>(v_);
    }
    T &&value() && {
        assert(ok());
        return std::get<0>(std::move(v_));
    }
    T &operator*() & { return value(); }
    const T &operator*() const & { return value(); }
    T *operator->() { return &value(); }
    const T *operator->() const { return &value(); }

    const Failure &failure() const {
        assert(!ok());
        return std::get<1>(v_);
    }
    Error error() const { return failure().code; }
    const std::string &message() const { return failure().message; }

  private:
    std::variant<T, Failure> v_;
};

template <>
class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Failure failure) : failure_(std::move(failure)), ok_(false) {}  // NOLINT

    bool ok() const noexcept { return ok_; }
    explicit operator bool() const noexcept { return ok_; }
    const Failure &failure() const {
        assert(!ok_);
        return failure_;
    }
    Error error() const { return failure().code; }
    const std::string &message() const { return failure().message; }

  private:
    Failure failure_{Error::Internal, {}};
    bool ok_ = true;
};

using Status = Result<void>;

}  // namespace sk

// In a function returning a Result or Status: evaluates expr (a Result<T>),
// returns its failure, or moves its value into dst.
#define SK_TRY_ASSIGN(dst, expr)      \
    do {                              \
        auto _r = (expr);             \
        if (!_r) return _r.failure(); \
        (dst) = std::move(*_r);       \
    } while (0)
