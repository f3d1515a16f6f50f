// The agent <-> shim protocol: what travels on a shim's connection to the
// agent socket after a successful "attach" (common/daemons/protocol.h defines the
// envelope, the framing and attach itself; docs/protocol.md describes both).
//
//   agent -> shim requests, each answered by a Reply with the same id:
//     pod_run   {"pod": Pod, "files": {volume: {relpath: base64}}}  -> {}
//     pod_kill  {"uid", "grace_s", "reason"}                          -> {}
//     pod_list  {}                                     -> {"pods": [PodStatus...]}
//     shutdown  {"grace_s", "reason"}   -> {} once every pod has stopped
//     exec_start {"session", "uid", "container", "command", "stdin", "stdout",
//                 "stderr", "tty"}  -> {} once the command runs (kubectl exec)
//     attach_start {"session", "uid", "container", "stdin", "stdout", "stderr",
//                   "tty"}  -> {} once attached to the container (kubectl attach)
//     pod_stats {}  -> {"node": NodeStats, "pods": [PodStats...]} (kubectl top)
//     pods_pause {"pause", "message"}  -> {} once every pod's processes are
//                 stopped (pause) or running again (the Slurm job suspended,
//                 resumed)
//   shim -> agent, first line of an exec or attach session's own data connection:
//     exec_attach {"session"} -> {}, then frames (common/daemons/exec_frames.h)
//   shim -> agent notification, answered ok (or an error naming the field):
//     pod_status {"uid", "namespace", "name", "status": PodStatus, "events": [...]}
//   shim -> agent request, answered once done (attach's reply named an
//   image_store):
//     image_pull {"image"}  -> {} once the node's image store holds the image
//                 (pulled without credentials), or an error with the pull's
//                 message
//     image_pull_cancel {"id"}  -> {}: the shim no longer waits for that
//                 image_pull (its pod stopped); it gets no answer to it
//
// Decoders are strict: a field of the wrong type, a missing required field,
// an unknown enum value or a value over its bound fails with Parse (a message
// naming the message and the field), never throws, whatever the JSON.
// pod_run failures are Invalid, as the shim's refusal of a pod always was.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <json/json.h>

#include "common/result.h"

namespace sk::proto {

// ---- bounds (each enforced by its decoder) ----
constexpr size_t kMaxUidBytes = 128;         // metadata.uid (Kubernetes writes 36)
constexpr size_t kMaxObjectNameBytes = 253;  // metadata.name, namespace, container
constexpr size_t kMaxVolumes = 256;          // volumes with files in one pod_run
constexpr size_t kMaxFilesPerVolume = 4096;  // files in one volume
constexpr size_t kMaxFilePathBytes = 4096;   // a file's path inside its volume
constexpr uint32_t kMaxGraceSeconds = 86400;
constexpr size_t kMaxEvents = 256;              // events in one pod_status
constexpr size_t kMaxEventReasonBytes = 128;    // an event's reason (refused beyond)
constexpr size_t kMaxEventMessageBytes = 1024;  // an event's message (cut beyond)
// The link's bound after attach, both directions, instead of the socket's
// kMaxMessageBytes: a pod as the API server accepts it (a request of up to
// 3 MiB) resolved, with the data of the ConfigMaps and Secrets it uses (up
// to 1 MiB each, base64 on the wire) must fit. The agent refuses a pod whose
// pod_run request would exceed kMaxPodRunBytes, on that pod's status
// (agent/shim_runtime.cc), so no pod_run reaches the bound; a line over
// kMaxShimMessageBytes that arrives anyway is dropped by the receiver, which
// stays attached (common/wire.h: LineBuffer), and the shim replies to a
// request whose reply would exceed it with TooLarge. Everything else is
// bounded by these per line.
constexpr size_t kMaxPodRunBytes = size_t{16} << 20;
constexpr size_t kMaxSessionBytes = 64;            // an exec session's id: [A-Za-z0-9-]
constexpr size_t kMaxExecWords = 1024;             // exec_start "command"
constexpr size_t kMaxExecCommandBytes = 64 << 10;  // its words together
constexpr size_t kMaxShimMessageBytes = size_t{32} << 20;
constexpr size_t kMaxStatsPods = 1024;       // pods in one pod_stats reply
constexpr size_t kMaxStatsContainers = 256;  // containers of one pod in it

// ---- enums carried as strings ----

// The operations on an attached shim's connection.
enum class ShimOp {
    PodRun,
    PodKill,
    PodList,
    Shutdown,
    PodStatus,
    ExecStart,
    ExecAttach,
    AttachStart,
    PodStats,
    PodsPause,
    PodFiles,
    ImagePull,
    ImagePullCancel,
    PodSandbox,
};

// Why pods stop (pod_kill and shutdown "reason"). The shim logs it and
// forgets a pod once it has stopped when the reason says the pod is gone
// from the API (Deleted, Orphaned). The drain reasons are the deregister
// reasons (common/daemons/protocol.h) the agent passes on.
enum class StopReason {
    Killing,       // graceful delete of the pod in the API
    Deleted,       // the pod is gone from the API
    Orphaned,      // the shim runs a pod the API does not know
    JobEnded,      // drain: the Slurm job ended (Slurm did not say how)
    JobCancelled,  // drain: scancel
    TimeLimit,     // drain: the job's time limit
    NodeFail,      // drain: Slurm declared the node failed
    JobCompleted,  // drain: the batch script (or salloc's command) ended with 0
    JobFailed,     // drain: it ended non-zero (or out of memory)
    Preempted,     // drain: a job of higher priority took the nodes
    Requeued,      // drain: scontrol requeue / --requeue: the job runs again later
    Shutdown,      // the shim's default when a shutdown names no reason
};

enum class EventType { Normal, Warning };

// Where the node-level figure comes from.
enum class StatsSource {
    Cgroup,  // the job's Slurm cgroup on this host (what the job uses here)
    Pods,    // the sum of the pods' figures (no readable job cgroup)
};

std::string_view to_string(ShimOp op) noexcept;
std::string_view to_string(StopReason r) noexcept;
std::string_view to_string(EventType t) noexcept;
std::string_view to_string(StatsSource s) noexcept;
// Unknown names fail with Parse, naming `field` and the accepted values.
Result<ShimOp> shim_op_from_string(std::string_view s, std::string_view field);
Result<StopReason> stop_reason_from_string(std::string_view s, std::string_view field);
Result<EventType> event_type_from_string(std::string_view s, std::string_view field);
// True for the reasons deregister accepts (JobEnded ... NodeFail).
bool is_drain_reason(StopReason r) noexcept;

// ---- agent -> shim ----

// volume name -> path inside the volume -> the file's bytes (decoded).
using PodFiles = std::map<std::string, std::map<std::string, std::string>>;

// A hostPath or persistentVolumeClaim volume as the agent resolved and
// allowed it (agent/controllers/host_volumes.h): `path` on the node, under
// `root` (one of agent.conf volume_roots); `type` the hostPath type the
// kubelet checks ("" = none, "Directory", "DirectoryOrCreate", "File",
// "FileOrCreate", "Socket", "CharDevice", "BlockDevice"); read_only: every
// mount of it is read-only (the claim's readOnly, a ReadOnlyMany-only PV).
// The shim mounts it as the job's user, after checking that the path,
// symbolic links resolved, is still under `root`.
struct HostVolume {
    std::string path, root, type;
    bool read_only = false;
    bool operator==(const HostVolume &o) const {
        return path == o.path && root == o.root && type == o.type && read_only == o.read_only;
    }
};
using HostVolumes = std::map<std::string, HostVolume>;  // volume name -> where

struct PodRun {
    Json::Value pod{Json::objectValue};  // the resolved Pod (agent/controllers/env_resolver.h)
    std::string uid, ns, name;           // pod.metadata; uid required, ns/name may be ""
    PodFiles files;                      // base64 on the wire
    // Its hostPath and persistentVolumeClaim volumes; the shim refuses one
    // that is not here. At most kMaxVolumes, paths at most kMaxFilePathBytes.
    HostVolumes host_volumes;
    // The registry credentials of the pod's imagePullSecrets, merged, as a
    // containers-auth.json(5) document ({"auths": {REGISTRY: {"auth":
    // base64(user:password)}}}); "" when it names none (or none exists).
    // At most kMaxPullAuthBytes.
    std::string pull_auth;
    // The pod's own network (agent/network/pod_network.h): the paths of its
    // network and UTS namespaces, which every container, probe, hook and
    // exec session joins (and podman's --network/--uts ns:PATH). Both "" =
    // the node's network (hostNetwork, or no pod network on the node).
    std::string net_ns, uts_ns;
};
constexpr size_t kMaxPullAuthBytes = size_t{64} * 1024;

// New contents for files a running pod's volumes already hold (docs/
// protocol.md "pod_files"): a refreshed ServiceAccount token. Each file is
// replaced atomically (a reader sees the old or the new one, never part);
// a file the pod did not start with is refused.
struct PodFilesUpdate {
    std::string uid;
    PodFiles files;  // base64 on the wire, as pod_run's
};

struct PodKill {
    std::string uid;
    uint32_t grace_s = 30;
    StopReason reason = StopReason::Killing;
};

struct PodList {};

// The Slurm job was suspended (pause) or resumed (docs/protocol.md
// "pods_pause"). While paused, every container's processes are stopped
// (SIGSTOP), no probe runs and no restart starts, and each pod reports
// Ready=False with the reason JobSuspended and this message; pods that
// arrive are held until the resume, exec and attach are refused (Unavailable).
// A pod_kill or shutdown meanwhile
// continues the pod's processes first (SIGCONT) so that they see SIGTERM.
// Resuming continues them and probes again: a container with a readiness
// probe is Ready once it passes again, one without at once.
struct PodsPause {
    bool pause = true;
    std::string message;  // cut at kMaxEventMessageBytes
};

// The shim asks the agent to pull a public image into the node's image store
// (agent/images/image_store.h) on its pod stream; answered once the store
// holds it. `image` normalized (common/daemons/image_ref.h), checked with
// image_ref_error by the decoder.
struct ImagePull {
    std::string image;
};
// The shim no longer waits for its image_pull `id` (the pod stopped): the
// agent drops it, and stops the pull when nobody else waits for it.
struct ImagePullCancel {
    uint64_t id = 0;
};

// agent -> shim (docs/protocol.md "pod_sandbox"): make the namespaces of
// pod `uid`'s own network, as the job's user (k8s-shim/sandbox.h), with
// `hostname` in its UTS namespace. Answered {pid} of the process that holds
// them, once it does; it keeps them until the pod's pod_run or pod_kill (or
// kSandboxHoldSeconds), by which time the agent holds them itself.
// `images`: its containers' images, by which the shim knows whether podman
// runs some of them: such a pod stays on the node's network for now (the
// reply's node_network says why), since podman's exec (probes, hooks,
// kubectl exec) cannot join a network namespace that the container's own
// user namespace does not own.
struct PodSandbox {
    std::string uid;
    std::string hostname;
    std::vector<std::string> images;
};
struct PodSandboxReply {
    int pid = 0;               // > 1, unless node_network says why not
    std::string node_network;  // "" = a sandbox was made
};
constexpr unsigned kSandboxHoldSeconds = 120;

struct Shutdown {
    uint32_t grace_s = 30;
    StopReason reason = StopReason::Shutdown;
};

// Run a command in a running container of a pod, for the kubelet's /exec
// (docs/protocol.md "exec_start"). The agent picks the session id; the
// shim's data connection names it in exec_attach.
struct ExecStart {
    std::string session;               // 1..kMaxSessionBytes of [A-Za-z0-9-]
    std::string uid;                   // the pod
    std::string container;             // 1..kMaxObjectNameBytes
    std::vector<std::string> command;  // 1..kMaxExecWords words, no NUL
    bool in = false;                   // "stdin": the session sends stdin frames
    bool out = true;                   // "stdout"
    bool err = true;                   // "stderr" (ignored with a tty: one stream)
    bool tty = false;
};

// Attach to a running container's own stdio, for the kubelet's /attach
// (docs/protocol.md "attach_start"): its output from now on, its stdin when
// the container has one. The session's data connection is an exec session's
// (exec_attach, then common/daemons/exec_frames.h).
struct AttachStart {
    std::string session;    // as ExecStart's
    std::string uid;        // the pod
    std::string container;  // 1..kMaxObjectNameBytes
    bool in = false;        // "stdin": the session sends stdin frames
    bool out = true;        // "stdout"
    bool err = true;        // "stderr"
    bool tty = false;
};

// What the pods use now, for the kubelet's /stats/summary and
// /metrics/resource (docs/protocol.md "pod_stats"). Counters are cumulative
// since the container instance started; a restart starts a new instance.
struct PodStatsRequest {};

// Disk space a directory tree takes: allocated bytes (st_blocks * 512) and
// inodes, each inode once. Optional on the wire ("logs", "ephemeral_storage"):
// absent from older shims and where nothing could be measured.
struct DiskUse {
    uint64_t bytes = 0;
    uint64_t inodes = 0;
};

struct ContainerStats {
    std::string name;                            // 1..kMaxObjectNameBytes
    int64_t start_ms = 0;                        // the instance's start, unix ms (> 0)
    uint64_t cpu_ns = 0;                         // user + system CPU of its processes, cumulative
    uint64_t memory_bytes = 0;                   // working set
    std::optional<DiskUse> logs = std::nullopt;  // its log directory
};

struct PodStatsEntry {
    std::string uid, ns, name;
    int64_t start_ms = 0;                    // the pod's start, unix ms (0: not started)
    std::vector<ContainerStats> containers;  // the running ones, at most kMaxStatsContainers
    // The pod's directory in the shim's state (logs, volumes, its records).
    std::optional<DiskUse> ephemeral = std::nullopt;
    // The pod's own cgroups (common/cgroup/pod_cgroup.h), as a kubelet reads a pod:
    // CPU from its cpuacct cgroup, the working set of its memory cgroup
    // (usage minus inactive file pages). Everything in the pod counts, its
    // supervisors and processes reaped by nobody included. Absent where the
    // pod has no such cgroup: the containers' sum then stands for the pod.
    std::optional<uint64_t> cgroup_cpu_ns = std::nullopt;
    std::optional<uint64_t> cgroup_memory_bytes = std::nullopt;
};

struct NodeStats {
    StatsSource source = StatsSource::Pods;
    uint64_t cpu_ns = 0;
    uint64_t memory_bytes = 0;
};

struct PodStatsReply {
    NodeStats node;
    std::vector<PodStatsEntry> pods;  // at most kMaxStatsPods
};

// ---- shim -> agent, on an exec or attach session's data connection ----

struct ExecAttach {
    std::string session;
};

// ---- shim -> agent ----

struct PodEvent {
    EventType type = EventType::Normal;
    std::string reason;  // Unhealthy, BackOff, Killing, ...
    std::string message;
    std::string container;  // "" = the pod
};

// A pod_status notification, and one entry of the pod_list reply.
struct PodStatus {
    std::string uid, ns, name;
    Json::Value status{Json::objectValue};  // a Kubernetes PodStatus
    // Present (maybe empty): the shim reports its own BackOff/Unhealthy/
    // Killing events and the agent does not derive them. pod_list entries and
    // older shims leave it out.
    std::optional<std::vector<PodEvent>> events;
};

struct PodListReply {
    std::vector<PodStatus> pods;
};

// Bodies (the envelope's "body"). to_json writes every field; the decoders
// apply the defaults above to absent optional fields.
Json::Value to_json(const PodRun &m);
Json::Value to_json(const PodKill &m);
Json::Value to_json(const PodList &m);
Json::Value to_json(const Shutdown &m);
Json::Value to_json(const PodsPause &m);
Json::Value to_json(const ImagePull &m);
Json::Value to_json(const ImagePullCancel &m);
Json::Value to_json(const PodSandbox &m);
Json::Value to_json(const PodSandboxReply &m);
Json::Value to_json(const PodStatus &m);
Json::Value to_json(const PodListReply &m);
Json::Value to_json(const PodEvent &m);
Json::Value to_json(const ExecStart &m);
Json::Value to_json(const ExecAttach &m);
Json::Value to_json(const AttachStart &m);
Json::Value to_json(const PodStatsRequest &m);
Json::Value to_json(const PodStatsReply &m);

Result<PodRun> pod_run_from_json(const Json::Value &body);
// pod_run's "host_volumes" (null: none).
Result<HostVolumes> host_volumes_from_json(const Json::Value &body);
// A PodRun from its parts, checked as pod_run_from_json checks a message
// (the uid, namespace and name of pod.metadata, the files' bounds, the
// pull_auth's size): the agent builds its pod_run so (agent/controllers/env_resolver.h)
// and a pod the shim would refuse fails before it is sent, with the same
// message.
Result<PodRun> make_pod_run(Json::Value pod, PodFiles files, std::string pull_auth);
// pod_run's and pod_files' "files"; op names the message in errors.
Result<PodFiles> pod_files_from_json(const Json::Value &files, std::string_view op = "pod_run");
// The bounds of "files" (volumes, files per volume, name and path lengths).
Status check_pod_files(const PodFiles &files, std::string_view op);
Json::Value to_json(const PodFilesUpdate &m);
Result<PodFilesUpdate> pod_files_update_from_json(const Json::Value &body);
Result<PodKill> pod_kill_from_json(const Json::Value &body);
Result<PodList> pod_list_request_from_json(const Json::Value &body);
Result<Shutdown> shutdown_from_json(const Json::Value &body);
Result<PodsPause> pods_pause_from_json(const Json::Value &body);  // "pause" required
Result<ImagePull> image_pull_from_json(const Json::Value &body);
Result<ImagePullCancel> image_pull_cancel_from_json(const Json::Value &body);
Result<PodSandbox> pod_sandbox_from_json(const Json::Value &body);
Result<PodSandboxReply> pod_sandbox_reply_from_json(const Json::Value &body);
Result<PodStatus> pod_status_from_json(const Json::Value &body);
Result<PodListReply> pod_list_reply_from_json(const Json::Value &body);
Result<PodEvent> pod_event_from_json(const Json::Value &event);
Result<ExecStart> exec_start_from_json(const Json::Value &body);
Result<ExecAttach> exec_attach_from_json(const Json::Value &body);
Result<AttachStart> attach_start_from_json(const Json::Value &body);
Result<PodStatsRequest> pod_stats_request_from_json(const Json::Value &body);
// Every count and name bounded (kMaxStatsPods, kMaxStatsContainers, the
// name bounds), counters unsigned, start times > 0 for containers; "logs"
// and "ephemeral_storage" optional (a reply without them still parses).
Result<PodStatsReply> pod_stats_reply_from_json(const Json::Value &body);

}  // namespace sk::proto
