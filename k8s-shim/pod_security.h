// Which Pod and Container fields the shim honours, and the confinement the
// securityContexts ask for. Pure: no I/O. The rule (docs/kubernetes-guide.md,
// "Pod fields on Slurm nodes", lists every field): each field is either
// implemented, accepted because it has no effect on a pod run as processes
// (the reason is documented), or refused when set, with a reason that reaches
// the pod's status (Error::Refused). A field the tables do not know is
// refused too: a pod is never accepted with a field silently ignored.
#pragma once

#include <string>
#include <vector>

#include <json/json.h>

#include "common/result.h"
#include "k8s-shim/pod_plan.h"

namespace sk::shim {

// What the shim does with one field.
enum class FieldUse {
    Implemented,   // plan_pod reads it (its values are checked where it is read)
    NoEffect,      // accepted: nothing for a process pod to do (`why` says why)
    RefusedIfSet,  // refused unless null, false, "" or empty (`why` says why)
};

struct FieldRule {
    const char *name;
    FieldUse use;
    const char *why;  // for NoEffect and RefusedIfSet; shown to the user
};

// The tables, for tests and docs: PodSpec, Container, PodSecurityContext,
// SecurityContext fields.
const std::vector<FieldRule> &pod_spec_fields();
const std::vector<FieldRule> &container_fields();
const std::vector<FieldRule> &pod_security_context_fields();
const std::vector<FieldRule> &container_security_context_fields();
const std::vector<FieldRule> &volume_mount_fields();

// m: one volumeMount of a container (who: "container x's volumeMount v").
Status check_volume_mount(const Json::Value &m, const std::string &who);

// spec: the PodSpec. Checks every PodSpec field and the pod-level
// securityContext against the tables and the job's identity (ctx).
Status check_pod_fields(const Json::Value &spec, const PlanContext &ctx);

// c: one container of spec (who: "container x" / "init container x" for
// messages); runtime: what runs it. A template's or podman's container tool
// needs its own privileges (docs/kubernetes-guide.md): the Confinement then
// holds only what the pod asks, for podman to apply inside the container
// (k8s-shim/podman.h), which also gives the RuntimeDefault seccomp profile
// (podman's default filter); a template refuses that profile. Checks the
// container's fields and its securityContext, and returns how its processes
// are confined.
enum class RuntimeKind { Process, Template, Podman };
Result<Confinement> plan_container_security(const Json::Value &spec, const Json::Value &c,
                                            RuntimeKind runtime, const PlanContext &ctx,
                                            const std::string &who);

}  // namespace sk::shim
