#include "common/error.h"

#include <array>
#include <utility>

namespace sk {
namespace {

constexpr std::array<std::pair<Error, std::string_view>, 16> kNames{{
    {Error::InvalidArgument, "invalid_argument"},
    {Error::Parse, "parse"},
    {Error::TooLarge, "too_large"},
    {Error::Io, "io"},
    {Error::Timeout, "timeout"},
    {Error::NotFound, "not_found"},
    {Error::AlreadyExists, "already_exists"},
    {Error::Conflict, "conflict"},
    {Error::Gone, "gone"},
    {Error::Unauthorized, "unauthorized"},
    {Error::Forbidden, "forbidden"},
    {Error::Invalid, "invalid"},
    {Error::Transient, "transient"},
    {Error::Refused, "refused"},
    {Error::Unavailable, "unavailable"},
    {Error::Internal, "internal"},
}};

}  // namespace

std::string_view to_string(Error e) noexcept {
    for (const auto &[code, name] : kNames)
        if (code == e) return name;
    return "internal";
}

bool error_from_string(std::string_view name, Error *out) noexcept {
    for (const auto &[code, n] : kNames) {
        if (n == name) {
            *out = code;
            return true;
        }
    }
    return false;
}

}  // namespace sk
