#include "agent/kube/api_object.h"

namespace sk::agent::api {
namespace {

const Json::Value &null_value() {
    static const Json::Value v;
    return v;
}

}  // namespace

const Json::Value &field(const Json::Value &obj, const char *key) {
    if (!obj.isObject()) return null_value();
    const Json::Value *v = obj.find(key, key + std::char_traits<char>::length(key));
    return v ? *v : null_value();
}

const Json::Value &field(const Json::Value &obj, const std::string &key) {
    if (!obj.isObject()) return null_value();
    const Json::Value *v = obj.find(key.data(), key.data() + key.size());
    return v ? *v : null_value();
}

std::string text(const Json::Value &v) {
    if (v.isString() || v.isNumeric() || v.isBool()) return v.asString();
    return std::string();
}

const Json::Value &items(const Json::Value &v) {
    static const Json::Value empty(Json::arrayValue);
    return v.isArray() ? v : empty;
}

const Json::Value &object(const Json::Value &v) {
    static const Json::Value empty(Json::objectValue);
    return v.isObject() ? v : empty;
}

ObjectMeta object_meta(const Json::Value &obj) {
    const Json::Value &md = field(obj, "metadata");
    ObjectMeta m;
    m.uid = text(field(md, "uid"));
    m.ns = text(field(md, "namespace"));
    m.name = text(field(md, "name"));
    m.resource_version = text(field(md, "resourceVersion"));
    m.deleting = !field(md, "deletionTimestamp").isNull();
    const Json::Value &g = field(md, "deletionGracePeriodSeconds");
    if (g.isUInt())
        m.deletion_grace_s = g.asUInt();
    else if (g.isUInt64())
        m.deletion_grace_s = UINT32_MAX;
    return m;
}

}  // namespace sk::agent::api
