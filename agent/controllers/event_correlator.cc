#include "agent/controllers/event_correlator.h"

#include "common/rfc3339.h"

namespace sk::agent {

std::string EventCorrelator::key(const Json::Value &e) {
    const Json::Value &io = e["involvedObject"];
    std::string k;
    for (const std::string &part :
         {io["kind"].asString(), io["namespace"].asString(), io["name"].asString(),
          io["uid"].asString(), io["fieldPath"].asString(), e["type"].asString(),
          e["reason"].asString(), e["message"].asString(), e["source"]["component"].asString(),
          e["source"]["host"].asString()}) {
        k += part;
        k += '\x1f';
    }
    return k;
}

EventCorrelator::Action EventCorrelator::observe(const Json::Value &event, int64_t now_s) {
    Action a;
    std::string k = key(event);
    auto it = entries_.find(k);
    if (it != entries_.end() && now_s - it->second.last_s <= window_s_) {
        Entry &e = it->second;
        e.count++;
        e.last_s = now_s;
        a.create = false;
        a.ns = e.ns;
        a.name = e.name;
        a.body = Json::Value(Json::objectValue);
        a.body["count"] = Json::Int64(e.count);
        a.body["lastTimestamp"] = rfc3339(now_s);
        a.body["message"] = event["message"];
        return a;
    }
    if (entries_.size() >= max_ && it == entries_.end()) {
        // Bounded memory: drop the least recently seen record.
        auto oldest = entries_.begin();
        for (auto i = entries_.begin(); i != entries_.end(); ++i)
            if (i->second.last_s < oldest->second.last_s) oldest = i;
        entries_.erase(oldest);
    }
    Entry e;
    e.ns = event["metadata"]["namespace"].asString();
    e.name = event["metadata"]["name"].asString();
    e.uid = event["involvedObject"]["uid"].asString();
    e.first_ts = event["firstTimestamp"].asString();
    e.count = 1;
    e.last_s = now_s;
    entries_[k] = e;
    a.create = true;
    a.ns = e.ns;
    a.name = e.name;
    a.body = event;
    return a;
}

void EventCorrelator::forget(const Json::Value &event) {
    entries_.erase(key(event));
}

void EventCorrelator::forget_object(const std::string &uid) {
    for (auto it = entries_.begin(); it != entries_.end();)
        it = it->second.uid == uid ? entries_.erase(it) : std::next(it);
}

}  // namespace sk::agent
