#include "common/wire.h"

#include <cctype>
#include <cstring>

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
    bool over = false;
    const char *end = data + len;
    while (data < end) {
        auto *nl = static_cast<const char *>(memchr(data, '\n', static_cast<size_t>(end - data)));
        const char *stop = nl ? nl + 1 : end;
        size_t n = static_cast<size_t>((nl ? nl : end) - data);  // bytes of the line, '\n' excluded
        if (skipping_) {
            skipping_ = nl == nullptr;
        } else if (buf_.size() - line_start_ + n > max_) {
            over = true;
            buf_.resize(line_start_);  // drop what was received of the line
            skipping_ = nl == nullptr;
        } else {
            buf_.append(data, static_cast<size_t>(stop - data));
            if (nl) line_start_ = buf_.size();
        }
        data = stop;
    }
    if (over) return fail(Error::TooLarge, "message exceeds " + std::to_string(max_) + " bytes");
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

std::string LineBuffer::take_rest() {
    std::string rest = buf_.substr(pos_);
    buf_.clear();
    pos_ = line_start_ = 0;
    skipping_ = false;
    return rest;
}

}  // namespace sk::proto
