// Splits a Kubernetes watch stream (one JSON object per line, delivered in
// arbitrary chunks) into events. Pure: the HTTP layer feeds bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <json/json.h>

#include "common/result.h"

namespace sk::agent {

enum class WatchType { Added, Modified, Deleted, Bookmark, Error };

struct WatchEvent {
    WatchType type = WatchType::Added;
    Json::Value object;
    std::string resource_version;  // object.metadata.resourceVersion ("" for ERROR)
    int error_code = 0;            // ERROR: Status.code (410 = relist)
    std::string error_message;
};

class WatchParser {
  public:
    explicit WatchParser(size_t max_line = 64u << 20) : max_line_(max_line) {}
    // Appends bytes and returns the events completed by them. A malformed
    // line or one over the bound fails: the caller restarts the watch.
    Result<std::vector<WatchEvent>> feed(std::string_view chunk);
    size_t buffered() const { return buf_.size(); }

  private:
    std::string buf_;
    size_t max_line_;
};

// One line -> one event (exposed for tests).
Result<WatchEvent> parse_watch_line(std::string_view line);

}  // namespace sk::agent
