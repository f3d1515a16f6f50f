// Event de-duplication as the kubelet's client-go EventCorrelator does it:
// an event equal to a recent one (same involved object + fieldPath, type,
// reason, message, source) is not created again; the existing Event is
// PATCHed with count+1, lastTimestamp and message. Pure: the caller does
// the API calls and reports failures back. Runs on the loop only.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <json/json.h>

namespace sk::agent {

class EventCorrelator {
  public:
    explicit EventCorrelator(int64_t window_s = 600, size_t max_entries = 4096)
        : window_s_(window_s), max_(max_entries) {}

    struct Action {
        bool create = true;
        std::string ns, name;  // the Event to PATCH (create == false)
        Json::Value body;      // the Event to POST, or the patch body
    };
    // `event` is a core/v1 Event from build_pod_event().
    Action observe(const Json::Value &event, int64_t now_s);
    // The POST or PATCH failed (the Event expired, a conflict...): the next
    // repeat creates a fresh Event.
    void forget(const Json::Value &event);
    // Drops every record of one involved object (pod deleted).
    void forget_object(const std::string &uid);
    size_t size() const { return entries_.size(); }

    static std::string key(const Json::Value &event);

  private:
    struct Entry {
        std::string ns, name, uid, first_ts;
        int64_t count = 0, last_s = 0;
    };
    int64_t window_s_;
    size_t max_;
    std::map<std::string, Entry> entries_;
};

}  // namespace sk::agent
