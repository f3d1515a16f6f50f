// Pod spec -> process plan. Pure: no I/O, no libuv. The shim turns a
// Kubernetes Pod object (as the agent sends it in pod_run, every env valueFrom
// already resolved) into what it will execute: argv, environment in order,
// working directory, probes, hooks, GPU counts, volumes. Everything the shim
// refuses (security policy, missing command, unsupported fields) is decided
// here, with a message a user understands (Error::Refused), so the refusal
// reaches the Pod's status unchanged.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/daemons/shim_protocol.h"
#include "common/result.h"
#include "k8s-shim/mount_ns.h"
#include "k8s-shim/podman.h"
#include "k8s-shim/runtime_template.h"

namespace sk::shim {

struct EnvVar {
    std::string name, value;
    bool operator==(const EnvVar &o) const { return name == o.name && value == o.value; }
};

// How a container's processes (its command, exec probes and hooks) are
// confined before exec (k8s-shim/confine.h does it; the table of what decides
// it is k8s-shim/pod_security.h). Default-constructed: nothing is applied.
struct Confinement {
    bool no_new_privs = false;       // prctl(PR_SET_NO_NEW_PRIVS)
    bool drop_capabilities = false;  // every capability set emptied, ambient cleared
    bool seccomp_default = false;    // the RuntimeDefault filter (implies no_new_privs)
    // readOnlyRootFilesystem: the image's root mounted read-only (podman
    // --read-only, without its tmpfs on /tmp and /run, as a kubelet's
    // runtime does); a process container has no root of its own (refused).
    bool read_only_root = false;
    bool any() const { return no_new_privs || drop_capabilities || seccomp_default; }
    bool operator==(const Confinement &o) const {
        return no_new_privs == o.no_new_privs && drop_capabilities == o.drop_capabilities &&
               seccomp_default == o.seccomp_default && read_only_root == o.read_only_root;
    }
};

// A probe's or a lifecycle hook's action (the kubelet's handlers): Grpc
// for probes only, Sleep for hooks only.
enum class ProbeAction { Exec, HttpGet, TcpSocket, Grpc, Sleep };

struct ProbeSpec {
    ProbeAction action = ProbeAction::Exec;
    std::vector<std::string> exec;  // Exec
    // HttpGet, TcpSocket, Grpc: the probe's host, else the pod's IP (as a
    // kubelet dials; pods share the node's network, so it is the node's
    // InternalIP, which the agent writes into the pod's status.podIP:
    // pod_ip_of).
    std::string host = "127.0.0.1";
    int port = 0;
    std::string path = "/";                                    // HttpGet
    std::vector<std::pair<std::string, std::string>> headers;  // HttpGet
    bool https = false;        // HttpGet scheme HTTPS: TLS, the certificate not checked
    std::string grpc_service;  // Grpc: the service of grpc.health.v1.Health/Check ("": the server)
    int sleep_s = 0;           // Sleep
    int initial_delay_s = 0, period_s = 10, timeout_s = 1;
    int success_threshold = 1, failure_threshold = 3;
};

struct ContainerPlan {
    std::string name, image;
    bool init = false;
    // A native sidecar: an init container of restartPolicy Always. It starts
    // in its place among the init containers, the next one once it started
    // (its startupProbe passed, or its postStart, or it runs), runs beside
    // the app containers and restarts whatever the pod's policy; it stops
    // after them, in reverse order (k8s-shim/pod_runner.h).
    bool sidecar = false;
    std::vector<std::string> argv;  // what runs: command+args, through the runtime template
    std::vector<EnvVar> env;        // final order, no duplicate names
    std::string working_dir;        // empty: the pod directory
    std::optional<ProbeSpec> startup, readiness, liveness;
    // lifecycle.postStart and preStop (exec, httpGet, sleep): a hook's
    // timeout is its pod's grace period, as a kubelet's.
    std::optional<ProbeSpec> post_start, pre_stop;
    int gpus = 0;                  // nvidia.com/gpu limit
    std::vector<int> gpu_indices;  // filled by assign_gpus()
    // Its supervisors' request to enter the pod's cgroup (SpawnSpec), set by
    // the shim when the agent places pods in cgroups of their own.
    std::string cgroup_request;
    std::string cgroup_pod_uid;  // the pod whose cgroup that is ("" = none)
    uint32_t cgroup_job_id = 0;  // in this Slurm job
    std::map<std::string, std::string> requests, limits;  // recorded as given
    std::string termination_message_policy = "File";
    // spec.stdin: the container's stdin is a pipe the shim holds, written by
    // attached sessions (k8s-shim/attach_session.h); otherwise /dev/null.
    // spec.stdinOnce: the first attached session's end of input closes it.
    bool stdin_open = false, stdin_once = false;
    // spec.tty: its stdin, stdout and stderr a terminal the shim holds (its
    // output one stream, logged as stdout, as a kubelet's runtime does);
    // attached sessions size it.
    bool tty = false;
    Confinement confine;  // from the securityContexts (k8s-shim/pod_security.h)
    // Its volumeMounts: the volume's directory (or subPath in it) at the
    // mountPath, in a mount namespace of its own (k8s-shim/mount_ns.h).
    std::vector<BindMount> binds;
    // The pod's own network and UTS namespaces (set_pod_network), which the
    // container joins; both "" = the node's network.
    std::string net_ns, uts_ns;
    // The node's GPU device nodes that are not the container's (process
    // runtime: other_gpu_devices), left out of its mount namespace's view.
    std::vector<std::string> hidden_devices;
    // The runtime template the container runs through (k8s-shim/runtime_template.h),
    // null for the process runtime; argv is expanded once its mounts are known.
    const RuntimeTemplate *runtime = nullptr;
    // Where its template's {cdi:FLAG} words were in argv (position, FLAG):
    // filled with its GPUs' CDI names once they are known (pod_prepare).
    std::vector<std::pair<size_t, std::string>> cdi_slots;
    // Set when the image runs through the podman runtime (k8s-shim/podman.h);
    // argv is then command+args, for messages only.
    std::optional<ImageRun> image_run;
    // Whether the shim makes the mounts (mount_ns.h): it has binds and no
    // template that passes them to its runtime ({mounts:FLAG}), which then
    // mounts them itself.
    bool own_mounts() const {
        return (!binds.empty() || !hidden_devices.empty()) &&
               !(runtime && RuntimeTemplates::passes_mounts(*runtime));
    }
};

enum class RestartPolicy { Always, OnFailure, Never };

// Files: configMap, secret, projected, downwardAPI; Host: a node path
// (hostPath, or the PersistentVolume a claim is bound to), as the agent
// allowed it (proto::HostVolume).
enum class VolumeKind { EmptyDir, Files, Host };

struct VolumePlan {
    std::string name;
    VolumeKind kind = VolumeKind::EmptyDir;
    std::map<std::string, std::string> files;  // relative path -> content (decoded)
    proto::HostVolume host;                    // Host
};

struct VolumeMount {
    std::string volume, mount_path;
    bool read_only = false;
    std::string sub_path;  // relative, no "..": subPath, or subPathExpr expanded
};

struct PodPlan {
    std::string uid, ns, name;
    RestartPolicy restart_policy = RestartPolicy::Always;
    int64_t grace_s = 30;
    // spec.activeDeadlineSeconds (0: none): how long the pod may be active
    // from its start before it is stopped and Failed (DeadlineExceeded).
    // Wall time, as the user's contract (not scaled in tests).
    int64_t active_deadline_s = 0;
    std::vector<ContainerPlan> init_containers, containers;
    std::vector<VolumePlan> volumes;
    std::map<std::string, std::vector<VolumeMount>> mounts;  // container name -> mounts
    // The pod's pull credentials (common/daemons/shim_protocol.h PodRun::pull_auth),
    // written to pull_auth_path() before the first pull; "" when none.
    std::string pull_auth;
    // "ns/name" for log prefixes, "name_ns(uid)" as the kubelet prints pods.
    std::string key() const { return ns + "/" + name; }
    std::string kubelet_name() const { return name + "_" + ns + "(" + uid + ")"; }
    // The sidecars' GPUs plus the app containers' sum, or the largest
    // regular init container's if more (it runs before them).
    int gpus_needed() const;
};

// What the plan needs to know about the job and the node.
struct PlanContext {
    uint32_t uid = 0, gid = 0;     // the job's user: the only identity pods may run as
    std::vector<uint32_t> groups;  // the job's supplementary groups (getgroups)
    std::string node_name;         // virtual node (HOSTNAME, spec.nodeName)
    std::string pod_dir;           // <state_dir>/pods/<uid>: emptyDir and volume files
    std::string base_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    const RuntimeTemplates *templates = nullptr;    // may be null: process runtime only
    std::string podman_dir;                         // podman_dir(state_dir), k8s-shim/podman.h
    std::string podman_run_dir;                     // common/daemons/log_paths.h podman_run_dir
    std::vector<std::string> podman_store_options;  // k8s-shim/podman.h podman_store_options
    // The pod has a network of its own (pod_run's network): its hostname
    // is its own (spec.hostname and subdomain honoured, HOSTNAME), not the
    // node's.
    bool own_network = false;
};

// Kubernetes' $(VAR) expansion (k8s.io/kubernetes third_party expansion):
// $(NAME) -> value when NAME is known, kept literally otherwise; $$ -> $;
// an unclosed $( and a lone $ are kept.
std::string expand_vars(const std::string &in, const std::map<std::string, std::string> &vars);

// Gives the plan the pod's pull credentials: the podman runtime's pulls
// then pass them (--authfile).
void set_pull_auth(PodPlan *plan, const std::string &auth, const std::string &pod_dir);
// Puts every container of the plan in the pod's own network and UTS
// namespaces (common/daemons/shim_protocol.h PodRun::net_ns, uts_ns).
void set_pod_network(PodPlan *plan, const std::string &net_ns, const std::string &uts_ns);

// The address probes dial when they name no host: the pod's status.podIP
// when it is an IPv4 or IPv6 address (the agent sets it to the node's
// InternalIP before pod_run), else 127.0.0.1.
std::string pod_ip_of(const Json::Value &pod);

// pod: the Pod object; files: the pod_run body's files, decoded
// (common/daemons/shim_protocol.h). Fails with Refused (policy, no command) or
// Invalid (malformed spec, a file path leaving its volume).
// host: pod_run's host_volumes; a hostPath or persistentVolumeClaim volume
// not in it is refused (the agent did not allow it), one whose path is not
// under its root is Invalid.
Result<PodPlan> plan_pod(const Json::Value &pod, const proto::PodFiles &files,
                         const PlanContext &ctx, const proto::HostVolumes &host = {});

// Spreads `indices` (gpus_needed() of them) over the containers: each
// sidecar its own slice first, then each app container its own; regular init
// containers reuse the app containers' (they run before them). Sets
// CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES in every container (empty/"void" for containers
// without GPUs, so a process never sees GPUs it was not given). NVIDIA_VISIBLE_DEVICES names the
// node's indices; CUDA_VISIBLE_DEVICES numbers them as CUDA does where the container runs: an image
// container's from 0 (it has its own device nodes only), a process container's by their place in
// `cuda_pool` (sorted: the GPUs its devices cgroup lets it open, spank/device_cgroup.h) or, with an
// empty pool, the node's indices.
void assign_gpus(PodPlan *plan, const std::vector<int> &indices,
                 const std::vector<int> &cuda_pool = {});

// The device nodes of the node's GPUs that a container given `own` must not
// see: the entries of the directory of `pattern` (runtime.conf gpu_device,
// "/dev/nvidia{index}") that match it with another index. Read from the
// node when the pod starts.
std::vector<std::string> other_gpu_devices(const std::string &pattern, const std::vector<int> &own);
// Sets hidden_devices of each container of the process runtime (no
// template, no image) to other_gpu_devices(pattern, its GPUs).
void hide_other_gpus(PodPlan *plan, const std::string &pattern);

// The directory a volume's files live in, and the variable exported for it:
// SLURM_K8S_VOLUME_<NAME> (upper case, '-' and '.' -> '_'). A Host volume's
// is its node path (VolumePlan::host.path), exported the same way.
std::string volume_dir(const std::string &pod_dir, const std::string &volume);
std::string volume_env_name(const std::string &volume);
// The empty directory the containers' exec helpers build their mounts on
// (k8s-shim/mount_ns.h): <pod_dir>/mnt.
std::string mount_scratch_dir(const std::string &pod_dir);

}  // namespace sk::shim
