#include "k8s-shim/pod_security.h"

#include "common/k8s_names.h"

#include <algorithm>

namespace sk::shim {

namespace {

using U = FieldUse;

Failure refused(const std::string &msg) {
    return fail(Error::Refused, msg);
}

bool is_true(const Json::Value &obj, const char *key) {
    return obj.isObject() && obj[key].isBool() && obj[key].asBool();
}

// "Set" as a refusal understands it: anything but null, false, "" and an
// empty list or object (the API server's zero values for an unset field).
bool is_set(const Json::Value &v) {
    if (v.isNull()) return false;
    if (v.isBool()) return v.asBool();
    if (v.isString()) return !v.asString().empty();
    if (v.isArray() || v.isObject()) return !v.empty();
    return true;
}

const FieldRule *find_rule(const std::vector<FieldRule> &rules, const std::string &name) {
    for (const auto &r : rules)
        if (name == r.name) return &r;
    return nullptr;
}

// Every member of obj against rules: an unknown member, or a RefusedIfSet one
// that is set, refuses the pod. where: "spec", "container x", ...
Status check_members(const Json::Value &obj, const std::vector<FieldRule> &rules,
                     const std::string &where) {
    if (!obj.isObject()) return {};
    for (const auto &name : obj.getMemberNames()) {
        const FieldRule *r = find_rule(rules, name);
        if (!r)
            return refused(where + " sets " + name +
                           ", a field this node's shim does not know; it cannot honour it. "
                           "Remove " +
                           name);
        if (r->use == U::RefusedIfSet && is_set(obj[name]))
            return refused(where + " sets " + name +
                           ", which Slurm nodes do not support: " + r->why + ". Remove " + name);
    }
    return {};
}

const char kScheduling[] =
    "used by the Kubernetes scheduler or API server before the pod reaches the node";

const std::vector<FieldRule> kPodSpec = {
    {"activeDeadlineSeconds", U::Implemented, ""},
    {"affinity", U::NoEffect, kScheduling},
    {"automountServiceAccountToken", U::NoEffect,
     "the API server turns it into the kube-api-access volume, which the shim writes"},
    {"containers", U::Implemented, ""},
    {"dnsConfig", U::RefusedIfSet, "processes use the node's resolver (/etc/resolv.conf)"},
    {"dnsPolicy", U::NoEffect, "processes use the node's resolver, whatever the policy"},
    {"enableServiceLinks", U::NoEffect,
     "no service environment variables are set; use the services' DNS names"},
    {"ephemeralContainers", U::RefusedIfSet, "kubectl debug containers are not run"},
    {"hostAliases", U::RefusedIfSet, "processes share the node's /etc/hosts"},
    {"hostIPC", U::Implemented, ""},
    {"hostNetwork", U::NoEffect,
     "on a node without a network per pod, every pod shares the node's network, as with "
     "hostNetwork: true"},
    {"hostPID", U::Implemented, ""},
    {"hostUsers", U::Implemented, ""},
    {"hostname", U::RefusedIfSet,
     "a pod on the node's network sees the node's hostname; HOSTNAME is the node name"},
    {"imagePullSecrets", U::NoEffect,
     "used by the podman runtime's pulls; the process runtime pulls no image, a runtime "
     "template's tool uses its own credentials"},
    {"initContainers", U::Implemented, ""},
    {"nodeName", U::Implemented, ""},
    {"nodeSelector", U::NoEffect, kScheduling},
    {"os", U::Implemented, ""},
    {"overhead", U::NoEffect, kScheduling},
    {"preemptionPolicy", U::NoEffect, kScheduling},
    {"priority", U::NoEffect, kScheduling},
    {"priorityClassName", U::NoEffect, kScheduling},
    {"readinessGates", U::RefusedIfSet, "the shim computes Ready from the containers only"},
    {"resourceClaims", U::RefusedIfSet, "dynamic resource allocation is not supported"},
    {"resources", U::RefusedIfSet, "pod-level resources are not supported; set them per container"},
    {"restartPolicy", U::Implemented, ""},
    {"runtimeClassName", U::RefusedIfSet,
     "containers run as processes or through the node's runtime templates"},
    {"schedulerName", U::NoEffect, kScheduling},
    {"schedulingGates", U::NoEffect, kScheduling},
    {"securityContext", U::Implemented, ""},
    {"serviceAccount", U::NoEffect, "the deprecated alias of serviceAccountName"},
    {"serviceAccountName", U::Implemented, ""},
    {"setHostnameAsFQDN", U::RefusedIfSet, "processes see the node's hostname"},
    {"shareProcessNamespace", U::NoEffect,
     "the containers of a pod see each other's processes anyway: they are the job user's"},
    {"subdomain", U::RefusedIfSet, "a pod on the node's network sees the node's hostname"},
    {"terminationGracePeriodSeconds", U::Implemented, ""},
    {"tolerations", U::NoEffect, kScheduling},
    {"topologySpreadConstraints", U::NoEffect, kScheduling},
    {"volumes", U::Implemented, ""},
};

const std::vector<FieldRule> kContainer = {
    {"args", U::Implemented, ""},
    {"command", U::Implemented, ""},
    {"env", U::Implemented, ""},
    {"envFrom", U::RefusedIfSet, "the agent resolves envFrom into env; this one it did not"},
    {"image", U::Implemented, ""},
    {"imagePullPolicy", U::NoEffect,
     "used by the podman runtime's pulls; the process runtime pulls no image"},
    {"lifecycle", U::Implemented, ""},
    {"livenessProbe", U::Implemented, ""},
    {"name", U::Implemented, ""},
    {"ports", U::NoEffect,
     "processes bind in the node's network; a named port serves the probes only"},
    {"readinessProbe", U::Implemented, ""},
    {"resizePolicy", U::NoEffect, "in-place resizes are not applied"},
    {"resources", U::Implemented, ""},
    {"restartPolicy", U::Implemented, ""},
    {"securityContext", U::Implemented, ""},
    {"startupProbe", U::Implemented, ""},
    {"stdin", U::Implemented, ""},
    {"stdinOnce", U::Implemented, ""},
    {"terminationMessagePath", U::NoEffect,
     "read by the podman runtime; with the process runtime no file is read, the message comes "
     "from the log with FallbackToLogsOnError"},
    {"terminationMessagePolicy", U::Implemented, ""},
    {"tty", U::Implemented, ""},
    {"volumeDevices", U::Implemented, ""},
    {"volumeMounts", U::Implemented, ""},
    {"workingDir", U::Implemented, ""},
};

// A volumeMount: the volume (or subPath in it) at mountPath in the
// container's own mount namespace (k8s-shim/mount_ns.h).
const std::vector<FieldRule> kVolumeMount = {
    {"mountPath", U::Implemented, ""},
    {"mountPropagation", U::Implemented, ""},
    {"name", U::Implemented, ""},
    {"readOnly", U::Implemented, ""},
    {"recursiveReadOnly", U::Implemented, ""},
    {"subPath", U::Implemented, ""},
    {"subPathExpr", U::Implemented, ""},
};

const char kSELinux[] = "SELinux labels are not applied to processes";
const char kWindows[] = "Slurm nodes run Linux";

const std::vector<FieldRule> kPodSecurityContext = {
    {"appArmorProfile", U::Implemented, ""},
    {"fsGroup", U::Implemented, ""},
    {"fsGroupChangePolicy", U::NoEffect, "the shim changes no file's group"},
    {"runAsGroup", U::Implemented, ""},
    {"runAsNonRoot", U::Implemented, ""},
    {"runAsUser", U::Implemented, ""},
    {"seLinuxChangePolicy", U::NoEffect, "no volume is relabelled"},
    {"seLinuxOptions", U::RefusedIfSet, kSELinux},
    {"seccompProfile", U::Implemented, ""},
    {"supplementalGroups", U::Implemented, ""},
    {"supplementalGroupsPolicy", U::Implemented, ""},
    {"sysctls", U::RefusedIfSet, "processes share the node's kernel settings"},
    {"windowsOptions", U::RefusedIfSet, kWindows},
};

const std::vector<FieldRule> kContainerSecurityContext = {
    {"allowPrivilegeEscalation", U::Implemented, ""},
    {"appArmorProfile", U::Implemented, ""},
    {"capabilities", U::Implemented, ""},
    {"privileged", U::Implemented, ""},
    {"procMount", U::Implemented, ""},
    {"readOnlyRootFilesystem", U::Implemented, ""},
    {"runAsGroup", U::Implemented, ""},
    {"runAsNonRoot", U::Implemented, ""},
    {"runAsUser", U::Implemented, ""},
    {"seLinuxOptions", U::RefusedIfSet, kSELinux},
    {"seccompProfile", U::Implemented, ""},
    {"windowsOptions", U::RefusedIfSet, kWindows},
};

std::string str(const Json::Value &obj, const char *key) {
    return obj.isObject() && obj[key].isString() ? obj[key].asString() : "";
}

// A field that may only hold its "off" value (or be unset).
Status only_value(const Json::Value &obj, const char *key, const char *off, const std::string &who,
                  const char *why) {
    if (obj[key].isNull() || (obj[key].isString() && obj[key].asString() == off)) return {};
    return refused(who + " sets " + key + " " + obj[key].toStyledString().substr(0, 64) +
                   ", which Slurm nodes do not support: " + why + ". Remove " + key +
                   " or set it to " + off);
}

// runAsUser/runAsGroup/runAsNonRoot, at either level: the pod runs as the
// job's user or not at all.
Status check_identity(const Json::Value &sc, const PlanContext &ctx, const std::string &who) {
    auto differs = [](const Json::Value &v, uint32_t id) {
        return !v.isNull() && !(v.isIntegral() && v.asInt64() == id);
    };
    if (differs(sc["runAsUser"], ctx.uid))
        return refused(who + " asks for runAsUser " + sc["runAsUser"].asString() +
                       " but pods on this node run as the job's user (uid " +
                       std::to_string(ctx.uid) + "). Remove runAsUser or set it to " +
                       std::to_string(ctx.uid));
    if (differs(sc["runAsGroup"], ctx.gid))
        return refused(who + " asks for runAsGroup " + sc["runAsGroup"].asString() +
                       " but pods on this node run with the job's group (gid " +
                       std::to_string(ctx.gid) + "). Remove runAsGroup or set it to " +
                       std::to_string(ctx.gid));
    if (is_set(sc["runAsNonRoot"]) && ctx.uid == 0)
        return refused(who +
                       " asks for runAsNonRoot but the job's user is root, the identity its "
                       "processes would have. Run the job as another user");
    return {};
}

bool job_has_group(const PlanContext &ctx, int64_t gid) {
    return gid == ctx.gid || std::find(ctx.groups.begin(), ctx.groups.end(),
                                       static_cast<uint32_t>(gid)) != ctx.groups.end();
}

// The groups a process gets are the job's: supplementalGroups and fsGroup
// are satisfied when they are among them, refused otherwise.
Status check_groups(const Json::Value &sc, const PlanContext &ctx) {
    for (const auto &g : sc["supplementalGroups"])
        if (!g.isIntegral() || !job_has_group(ctx, g.asInt64()))
            return refused("the pod asks for supplemental group " + g.asString() +
                           ", which the job's user is not in; pods on this node have the job's "
                           "groups. Remove it from securityContext.supplementalGroups");
    const Json::Value &fs = sc["fsGroup"];
    if (!fs.isNull() && (!fs.isIntegral() || !job_has_group(ctx, fs.asInt64())))
        return refused("the pod asks for fsGroup " + fs.asString() +
                       ", which the job's user is not in; pods on this node have the job's "
                       "groups. Remove securityContext.fsGroup or use gid " +
                       std::to_string(ctx.gid));
    std::string policy = str(sc, "supplementalGroupsPolicy");
    if (!policy.empty() && policy != "Merge")
        return refused("the pod asks for supplementalGroupsPolicy " + policy +
                       "; pods on this node have all the job's groups (Merge)");
    return {};
}

Status check_apparmor(const Json::Value &sc, const std::string &who) {
    std::string type = str(sc["appArmorProfile"], "type");
    if (sc["appArmorProfile"].isNull() || type == "Unconfined") return {};
    return refused(who + " asks for AppArmor profile " + (type.empty() ? "(no type)" : type) +
                   "; Slurm nodes apply no AppArmor profile to pods. Remove appArmorProfile or "
                   "set its type to Unconfined");
}

}  // namespace

const std::vector<FieldRule> &volume_mount_fields() {
    return kVolumeMount;
}

Status check_volume_mount(const Json::Value &m, const std::string &who) {
    if (auto st = check_members(m, kVolumeMount, who); !st) return st;
    if (auto st = only_value(m, "mountPropagation", "None", who,
                             "the container's mounts are its own, nothing is propagated");
        !st)
        return st;
    if (auto st = only_value(m, "recursiveReadOnly", "Disabled", who,
                             "readOnly applies to the mount, not to mounts under it");
        !st)
        return st;
    return {};
}

const std::vector<FieldRule> &pod_spec_fields() {
    return kPodSpec;
}
const std::vector<FieldRule> &container_fields() {
    return kContainer;
}
const std::vector<FieldRule> &pod_security_context_fields() {
    return kPodSecurityContext;
}
const std::vector<FieldRule> &container_security_context_fields() {
    return kContainerSecurityContext;
}

Status check_pod_fields(const Json::Value &spec, const PlanContext &ctx) {
    // A pod of its own network has a hostname of its own (its UTS
    // namespace: k8s-shim/sandbox.h); its subdomain names it in DNS.
    Json::Value checked = spec;
    if (ctx.own_network && checked.isObject()) {
        if (!checked["hostname"].isNull() &&
            !(checked["hostname"].isString() &&
              k8s::is_dns1123_label(checked["hostname"].asString())))
            return refused("spec.hostname must be a DNS label (RFC 1123)");
        checked.removeMember("hostname");
        checked.removeMember("subdomain");
    }
    if (auto st = check_members(checked, kPodSpec, "the pod's spec"); !st) return st;
    if (is_set(spec["hostPID"]))
        return refused(
            "hostPID is not allowed: pods on Slurm nodes may not see the job's or "
            "other users' processes. Remove spec.hostPID");
    if (is_set(spec["hostIPC"]))
        return refused("hostIPC is not allowed on Slurm nodes. Remove spec.hostIPC");
    if (!spec["hostUsers"].isNull() && !is_true(spec, "hostUsers"))
        return refused(
            "hostUsers: false asks for a user namespace, which pods on Slurm nodes do not get; "
            "they run as the job's user. Remove spec.hostUsers");
    std::string os = str(spec["os"], "name");
    if (is_set(spec["os"]) && os != "linux")
        return refused("the pod asks for os " + os + "; Slurm nodes run Linux");
    const Json::Value &sc = spec["securityContext"];
    if (!sc.isObject()) return {};
    if (auto st = check_members(sc, kPodSecurityContext, "the pod's securityContext"); !st)
        return st;
    if (auto st = check_identity(sc, ctx, "the pod"); !st) return st;
    return check_groups(sc, ctx);
}

Result<Confinement> plan_container_security(const Json::Value &spec, const Json::Value &c,
                                            RuntimeKind runtime, const PlanContext &ctx,
                                            const std::string &who) {
    const bool templated = runtime != RuntimeKind::Process;
    if (auto st = check_members(c, kContainer, who); !st) return st.failure();
    if (c["lifecycle"].isObject())
        for (const auto &hook : c["lifecycle"].getMemberNames())
            if (hook != "preStop" && hook != "postStart" && hook != "stopSignal")
                return refused(who + " sets lifecycle." + hook +
                               ", which Slurm nodes do not know (they run postStart and preStop "
                               "hooks). Remove lifecycle." +
                               hook);
    if (is_set(c["lifecycle"]["stopSignal"]) &&
        c["lifecycle"]["stopSignal"].asString() != "SIGTERM")
        return refused(who + " asks for stopSignal " + c["lifecycle"]["stopSignal"].asString() +
                       "; containers on Slurm nodes are stopped with SIGTERM. Remove "
                       "lifecycle.stopSignal");
    const Json::Value &pod_sc = spec["securityContext"];
    const Json::Value &sc = c["securityContext"];
    if (auto st = check_members(sc, kContainerSecurityContext, who + "'s securityContext"); !st)
        return st.failure();
    if (sc.isObject()) {
        if (is_set(sc["privileged"]))
            return refused(who +
                           " asks for privileged mode; pods on Slurm nodes run as the job's "
                           "user without privileges. Remove securityContext.privileged");
        const Json::Value &add = sc["capabilities"]["add"];
        if (is_set(add))
            return refused(who + " adds Linux capabilities (" +
                           (add.isArray() ? add[0] : add).asString() +
                           "); pods on Slurm nodes cannot gain capabilities. Remove "
                           "securityContext.capabilities.add");
        std::string pm = str(sc, "procMount");
        if (is_set(sc["procMount"]) && pm != "Default")
            return refused(who + " asks for procMount " + pm +
                           "; processes see the node's /proc as the job's user does. Remove "
                           "securityContext.procMount");
        if (auto st = check_identity(sc, ctx, who); !st) return st.failure();
        if (is_set(sc["readOnlyRootFilesystem"]) && runtime != RuntimeKind::Podman)
            return refused(who +
                           " asks for readOnlyRootFilesystem, but runs as a process, which sees "
                           "the node's file system and has no root file system of its own. Run "
                           "it from an image (the podman runtime), or remove "
                           "securityContext.readOnlyRootFilesystem");
    }
    // The innermost setting wins, as in the kubelet.
    const Json::Value &apparmor_sc = sc.isObject() && sc.isMember("appArmorProfile") ? sc : pod_sc;
    if (apparmor_sc.isObject())
        if (auto st = check_apparmor(apparmor_sc, who); !st) return st.failure();
    const Json::Value &seccomp = sc.isObject() && is_set(sc["seccompProfile"])
                                     ? sc["seccompProfile"]
                                 : pod_sc.isObject() ? pod_sc["seccompProfile"]
                                                     : Json::Value::nullSingleton();

    Confinement conf;
    conf.read_only_root = sc.isObject() && is_set(sc["readOnlyRootFilesystem"]);
    std::string type = str(seccomp, "type");
    if (type == "RuntimeDefault") {
        if (runtime == RuntimeKind::Template)
            return refused(who +
                           " asks for the RuntimeDefault seccomp profile but runs through a "
                           "container runtime template, whose tool needs the namespace calls "
                           "the profile denies. Remove seccompProfile or set command without "
                           "a template image");
        conf.seccomp_default = true;
    } else if (type == "Localhost") {
        return refused(who +
                       " asks for a Localhost seccomp profile; Slurm nodes provide only "
                       "RuntimeDefault and Unconfined");
    } else if (is_set(seccomp) && type != "Unconfined") {
        return refused(who + " asks for seccomp profile type '" + type +
                       "'; Slurm nodes provide RuntimeDefault and Unconfined");
    }
    // A process container never gains privileges or holds capabilities,
    // whatever it asks (docs/kubernetes-guide.md, "Pod fields on Slurm
    // nodes"). A template's container tool may need its setuid helpers
    // (newuidmap, a setuid starter): it is confined only as asked.
    bool no_escalation = sc.isObject() && sc["allowPrivilegeEscalation"].isBool() &&
                         !sc["allowPrivilegeEscalation"].asBool();
    const Json::Value &drop =
        sc.isObject() ? sc["capabilities"]["drop"] : Json::Value::nullSingleton();
    conf.no_new_privs = !templated || no_escalation || conf.seccomp_default;
    conf.drop_capabilities = !templated || (drop.isArray() && !drop.empty());
    return conf;
}

}  // namespace sk::shim
