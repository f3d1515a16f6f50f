#include "k8s-shim/pod_plan.h"

#include <arpa/inet.h>
#include <dirent.h>

#include <algorithm>
#include <set>

#include "common/fs.h"
#include "common/k8s_names.h"
#include "common/strings.h"
#include "k8s-shim/pod_security.h"

namespace sk::shim {

namespace {

// Resources the shim can honour. Anything else under limits/requests is a
// device or extended resource it cannot give, so the pod is refused.
const std::set<std::string> kPlainResources = {"cpu", "memory", "ephemeral-storage"};
constexpr const char *kGpuResource = "nvidia.com/gpu";

Failure refused(const std::string &msg) {
    return fail(Error::Refused, msg);
}
Failure invalid(const std::string &msg) {
    return fail(Error::Invalid, msg);
}

bool is_true(const Json::Value &obj, const char *key) {
    return obj.isObject() && obj[key].isBool() && obj[key].asBool();
}

Result<std::vector<std::string>> strings_of(const Json::Value &v, const std::string &what) {
    std::vector<std::string> out;
    if (v.isNull()) return out;
    if (!v.isArray()) return invalid(what + " must be a list of strings");
    for (const auto &e : v) {
        if (!e.isString()) return invalid(what + " must be a list of strings");
        out.push_back(e.asString());
    }
    return out;
}

Result<int> int_field(const Json::Value &obj, const char *key, int dflt, int min,
                      const std::string &what) {
    if (!obj.isMember(key) || obj[key].isNull()) return dflt;
    if (!obj[key].isInt() || obj[key].asInt() < min)
        return invalid(what + "." + key + " must be an integer >= " + std::to_string(min));
    return obj[key].asInt();
}

// The container port a probe names: a number or the name of a containerPort.
Result<int> resolve_port(const Json::Value &port, const Json::Value &container,
                         const std::string &what) {
    if (port.isInt() && port.asInt() > 0 && port.asInt() < 65536) return port.asInt();
    if (port.isString()) {
        for (const auto &p : container["ports"])
            if (p["name"].isString() && p["name"].asString() == port.asString() &&
                p["containerPort"].isInt())
                return p["containerPort"].asInt();
        auto n = parse_uint(port.asString(), what, 65535);
        if (n && *n > 0) return static_cast<int>(*n);
    }
    return invalid(what + ".port must be a port number or the name of a containerPort");
}

// A handler (exec, httpGet, tcpSocket, grpc, sleep) of a probe or hook `h`,
// `what` naming it in messages; `hook`: a lifecycle hook (sleep, no grpc
// or tcpSocket).
Status parse_action(const Json::Value &h, const Json::Value &c, const std::string &what,
                    const std::string &pod_ip, bool hook, ProbeSpec *s) {
    if (h.isMember("exec")) {
        s->action = ProbeAction::Exec;
        auto cmd = strings_of(h["exec"]["command"], what + ".exec.command");
        if (!cmd) return cmd.failure();
        if (cmd->empty()) return invalid(what + ".exec.command is empty");
        s->exec = *cmd;
    } else if (h.isMember("httpGet") || h.isMember("tcpSocket") || h.isMember("grpc")) {
        bool http = h.isMember("httpGet"), grpc = h.isMember("grpc");
        if (hook && !http)
            return refused(what +
                           ": a lifecycle hook runs exec, httpGet or sleep (a kubelet "
                           "runs no tcpSocket hook)");
        if (!hook && h.isMember("sleep")) return invalid(what + ": a probe has no sleep action");
        const Json::Value &a = http ? h["httpGet"] : grpc ? h["grpc"] : h["tcpSocket"];
        s->action = http ? ProbeAction::HttpGet : grpc ? ProbeAction::Grpc : ProbeAction::TcpSocket;
        if (grpc) {
            // A number only (the API's rule: grpc.port is an int32).
            if (!a["port"].isInt() || a["port"].asInt() <= 0 || a["port"].asInt() > 65535)
                return invalid(what + ".grpc.port must be a port number");
            s->port = a["port"].asInt();
            s->grpc_service = a["service"].isString() ? a["service"].asString() : "";
        } else {
            auto port = resolve_port(a["port"], c, what);
            if (!port) return port.failure();
            s->port = *port;
        }
        s->host = pod_ip;
        if (a["host"].isString() && !a["host"].asString().empty()) s->host = a["host"].asString();
        if (http) {
            if (a["path"].isString() && !a["path"].asString().empty())
                s->path = a["path"].asString();
            if (s->path[0] != '/') s->path = "/" + s->path;
            std::string scheme = a["scheme"].isString() ? a["scheme"].asString() : "HTTP";
            if (scheme != "HTTP" && scheme != "HTTPS")
                return invalid(what + ".httpGet.scheme must be HTTP or HTTPS, not '" + scheme +
                               "'");
            s->https = scheme == "HTTPS";
            for (const auto &hd : a["httpHeaders"])
                s->headers.emplace_back(hd["name"].asString(), hd["value"].asString());
        }
    } else if (hook && h.isMember("sleep")) {
        s->action = ProbeAction::Sleep;
        const Json::Value &sec = h["sleep"]["seconds"];
        if (!sec.isInt() || sec.asInt() < 0)
            return invalid(what + ".sleep.seconds must be an integer >= 0");
        s->sleep_s = sec.asInt();
    } else {
        return invalid(what + (hook ? " has no action (exec, httpGet or sleep)"
                                    : " has no action (exec, httpGet, tcpSocket or grpc)"));
    }
    return {};
}

Result<std::optional<ProbeSpec>> parse_probe(const Json::Value &c, const char *key,
                                             const std::string &cname, const std::string &pod_ip) {
    const Json::Value &p = c[key];
    if (p.isNull()) return std::optional<ProbeSpec>{};
    std::string what = "container " + cname + " " + key;
    if (!p.isObject()) return invalid(what + " must be an object");
    ProbeSpec s;
    if (auto st = parse_action(p, c, what, pod_ip, false, &s); !st) return st.failure();
    auto d = int_field(p, "initialDelaySeconds", 0, 0, what);
    auto per = int_field(p, "periodSeconds", 10, 1, what);
    auto to = int_field(p, "timeoutSeconds", 1, 1, what);
    auto st = int_field(p, "successThreshold", 1, 1, what);
    auto ft = int_field(p, "failureThreshold", 3, 1, what);
    for (const auto *r : {&d, &per, &to, &st, &ft})
        if (!*r) return r->failure();
    s.initial_delay_s = *d;
    s.period_s = *per;
    s.timeout_s = *to;
    s.success_threshold = *st;
    s.failure_threshold = *ft;
    return std::optional<ProbeSpec>{s};
}

Status parse_resources(const Json::Value &c, ContainerPlan *cp) {
    for (const char *kind : {"requests", "limits"}) {
        const Json::Value &m = c["resources"][kind];
        if (m.isNull()) continue;
        if (!m.isObject())
            return invalid("container " + cp->name + " resources." + kind + " must be an object");
        auto &dst = std::string(kind) == "requests" ? cp->requests : cp->limits;
        for (const auto &res : m.getMemberNames()) {
            const Json::Value &v = m[res];
            std::string val = v.isString() ? v.asString() : v.isIntegral() ? v.asString() : "";
            if (val.empty())
                return invalid("container " + cp->name + " resources." + kind + "." + res +
                               " must be a quantity");
            if (res != kGpuResource && !kPlainResources.count(res) &&
                !starts_with(res, "hugepages-"))
                return refused("container " + cp->name + " asks for " + res +
                               ", which this node cannot provide; Slurm nodes lend only "
                               "nvidia.com/gpu, cpu and memory");
            dst[res] = val;
        }
    }
    std::string gpu = cp->limits.count(kGpuResource)     ? cp->limits[kGpuResource]
                      : cp->requests.count(kGpuResource) ? cp->requests[kGpuResource]
                                                         : "0";
    auto n = parse_uint(gpu, "nvidia.com/gpu", 1024);
    if (!n) return invalid("container " + cp->name + ": nvidia.com/gpu must be a whole number");
    cp->gpus = static_cast<int>(*n);
    return {};
}

// env in order: every entry sees the ones before it for $(VAR) expansion, as
// in the kubelet. valueFrom should have been resolved by the agent; the pod's
// own metadata (downward API fieldRef) is resolved here as a fallback.
Status parse_env(const Json::Value &c, const Json::Value &pod, const PlanContext &ctx,
                 const std::vector<EnvVar> &base, ContainerPlan *cp) {
    std::map<std::string, std::string> seen;
    std::vector<EnvVar> own;
    for (const auto &e : c["env"]) {
        if (!e["name"].isString() || e["name"].asString().empty())
            return invalid("container " + cp->name + ": every env entry needs a name");
        std::string name = e["name"].asString();
        std::string value;
        if (e["value"].isString()) {
            value = expand_vars(e["value"].asString(), seen);
        } else if (e.isMember("valueFrom")) {
            std::string field = e["valueFrom"]["fieldRef"]["fieldPath"].asString();
            if (field == "metadata.name")
                value = pod["metadata"]["name"].asString();
            else if (field == "metadata.namespace")
                value = pod["metadata"]["namespace"].asString();
            else if (field == "metadata.uid")
                value = pod["metadata"]["uid"].asString();
            else if (field == "spec.nodeName")
                value = ctx.node_name;
            else if (field == "spec.serviceAccountName")
                value = pod["spec"]["serviceAccountName"].asString();
            else
                return invalid("container " + cp->name + ": env " + name +
                               " has a valueFrom the agent did not resolve");
        }
        seen[name] = value;
        own.push_back({name, value});
    }
    // Base first, then the container's env; a later name replaces the value in
    // place so execve never sees a name twice.
    std::vector<EnvVar> all = base;
    for (auto &e : own) {
        auto it =
            std::find_if(all.begin(), all.end(), [&](const EnvVar &x) { return x.name == e.name; });
        if (it != all.end())
            it->value = e.value;
        else
            all.push_back(e);
    }
    cp->env = std::move(all);
    return {};
}

Status parse_hooks(const Json::Value &c, const std::string &pod_ip, ContainerPlan *cp) {
    for (const char *key : {"postStart", "preStop"}) {
        const Json::Value &h = c["lifecycle"][key];
        if (h.isNull()) continue;
        std::string what = "container " + cp->name + " " + key;
        if (!h.isObject()) return invalid(what + " must be an object");
        ProbeSpec s;
        if (auto st = parse_action(h, c, what, pod_ip, true, &s); !st) return st;
        (std::string(key) == "postStart" ? cp->post_start : cp->pre_stop) = s;
    }
    return {};
}

Result<ContainerPlan> parse_container(const Json::Value &c, const Json::Value &pod, bool init,
                                      const PlanContext &ctx, const std::vector<EnvVar> &base) {
    ContainerPlan cp;
    cp.init = init;
    if (!c.isObject() || !c["name"].isString() || c["name"].asString().empty())
        return invalid("every container needs a name");
    cp.name = c["name"].asString();
    cp.image = c["image"].asString();
    std::string who = std::string(init ? "init container " : "container ") + cp.name;
    const RuntimeTemplate *t = ctx.templates ? ctx.templates->match(cp.image) : nullptr;
    const RuntimeKind kind = !t          ? RuntimeKind::Process
                             : t->podman ? RuntimeKind::Podman
                                         : RuntimeKind::Template;
    auto confine = plan_container_security(pod["spec"], c, kind, ctx, who);
    if (!confine) return confine.failure();
    cp.confine = *confine;
    if (c["volumeDevices"].isArray() && !c["volumeDevices"].empty())
        return refused(who +
                       " asks for raw block devices (volumeDevices); only the lent GPUs "
                       "are available on Slurm nodes");
    if (auto st = parse_resources(c, &cp); !st) return st.failure();
    if (kind == RuntimeKind::Podman) {
        // The image's PATH, unless the pod sets one.
        std::vector<EnvVar> image_base;
        for (const auto &e : base)
            if (e.name != "PATH") image_base.push_back(e);
        if (auto st = parse_env(c, pod, ctx, image_base, &cp); !st) return st.failure();
    } else if (auto st = parse_env(c, pod, ctx, base, &cp); !st) {
        return st.failure();
    }
    if (auto st = parse_hooks(c, pod_ip_of(pod), &cp); !st) return st.failure();
    if (!c["restartPolicy"].isNull()) {
        if (!init)
            return refused(who +
                           " sets restartPolicy, which only init containers take (Always: a "
                           "sidecar). Remove it");
        if (!c["restartPolicy"].isString() || c["restartPolicy"].asString() != "Always")
            return invalid(who + ": restartPolicy must be Always (a sidecar) or unset");
        cp.sidecar = true;
    }
    cp.working_dir = c["workingDir"].asString();
    if (c["terminationMessagePolicy"].isString())
        cp.termination_message_policy = c["terminationMessagePolicy"].asString();
    for (auto [key, dst] : {std::pair{"stdin", &cp.stdin_open},
                            std::pair{"stdinOnce", &cp.stdin_once}, std::pair{"tty", &cp.tty}}) {
        if (!c[key].isNull() && !c[key].isBool())
            return invalid(who + ": " + key + " must be true or false");
        *dst = c[key].isBool() && c[key].asBool();
    }
    for (auto [key, dst] :
         {std::pair{"startupProbe", &cp.startup}, std::pair{"readinessProbe", &cp.readiness},
          std::pair{"livenessProbe", &cp.liveness}}) {
        if (init && !cp.sidecar && !c[key].isNull())
            return invalid(who + ": init containers may not have " + key +
                           " (but sidecars, restartPolicy Always)");
        auto p = parse_probe(c, key, cp.name, pod_ip_of(pod));
        if (!p) return p.failure();
        *dst = *p;
    }

    auto command = strings_of(c["command"], who + " command");
    auto args = strings_of(c["args"], who + " args");
    if (!command) return command.failure();
    if (!args) return args.failure();
    std::map<std::string, std::string> vars;
    for (const auto &e : cp.env)
        vars[e.name] = e.value;
    std::vector<std::string> cmd;
    for (const auto &w : *command)
        cmd.push_back(expand_vars(w, vars));
    for (const auto &w : *args)
        cmd.push_back(expand_vars(w, vars));
    if (kind == RuntimeKind::Podman) {
        cp.runtime = t;
        if (cp.image.empty()) return invalid(who + " has no image");
        if (cp.image.find_first_of(" \t\n") != std::string::npos)
            return invalid(who + ": image '" + cp.image + "' is not an image reference");
        ImageRun r;
        const PodmanSettings &ps = ctx.templates->podman();
        r.podman = podman_command(ps, ctx.podman_dir, ctx.podman_run_dir, ctx.podman_store_options);
        r.tool_env = podman_environment(ctx.podman_dir, ctx.base_path);
        r.name = podman_container_name(cp.name, pod["metadata"]["name"].asString(),
                                       pod["metadata"]["namespace"].asString(),
                                       pod["metadata"]["uid"].asString());
        r.image = normalize_image(cp.image);
        for (const auto &reg : ps.insecure_registries)
            if (image_registry(r.image) == reg) r.insecure = true;
        std::string policy = c["imagePullPolicy"].asString();
        if (policy.empty()) policy = default_pull_policy(cp.image);
        if (policy != "Always" && policy != "IfNotPresent" && policy != "Never")
            return invalid(who + ": imagePullPolicy must be Always, IfNotPresent or Never, not '" +
                           policy + "'");
        r.pull_policy = policy;
        r.has_command = !command->empty();
        for (size_t i = 0; i < cmd.size(); i++)
            (i < command->size() ? r.command : r.args).push_back(cmd[i]);
        // The job's uid and gid, whatever USER the image names: no other
        // identity (no root) in the container.
        r.run_options = {"--hostname", ctx.node_name, "--user",
                         std::to_string(ctx.uid) + ":" + std::to_string(ctx.gid)};
        // What the pod asks, applied by podman inside the container; the
        // wrapper and podman themselves run unconfined (newuidmap).
        if (cp.confine.no_new_privs) r.run_options.emplace_back("--security-opt=no-new-privileges");
        if (cp.confine.drop_capabilities) r.run_options.emplace_back("--cap-drop=all");
        if (!cp.confine.seccomp_default)
            r.run_options.emplace_back("--security-opt=seccomp=unconfined");
        if (cp.confine.read_only_root)
            r.run_options.insert(r.run_options.end(), {"--read-only", "--read-only-tmpfs=false"});
        cp.confine = {};
        r.termination_message_path = c["terminationMessagePath"].isString()
                                         ? c["terminationMessagePath"].asString()
                                         : "/dev/termination-log";
        if (!r.termination_message_path.empty()) {
            if (r.termination_message_path[0] != '/' ||
                r.termination_message_path.find_first_of(":,") != std::string::npos)
                return invalid(who +
                               ": terminationMessagePath must be an absolute path without "
                               "':' or ','");
            r.termination_log = ctx.pod_dir + "/" + cp.name + "/termination-log";
        }
        r.pidfile = ctx.pod_dir + "/" + cp.name + "/pid";
        r.gpu_device = ps.gpu_device;
        r.gpu_control_devices = ps.gpu_control_devices;
        cp.image_run = std::move(r);
        cp.argv = std::move(cmd);
        if (cp.argv.empty()) cp.argv = {cp.image};
    } else if (t) {
        cp.runtime = t;
        cp.argv = std::move(cmd);  // expanded through t once the mounts are known
    } else if (command->empty()) {
        return refused(who +
                       " has no command: this node runs containers as processes and "
                       "cannot take the entrypoint from image '" +
                       cp.image +
                       "'. Set command (and args), or ask the admins for a runtime "
                       "template for this image");
    } else {
        cp.argv = std::move(cmd);
    }
    return cp;
}

Status parse_volumes(const Json::Value &spec, const proto::PodFiles &files,
                     const proto::HostVolumes &host, PodPlan *plan) {
    std::set<std::string> seen;
    for (const auto &v : spec["volumes"]) {
        VolumePlan vp;
        vp.name = v["name"].asString();
        if (vp.name.empty()) return invalid("every volume needs a name");
        // As the API server validates it: the name is a directory under the
        // pod's dir and part of an environment variable's name.
        if (!k8s::is_dns1123_label(vp.name))
            return invalid("volume name '" + vp.name +
                           "' must be a DNS label (lowercase letters, digits, '-')");
        if (!seen.insert(vp.name).second)
            return invalid("volume name '" + vp.name + "' is used twice");
        if (v.isMember("hostPath") || v.isMember("persistentVolumeClaim")) {
            // The agent decided (agent/controllers/host_volumes.h); what it
            // did not pass, it did not allow.
            auto h = host.find(vp.name);
            if (h == host.end())
                return refused("volume " + vp.name + " is a " +
                               (v.isMember("hostPath") ? "hostPath" : "persistentVolumeClaim") +
                               " volume the node agent did not resolve; pods on this node may "
                               "mount node paths only under the agent's volume_roots");
            auto clean = clean_absolute_path(h->second.path);
            if (!clean || *clean != h->second.path || !path_within(*clean, h->second.root))
                return invalid("volume " + vp.name + ": node path '" + h->second.path +
                               "' is not a clean path under '" + h->second.root + "'");
            vp.kind = VolumeKind::Host;
            vp.host = h->second;
        } else if (v.isMember("emptyDir")) {
            vp.kind = VolumeKind::EmptyDir;
        } else if (v.isMember("configMap") || v.isMember("secret") || v.isMember("projected") ||
                   v.isMember("downwardAPI")) {
            vp.kind = VolumeKind::Files;
            auto f = files.find(vp.name);
            if (f != files.end()) {
                for (const auto &[rel, data] : f->second) {
                    if (rel.empty() || rel[0] == '/' || rel.find("..") != std::string::npos)
                        return invalid("volume " + vp.name + ": file path '" + rel +
                                       "' must be relative and stay inside the volume");
                    vp.files[rel] = data;
                }
            }
        } else {
            return refused(
                "volume " + vp.name +
                " has a type this node does not support; Slurm "
                "nodes support emptyDir, configMap, secret, projected, downwardAPI, hostPath and "
                "persistentVolumeClaim (node paths under the agent's volume_roots)");
        }
        plan->volumes.push_back(std::move(vp));
    }
    return {};
}

// A mountPath as the container sees it (k8s-shim/mount_ns.h): absolute, no
// "..", repeated or trailing '/' and "." dropped.
Result<std::string> normalise_mount_path(const std::string &cname, const Json::Value &m) {
    std::string in = m["mountPath"].asString(), out;
    if (in.empty() || in[0] != '/')
        return invalid("container " + cname + ": mountPath '" + in + "' must be an absolute path");
    size_t i = 0;
    while (i < in.size()) {
        size_t j = std::min(in.find('/', i), in.size());
        std::string part = in.substr(i, j - i);
        if (part == "..")
            return invalid("container " + cname + ": mountPath '" + in + "' must not contain '..'");
        if (!part.empty() && part != ".") out += "/" + part;
        i = j + 1;
    }
    if (out.empty())
        return invalid("container " + cname + ": mountPath '" + in + "' must not be '/'");
    // The kernel's views of the container's own processes and of the node:
    // a volume there would hide them from the container (runc refuses these
    // too). /dev is the node's, and /dev/shm a usual mountPath, so it stays.
    for (const char *k : {"/proc", "/sys"})
        if (out == k || out.rfind(std::string(k) + "/", 0) == 0)
            return invalid("container " + cname + ": mountPath '" + in + "' is in " + k +
                           ", which the kernel provides; mount the volume elsewhere");
    return out;
}

// subPath, or subPathExpr with the container's $(VAR)s expanded, as the API
// server validates it: relative, no ".." component. "" when neither is set.
Result<std::string> sub_path_of(const std::string &cname, const Json::Value &m,
                                const std::vector<EnvVar> &env) {
    bool expr = m.isMember("subPathExpr");
    if (expr && m.isMember("subPath"))
        return invalid("container " + cname + ": a volumeMount has both subPath and subPathExpr");
    std::string in;
    if (expr) {
        std::map<std::string, std::string> vars;
        for (const auto &e : env)
            vars[e.name] = e.value;
        in = expand_vars(m["subPathExpr"].asString(), vars);
    } else {
        in = m["subPath"].asString();
    }
    std::string out;
    if (!in.empty() && in[0] == '/')
        return invalid("container " + cname + ": subPath '" + in + "' must be a relative path");
    for (size_t i = 0; i < in.size();) {
        size_t j = std::min(in.find('/', i), in.size());
        std::string part = in.substr(i, j - i);
        if (part == "..")
            return invalid("container " + cname + ": subPath '" + in + "' must not contain '..'");
        if (!part.empty() && part != ".") out += (out.empty() ? "" : "/") + part;
        i = j + 1;
    }
    return out;
}

// Each container has its own mount namespace: two containers may put
// different volumes at one mountPath, and one container one volume per path.
Status parse_mounts(const Json::Value &c, const PlanContext &ctx, PodPlan *plan,
                    ContainerPlan *cp) {
    const std::string &cname = cp->name;
    std::set<std::string> paths;
    for (const auto &m : c["volumeMounts"]) {
        auto path = normalise_mount_path(cname, m);
        if (!path) return path.failure();
        if (!paths.insert(*path).second)
            return invalid("container " + cname + " mounts two volumes at " + *path);
        auto sub = sub_path_of(cname, m, cp->env);
        if (!sub) return sub.failure();
        VolumeMount vm{m["name"].asString(), *path, is_true(m, "readOnly"), *sub};
        auto vol = std::find_if(plan->volumes.begin(), plan->volumes.end(),
                                [&](const VolumePlan &v) { return v.name == vm.volume; });
        if (vol == plan->volumes.end())
            return invalid("container " + cname + " mounts volume " + vm.volume +
                           ", which the pod does not define");
        if (auto st = check_volume_mount(m, "container " + cname + "'s volumeMount " + vm.volume);
            !st)
            return st;
        bool host = vol->kind == VolumeKind::Host;
        std::string source = host ? vol->host.path : volume_dir(ctx.pod_dir, vm.volume);
        if (!vm.sub_path.empty()) source += (source == "/" ? "" : "/") + vm.sub_path;
        // configMap, secret, projected and downwardAPI volumes are read-only,
        // as a kubelet mounts them; a node path as the agent says.
        cp->binds.push_back(
            {source, vm.mount_path,
             vm.read_only || vol->kind == VolumeKind::Files || (host && vol->host.read_only),
             !host || !vm.sub_path.empty()});
        plan->mounts[cname].push_back(vm);
    }
    return {};
}

std::vector<EnvVar> base_env(const Json::Value &pod, const PlanContext &ctx) {
    return {
        {"PATH", ctx.base_path},
        {"HOSTNAME", ctx.own_network ? k8s::pod_hostname(pod["spec"]["hostname"].isString()
                                                             ? pod["spec"]["hostname"].asString()
                                                             : "",
                                                         pod["metadata"]["name"].asString())
                                     : ctx.node_name},
        {"SLURM_K8S_POD_NAME", pod["metadata"]["name"].asString()},
        {"SLURM_K8S_POD_NAMESPACE", pod["metadata"]["namespace"].asString()},
        {"SLURM_K8S_POD_UID", pod["metadata"]["uid"].asString()},
        {"SLURM_K8S_POD_DIR", ctx.pod_dir},
    };
}

void set_env(std::vector<EnvVar> *env, const std::string &name, const std::string &value) {
    for (auto &e : *env)
        if (e.name == name) {
            e.value = value;
            return;
        }
    env->push_back({name, value});
}

}  // namespace

std::string expand_vars(const std::string &in, const std::map<std::string, std::string> &vars) {
    std::string out;
    size_t i = 0;
    while (i < in.size()) {
        if (in[i] != '$' || i + 1 >= in.size()) {
            out += in[i++];
            continue;
        }
        char next = in[i + 1];
        if (next == '$') {  // escape
            out += '$';
            i += 2;
        } else if (next == '(') {
            size_t close = in.find(')', i + 2);
            if (close == std::string::npos) {  // unclosed: the rest is literal
                out += in.substr(i);
                break;
            }
            std::string name = in.substr(i + 2, close - i - 2);
            auto it = vars.find(name);
            out += it != vars.end() ? it->second : "$(" + name + ")";
            i = close + 1;
        } else {
            out += '$';
            out += next;
            i += 2;
        }
    }
    return out;
}

std::string volume_dir(const std::string &pod_dir, const std::string &volume) {
    return pod_dir + "/volumes/" + volume;
}

std::string mount_scratch_dir(const std::string &pod_dir) {
    return pod_dir + "/mnt";
}

std::string volume_env_name(const std::string &volume) {
    std::string n = "SLURM_K8S_VOLUME_";
    for (char c : volume)
        n += (c == '-' || c == '.') ? '_' : static_cast<char>(toupper(c));
    return n;
}

int PodPlan::gpus_needed() const {
    int sum = 0, init_max = 0, sidecars = 0;
    for (const auto &c : containers)
        sum += c.gpus;
    for (const auto &c : init_containers)
        if (c.sidecar)
            sidecars += c.gpus;
        else
            init_max = std::max(init_max, c.gpus);
    return sidecars + std::max(sum, init_max);
}

std::string pod_ip_of(const Json::Value &pod) {
    if (!pod.isObject() || !pod["status"].isObject() || !pod["status"]["podIP"].isString())
        return "127.0.0.1";
    const Json::Value &ip = pod["status"]["podIP"];
    std::string s = ip.asString();
    unsigned char buf[sizeof(in6_addr)];
    if (inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1)
        return s;
    return "127.0.0.1";
}

namespace {

// plan_pod without the guard below.
Result<PodPlan> plan_pod_unguarded(const Json::Value &pod, const proto::PodFiles &files,
                                   const PlanContext &ctx, const proto::HostVolumes &host) {
    if (!pod.isObject() || !pod["metadata"].isObject() || !pod["spec"].isObject())
        return invalid("pod must be an object with metadata and spec");
    PodPlan plan;
    plan.uid = pod["metadata"]["uid"].asString();
    plan.ns = pod["metadata"]["namespace"].asString();
    plan.name = pod["metadata"]["name"].asString();
    if (plan.uid.empty() || plan.name.empty()) return invalid("pod metadata needs uid and name");
    const Json::Value &spec = pod["spec"];
    if (auto st = check_pod_fields(spec, ctx); !st) return st.failure();

    std::string rp = spec["restartPolicy"].isString() ? spec["restartPolicy"].asString() : "Always";
    if (rp == "Always")
        plan.restart_policy = RestartPolicy::Always;
    else if (rp == "OnFailure")
        plan.restart_policy = RestartPolicy::OnFailure;
    else if (rp == "Never")
        plan.restart_policy = RestartPolicy::Never;
    else
        return invalid("restartPolicy must be Always, OnFailure or Never, not '" + rp + "'");
    if (spec["terminationGracePeriodSeconds"].isIntegral())
        plan.grace_s = std::max<int64_t>(0, spec["terminationGracePeriodSeconds"].asInt64());
    if (!spec["activeDeadlineSeconds"].isNull()) {
        const Json::Value &d = spec["activeDeadlineSeconds"];
        if (!d.isIntegral() || d.asInt64() <= 0)
            return invalid("activeDeadlineSeconds must be a positive integer");
        plan.active_deadline_s = d.asInt64();
    }

    if (auto st = parse_volumes(spec, files, host, &plan); !st) return st.failure();
    auto base = base_env(pod, ctx);
    for (const auto &v : plan.volumes)
        set_env(&base, volume_env_name(v.name),
                v.kind == VolumeKind::Host ? v.host.path : volume_dir(ctx.pod_dir, v.name));
    if (!spec["containers"].isArray() || spec["containers"].empty())
        return invalid("the pod has no containers");
    std::set<std::string> names;
    for (auto [key, init] : {std::pair{"initContainers", true}, std::pair{"containers", false}}) {
        for (const auto &c : spec[key]) {
            auto cp = parse_container(c, pod, init, ctx, base);
            if (!cp) return cp.failure();
            if (!names.insert(cp->name).second)
                return invalid("container name " + cp->name + " is used twice");
            if (auto st = parse_mounts(c, ctx, &plan, &*cp); !st) return st.failure();
            if (cp->image_run)
                for (const auto &b : cp->binds) {
                    if (b.target.find_first_of(":,") != std::string::npos)
                        return refused("container " + cp->name + " mounts at '" + b.target +
                                       "': podman cannot mount at a path holding ':' or ','");
                    if (b.source.find_first_of(":,") != std::string::npos)
                        return refused("container " + cp->name + " mounts '" + b.source +
                                       "': podman cannot mount a path holding ':' or ','");
                }
            if (cp->runtime && !cp->image_run)
                cp->argv = RuntimeTemplates::expand(*cp->runtime, cp->image, cp->name, cp->argv,
                                                    cp->binds, &cp->cdi_slots);
            (init ? plan.init_containers : plan.containers).push_back(std::move(*cp));
        }
    }
    assign_gpus(&plan, {});
    return plan;
}

}  // namespace

Result<PodPlan> plan_pod(const Json::Value &pod, const proto::PodFiles &files,
                         const PlanContext &ctx, const proto::HostVolumes &host) {
    // jsoncpp's accessors throw on a field of the wrong JSON type (a string
    // where an object is expected: c["x"]["y"], .asString() of an array).
    // The checks above cover the fields they use, but not every nesting; the
    // shim calls this from a noexcept libuv callback, so a wrong type must
    // become an Invalid spec here instead of terminating every pod.
    try {
        return plan_pod_unguarded(pod, files, ctx, host);
    } catch (const Json::Exception &e) {
        return invalid(std::string("malformed pod spec (a field has the wrong JSON type): ") +
                       e.what());
    }
}

void set_pull_auth(PodPlan *plan, const std::string &auth, const std::string &pod_dir) {
    plan->pull_auth = auth;
    for (auto *list : {&plan->init_containers, &plan->containers})
        for (auto &c : *list)
            if (c.image_run) {
                c.image_run->authfile = auth.empty() ? "" : pull_auth_path(pod_dir);
                c.image_run->credential = auth;
            }
}

void set_pod_network(PodPlan *plan, const std::string &net_ns, const std::string &uts_ns) {
    for (auto *list : {&plan->init_containers, &plan->containers})
        for (auto &c : *list) {
            c.net_ns = net_ns;
            c.uts_ns = uts_ns;
        }
}

void assign_gpus(PodPlan *plan, const std::vector<int> &indices,
                 const std::vector<int> &cuda_pool) {
    auto set = [&cuda_pool](ContainerPlan *c, const std::vector<int> &idx) {
        c->gpu_indices = idx;
        std::string list = idx.empty() ? "" : format_index_list(idx);
        // NVIDIA's container toolkit reads "void" as "no GPU"; CUDA reads an
        // empty CUDA_VISIBLE_DEVICES as "no device". An image container has
        // only its own GPUs' device nodes, which CUDA numbers from 0 (as
        // under Slurm's ConstrainDevices): 0..n-1 there, the node's indices
        // in NVIDIA_VISIBLE_DEVICES.
        std::string cuda = list;
        if (c->image_run && !idx.empty()) {
            std::vector<int> own(idx.size());
            for (size_t i = 0; i < own.size(); i++)
                own[i] = static_cast<int>(i);
            cuda = format_index_list(own);
        } else if (!cuda_pool.empty() && !idx.empty()) {
            std::vector<int> place;
            for (int g : idx) {
                auto at = std::find(cuda_pool.begin(), cuda_pool.end(), g);
                place.push_back(at == cuda_pool.end() ? g
                                                      : static_cast<int>(at - cuda_pool.begin()));
            }
            cuda = format_index_list(place);
        }
        set_env(&c->env, "CUDA_VISIBLE_DEVICES", cuda);
        set_env(&c->env, "NVIDIA_VISIBLE_DEVICES", idx.empty() ? "void" : list);
    };
    size_t next = 0;
    auto take = [&indices, &next](int n) {
        std::vector<int> mine;
        for (int i = 0; i < n && next < indices.size(); i++)
            mine.push_back(indices[next++]);
        return mine;
    };
    for (auto &c : plan->init_containers)
        if (c.sidecar) set(&c, take(c.gpus));
    const size_t app_first = next;
    for (auto &c : plan->containers)
        set(&c, take(c.gpus));
    for (auto &c : plan->init_containers) {
        if (c.sidecar) continue;
        std::vector<int> mine;
        for (size_t i = app_first;
             i < app_first + static_cast<size_t>(c.gpus) && i < indices.size(); i++)
            mine.push_back(indices[i]);
        set(&c, mine);
    }
}

std::vector<std::string> other_gpu_devices(const std::string &pattern,
                                           const std::vector<int> &own) {
    std::vector<std::string> out;
    size_t at = pattern.find("{index}");
    size_t slash = pattern.rfind('/', at);
    if (at == std::string::npos || slash == std::string::npos ||
        pattern.find('/', at) != std::string::npos)
        return out;  // the index must be in the file name
    std::string dir = slash == 0 ? "/" : pattern.substr(0, slash);
    std::string prefix = pattern.substr(slash + 1, at - slash - 1), suffix = pattern.substr(at + 7);
    DIR *d = opendir(dir.c_str());
    if (!d) return out;
    while (const struct dirent *e = readdir(d)) {
        std::string name = e->d_name;
        if (name.size() <= prefix.size() + suffix.size() ||
            name.compare(0, prefix.size(), prefix) != 0 ||
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        std::string digits =
            name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
        if (digits.size() > 4 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
        int index = std::stoi(digits);
        if (std::find(own.begin(), own.end(), index) == own.end())
            out.push_back((dir == "/" ? "" : dir) + "/" + name);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

void hide_other_gpus(PodPlan *plan, const std::string &pattern) {
    for (auto *list : {&plan->init_containers, &plan->containers})
        for (auto &c : *list)
            if (!c.runtime && !c.image_run)
                c.hidden_devices = other_gpu_devices(pattern, c.gpu_indices);
}

}  // namespace sk::shim
