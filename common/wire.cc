#include "common/wire.h"

#include <cctype>

namespace sk::proto {

Status check_node_name(const std::string &n, std::string_view ctx) {
    if (n.empty() || n.size() > 128)
        return fail(Error::Parse, std::string(ctx) + ": 'slurm_node' must be 1..128 characters");
    for (char c : n)
        if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
            return fail(Error::Parse, std::string(ctx) + ": 'slurm_node' has invalid characters");
    return {};
}

// ---- framing ----

Status LineBuffer::feed(const char *data, size_t len) {
    if (pos_ > 0 && (pos_ == buf_.size() || pos_ > 65536)) {
        buf_.erase(0, pos_);
        line_start_ -= pos_;
        pos_ = 0;
    }
    size_t scan = buf_.size();
    buf_.append(data, len);
    for (size_t nl = buf_.find('\n', scan); nl != std::string::npos; nl = buf_.find('\n', nl + 1)) {
        if (nl - line_start_ > max_)
            return fail(Error::TooLarge, "message exceeds " + std::to_string(max_) + " bytes");
        line_start_ = nl + 1;
    }
    if (buf_.size() - line_start_ > max_)
        return fail(Error::TooLarge, "message exceeds " + std::to_string(max_) + " bytes");
    return {};
}

std::optional<std::string> LineBuffer::next() {
    size_t nl = buf_.find('\n', pos_);
    if (nl == std::string::npos) return std::nullopt;
    std::string line = buf_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
}

}  // namespace sk::proto
