// Small strict text helpers shared by the parsers. Every number parser
// rejects signs, spaces, trailing garbage and overflow.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk {

std::string_view trim(std::string_view s) noexcept;
// Splits on sep; keeps empty fields (callers decide whether they are errors).
std::vector<std::string> split(std::string_view s, char sep);
bool starts_with(std::string_view s, std::string_view prefix) noexcept;
bool ends_with(std::string_view s, std::string_view suffix) noexcept;
std::string join(const std::vector<std::string> &parts, std::string_view sep);
// Lower-case hex of n bytes: {0x0f, 0xa0} -> "0fa0".
std::string hex_encode(const void *data, size_t n);

// Decimal, no sign; fails with InvalidArgument naming `what`.
Result<uint64_t> parse_uint(std::string_view s, std::string_view what, uint64_t max = UINT64_MAX);
// The same where no message is wanted (a field of a kernel file): nullopt
// when s is not a decimal number.
std::optional<uint64_t> to_uint(std::string_view s);
// A CPU nice value, -20..19 (setpriority(2)); fails with InvalidArgument
// "WHAT='S' is not a nice value (allowed -20..19)".
Result<int> parse_nice(std::string_view s, std::string_view what);
// yes/no/true/false/1/0/on/off.
Result<bool> parse_bool(std::string_view s, std::string_view what);
// Memory size to MiB: "512M", "16G", "1T", "1024" (plain number = MiB, as in
// Slurm's --mem). Kubernetes-style suffixes "Mi", "Gi", "Ti" are accepted too.
Result<uint64_t> parse_size_mib(std::string_view s, std::string_view what);
// Duration to seconds: "90", "90s", "5m", "2h".
Result<uint64_t> parse_seconds(std::string_view s, std::string_view what);
// A list of non-negative integers with ranges: "0,2-3" -> {0,2,3}.
Result<std::vector<int>> parse_index_list(std::string_view s, std::string_view what);
std::string format_index_list(const std::vector<int> &v);  // "0,2,3"

}  // namespace sk
