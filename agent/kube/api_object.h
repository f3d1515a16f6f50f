// Reading objects that come from the API server (Pods, Nodes, Leases,
// ConfigMaps, Secrets, Status bodies) without trusting their shape.
// jsoncpp's const operator[] throws Json::LogicError when the value is an
// array or a scalar, and asString()/asUInt() throw on an object or an out of
// range number. A conforming API server never sends such shapes, but a proxy,
// a bug or a newer API version might, and the agent reads these objects
// inside curl callbacks, where a throw abandons the controller's work (a list
// never retried, a pod never started). These readers give null, "" or 0
// instead; tests/fuzz/fuzz_api_objects.cc holds the agent's decoders to that.
#pragma once

#include <cstdint>
#include <string>

#include <json/json.h>

namespace sk::agent::api {

// obj[key] when obj is an object; otherwise (or when absent) null.
const Json::Value &field(const Json::Value &obj, const char *key);
const Json::Value &field(const Json::Value &obj, const std::string &key);
// A string, number or bool as text (what asString() gives); "" for null,
// arrays and objects.
std::string text(const Json::Value &v);
// v when it is an array, else an empty array: safe to iterate.
const Json::Value &items(const Json::Value &v);
// v when it is an object, else an empty object.
const Json::Value &object(const Json::Value &v);

// The metadata a controller keys on.
struct ObjectMeta {
    std::string uid, ns, name, resource_version;
    bool deleting = false;          // metadata.deletionTimestamp set (not null)
    uint32_t deletion_grace_s = 0;  // deletionGracePeriodSeconds, clamped to uint32
};
ObjectMeta object_meta(const Json::Value &obj);

}  // namespace sk::agent::api
