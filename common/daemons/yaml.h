// YAML documents as JSON values, for the files admins and tools write in
// YAML: kubeconfigs (agent/kube/kubeconfig.h), CDI specifications
// (k8s-shim/cdi.h). libyaml's document loader: mappings -> objects,
// sequences -> arrays, every scalar a string (a JSON document, which YAML
// reads too, gives its numbers and booleans as strings), a plain empty,
// `~` or `null` scalar null; aliases resolved; at most 32 levels deep.
#pragma once

#include <string_view>

#include <json/json.h>

#include "common/result.h"

namespace sk {

// Parse: the line and libyaml's words when the text is not YAML.
Result<Json::Value> parse_yaml(std::string_view text);

}  // namespace sk
