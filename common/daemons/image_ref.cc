#include "common/daemons/image_ref.h"

#include "common/strings.h"

namespace sk {

std::string normalize_image(const std::string &image) {
    size_t slash = image.find('/');
    std::string first = slash == std::string::npos ? "" : image.substr(0, slash);
    bool has_registry =
        !first.empty() && (first.find_first_of(".:") != std::string::npos || first == "localhost");
    if (has_registry) return image;
    if (slash == std::string::npos) return "docker.io/library/" + image;
    return "docker.io/" + image;
}

std::string image_registry(const std::string &image) {
    return image.substr(0, image.find('/'));
}

std::string default_pull_policy(const std::string &image) {
    if (image.find('@') != std::string::npos) return "IfNotPresent";
    size_t slash = image.rfind('/');
    size_t colon = image.rfind(':');
    bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
    if (!tagged || image.substr(colon + 1) == "latest") return "Always";
    return "IfNotPresent";
}

std::string image_store_name(const std::string &normalized) {
    if (normalized.find('@') != std::string::npos) return normalized;
    size_t slash = normalized.rfind('/');
    size_t colon = normalized.rfind(':');
    if (colon != std::string::npos && (slash == std::string::npos || colon > slash))
        return normalized;
    return normalized + ":latest";
}

std::string image_ref_error(const std::string &ref) {
    if (ref.empty()) return "the image name is empty";
    if (ref.size() > 512) return "the image name is longer than 512 bytes";
    if (ref[0] == '-') return "the image name starts with '-'";
    for (char ch : ref) {
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == ':' || ch == '/' ||
                  ch == '@' || ch == '-';
        if (!ok) return "the image name has a character other than A-Z a-z 0-9 . _ : / @ -";
    }
    if (ref.find('/') == std::string::npos) return "the image name has no registry";
    for (const auto &part : split(ref, '/'))
        if (part.empty() || part == "." || part == "..")
            return "the image name has an empty, '.' or '..' component";
    return "";
}

std::string pull_error(const std::string &output) {
    std::string last, error;
    for (const auto &line : split(output, '\n')) {
        std::string l(trim(line));
        if (l.empty()) continue;
        last = l;
        if (l.rfind("Error: ", 0) == 0) error = l.substr(7);
    }
    std::string msg = error.empty() ? last : error;
    if (msg.empty()) msg = "the pull failed without a message";
    if (msg.size() > 1024) msg.replace(1024, std::string::npos, "...");
    return msg;
}

}  // namespace sk
