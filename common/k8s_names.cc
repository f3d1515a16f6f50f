#include "common/k8s_names.h"

#include "common/strings.h"

namespace sk::k8s {
namespace {

bool lower_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool alnum(char c) {
    return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

bool is_name_part(std::string_view s) {
    if (s.empty() || s.size() > 63) return false;
    if (!alnum(s.front()) || !alnum(s.back())) return false;
    for (char c : s)
        if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
    return true;
}

}  // namespace

bool is_dns1123_label(std::string_view s) noexcept {
    if (s.empty() || s.size() > 63) return false;
    if (!lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
    for (char c : s)
        if (!lower_alnum(c) && c != '-') return false;
    return true;
}

bool is_dns1123_subdomain(std::string_view s) noexcept {
    if (s.empty() || s.size() > 253) return false;
    size_t start = 0;
    for (;;) {
        size_t dot = s.find('.', start);
        std::string_view part =
            s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
        if (!is_dns1123_label(part)) return false;
        if (dot == std::string_view::npos) return true;
        start = dot + 1;
    }
}

bool is_qualified_name(std::string_view s) noexcept {
    auto slash = s.find('/');
    if (slash == std::string_view::npos) return is_name_part(s);
    if (s.find('/', slash + 1) != std::string_view::npos) return false;
    return is_dns1123_subdomain(s.substr(0, slash)) && is_name_part(s.substr(slash + 1));
}

bool is_label_value(std::string_view s) noexcept {
    return s.empty() || is_name_part(s);
}

Result<std::map<std::string, std::string>> parse_labels(std::string_view s) {
    std::map<std::string, std::string> out;
    if (trim(s).empty()) return out;
    for (const auto &item : split(s, ',')) {
        auto eq = item.find('=');
        if (eq == std::string::npos)
            return fail(Error::InvalidArgument, "label '" + item + "' is not key=value");
        std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        if (!is_qualified_name(key))
            return fail(Error::InvalidArgument,
                        "label key '" + key +
                            "' is invalid: use [prefix/]name, where name is at most 63 letters, "
                            "digits, '-', '_' or '.', starting and ending with a letter or digit");
        if (!is_label_value(value))
            return fail(Error::InvalidArgument,
                        "label value '" + value + "' of '" + key +
                            "' is invalid: at most 63 letters, digits, '-', '_' or '.', starting "
                            "and ending with a letter or digit");
        if (out.count(key))
            return fail(Error::InvalidArgument, "label key '" + key + "' is given twice");
        out[key] = value;
    }
    return out;
}

Result<Taint> parse_taint(std::string_view s) {
    std::string item(s);
    auto colon = item.rfind(':');
    if (colon == std::string::npos)
        return fail(Error::InvalidArgument,
                    "taint '" + item +
                        "' needs an effect: key[=value]:NoSchedule|PreferNoSchedule|NoExecute");
    Taint t;
    t.effect = item.substr(colon + 1);
    std::string kv = item.substr(0, colon);
    auto eq = kv.find('=');
    t.key = kv.substr(0, eq);
    if (eq != std::string::npos) t.value = kv.substr(eq + 1);
    if (t.effect != "NoSchedule" && t.effect != "PreferNoSchedule" && t.effect != "NoExecute")
        return fail(Error::InvalidArgument,
                    "taint '" + item + "': effect '" + t.effect +
                        "' is not NoSchedule, PreferNoSchedule or NoExecute");
    if (!is_qualified_name(t.key))
        return fail(Error::InvalidArgument,
                    "taint '" + item + "': key '" + t.key + "' is not a valid [prefix/]name");
    if (!is_label_value(t.value))
        return fail(Error::InvalidArgument,
                    "taint '" + item + "': value '" + t.value + "' is not a valid label value");
    return t;
}

Result<std::vector<Taint>> parse_taints(std::string_view s) {
    std::vector<Taint> out;
    if (trim(s).empty()) return out;
    for (const auto &item : split(s, ',')) {
        auto t = parse_taint(item);
        if (!t) return t.failure();
        out.push_back(*t);
    }
    return out;
}

std::string format_taint(const Taint &t) {
    return t.key + (t.value.empty() ? "" : "=" + t.value) + ":" + t.effect;
}

namespace {

bool in_domain(std::string_view ns, std::string_view domain) {
    return ns == domain ||
           (ns.size() > domain.size() && ns.substr(ns.size() - domain.size()) == domain &&
            ns[ns.size() - domain.size() - 1] == '.');
}

}  // namespace

bool node_may_set_label(std::string_view key) {
    auto slash = key.find('/');
    if (slash == std::string_view::npos) return true;
    const std::string_view ns = key.substr(0, slash);
    if (!in_domain(ns, "kubernetes.io") && !in_domain(ns, "k8s.io")) return true;
    if (in_domain(ns, "kubelet.kubernetes.io") || in_domain(ns, "node.kubernetes.io")) return true;
    static const char *const kKubeletLabels[] = {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    };
    for (const char *l : kKubeletLabels)
        if (key == l) return true;
    return false;
}

std::string pod_hostname(const std::string &spec_hostname, const std::string &name) {
    if (!spec_hostname.empty()) return spec_hostname;
    std::string h = name.substr(0, 63);
    while (!h.empty() && (h.back() == '-' || h.back() == '.'))
        h.pop_back();
    return h;
}

}  // namespace sk::k8s
