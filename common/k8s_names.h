// Kubernetes naming rules (apimachinery validation), used wherever a user's
// text becomes part of an API object: the plugin validates --k8s-labels,
// --k8s-taints and --k8s-namespace before submission, the agent again on
// register (it never trusts its peer).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk::k8s {

bool is_dns1123_label(std::string_view s) noexcept;      // [a-z0-9]([-a-z0-9]*[a-z0-9])?, <= 63
bool is_dns1123_subdomain(std::string_view s) noexcept;  // labels joined by '.', <= 253
// Label/annotation key: [prefix/]name; prefix a DNS subdomain, name <= 63 of
// [A-Za-z0-9] with -_. inside.
bool is_qualified_name(std::string_view s) noexcept;
bool is_label_value(std::string_view s) noexcept;  // empty or a name-part, <= 63
// A pod's hostname as a kubelet sets it: spec.hostname when set, else
// metadata.name cut to 63 bytes (a '-' or '.' it then ends with dropped).
std::string pod_hostname(const std::string &spec_hostname, const std::string &name);

struct Taint {
    std::string key, value, effect;  // effect: NoSchedule, PreferNoSchedule, NoExecute
    bool operator==(const Taint &o) const {
        return key == o.key && value == o.value && effect == o.effect;
    }
};

// "k=v,k2=v2" -> map; errors name the offending item and the rule.
Result<std::map<std::string, std::string>> parse_labels(std::string_view s);
// "k=v:Effect,k:Effect" -> taints.
Result<std::vector<Taint>> parse_taints(std::string_view s);
Result<Taint> parse_taint(std::string_view s);
std::string format_taint(const Taint &t);  // "k=v:Effect"

// Whether a node identity may set the label `key` on its own Node: the API
// server's NodeRestriction refuses keys under kubernetes.io and k8s.io
// (their subdomains too) but the kubelet's own labels (hostname, os, arch,
// instance type, topology zone and region, and the kubelet.kubernetes.io
// and node.kubernetes.io namespaces).
bool node_may_set_label(std::string_view key);

}  // namespace sk::k8s
