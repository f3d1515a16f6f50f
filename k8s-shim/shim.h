// The shim daemon: one connection to the agent (docs/protocol.md), the pods it
// runs, the GPU allocator and the state directory.
//
//  <state_dir>/gpus.json             GPU assignment per pod uid (survives restarts)
//  <state_dir>/pods/<uid>/pod.json   the pod_run body (mode 0600: secret files)
//  <state_dir>/pods/<uid>/state.json running pids + start times, final status
//  <state_dir>/pods/<uid>/<container>/<restartCount>.log   CRI logs (common/daemons/log_paths.h)
//  <state_dir>/pods/<uid>/volumes/<name>/                  emptyDir/configMap/secret
//  <state_dir>/pods/<uid>/mnt/          scratch of the mounts (k8s-shim/mount_ns.h)
//  <state_dir>/podman/                  the podman runtime's storage (k8s-shim/podman.h)
//
// A new shim for the same job finds pods that were running under a previous
// shim: their processes cannot be re-attached (the log pipes died with it), so
// it kills the verified process groups (pid + /proc start time) and reports
// those pods Failed with reason ShimRestarted; a pod_run for such a uid does
// not run it again.
#pragma once

#include <uv.h>

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/daemons/protocol.h"
#include "common/daemons/shim_protocol.h"
#include "k8s-shim/clock.h"
#include "k8s-shim/gpu_alloc.h"
#include "k8s-shim/pod_runner.h"
#include "k8s-shim/podman.h"
#include "k8s-shim/runtime_template.h"
#include "k8s-shim/sandbox.h"
#include "k8s-shim/session_table.h"
#include "uv/handles.h"

namespace sk::shim {

struct ShimOptions {
    uint32_t job_id = 0;
    std::string slurm_node;
    std::string socket_path;
    size_t log_max_bytes = 10 << 20;
    double time_scale = 1.0;  // test-only (SLURM_K8S_SHIM_TEST_TIME_SCALE)
    // The executable that supervises containers (k8s-shim/supervise.h): this
    // program; main() sets the path it runs from.
    std::string supervisor = "/proc/self/exe";
};

struct ShimPod {
    std::string uid, ns, name;
    std::unique_ptr<PodRunner> runner;  // null: refused or lost
    Json::Value fixed_status;           // status of a refused or lost pod
    Json::Value last_sent;
    bool finished = false;
    bool forget = false;            // gone from the API: drop the entry once finished
    bool disk_walk_capped = false;  // logged once: its disk use walk hit its bound
};

class Shim : private SessionTable::Host {
  public:
    Shim(uv_loop_t *loop, ShimOptions opt, RuntimeTemplates templates);
    ~Shim() override;

    // Connects and attaches; the reply arrives on the loop.
    Status start();
    int exit_code() const { return exit_code_; }

    // Request handlers (public for clarity of the dispatch table).
    proto::Reply handle(const proto::Request &req, bool *deferred);

  private:
    void connect();
    void on_connected(int status);
    void on_read(ssize_t n, const char *data);
    void on_line(const std::string &line);
    void on_attached(const proto::Reply &r);
    // false (logged, nothing sent) for a line over the link's bound.
    bool send_line(const std::string &line);
    // A reply over the bound goes out as a TooLarge error with its id.
    void send_reply(const proto::Reply &r) override;
    // SessionTable::Host: an exec's supervisor is saved in state.json; the
    // container an attach session taps.
    void exec_changed(const std::string &uid) override;
    Result<Container *> attach_container(const std::string &uid,
                                         const std::string &container) override;
    void notify(ShimPod &p);
    void lost_connection(const std::string &why);
    void schedule_reconnect();

    proto::Reply pod_run(const proto::Request &req);
    proto::Reply pod_kill(const proto::Request &req);
    proto::Reply pod_list(const proto::Request &req);
    proto::Reply shutdown(const proto::Request &req, bool *deferred);
    proto::Reply exec_start(const proto::Request &req, bool *deferred);
    proto::Reply attach_start(const proto::Request &req, bool *deferred);
    // The pod a new exec or attach session enters, or why there is none (the
    // shim shuts down, the session id is in use, no such pod running).
    Result<ShimPod *> session_pod(const std::string &session, const std::string &uid);
    proto::Reply pod_stats(const proto::Request &req);
    proto::Reply pods_pause(const proto::Request &req);
    proto::Reply pod_sandbox(const proto::Request &req, bool *deferred);
    proto::Reply pod_files(const proto::Request &req);
    void measure_disk(const std::string &uid, ShimPod *p, proto::PodStatsEntry *e, size_t *budget);
    // Ends the exec sessions of pod uid (all of them, or those into a
    // container that no longer runs).
    void kill_execs(const std::string &uid, const std::string &why, bool all);
    void maybe_finish_shutdown();
    // SIGTERM (the plugin's stop): a shutdown nobody asked for, grace 0.
    void terminate();
    void refuse(ShimPod &p, const std::string &reason, const std::string &message);

    void save_gpus();
    void save_pod_state(ShimPod &p);
    void load_previous_pods();
    void pod_finished(ShimPod &p);
    void reap();
    void release(ShimPod &p);
    void forget(const std::string &uid);
    std::string pod_dir(const std::string &uid) const;

    uv_loop_t *loop_;
    ShimOptions opt_;
    RuntimeTemplates templates_;
    Clock clock_;
    Pipe conn_;  // open from connect() until the connection is lost
    Timer reconnect_timer_;
    Timer reap_timer_;
    int reconnect_delay_ms_ = 500;
    proto::LineBuffer lines_{proto::kMaxShimMessageBytes};
    bool attached_ = false;
    bool ever_attached_ = false;
    uint64_t next_id_ = 1;
    uint64_t attach_id_ = 0;

    std::string node_name_, state_dir_;
    GpuAllocator gpus_;
    // The lent GPUs, when the extern step's devices cgroup lets this shim
    // open those only (SLURM_K8S_GPUS_CONFINED=1 from the plugin,
    // spank/device_cgroup.h): CUDA then numbers them from 0, and so do the
    // pods' CUDA_VISIBLE_DEVICES. Empty otherwise (the node's indices).
    std::vector<int> cuda_pool_;
    // The agent places each container in its pod's cgroup (AttachReply).
    bool pod_cgroups_ = false;
    std::map<std::string, ShimPod> pods_;  // by uid
    bool paused_ = false;                  // the Slurm job is suspended (pods_pause)
    std::string pause_message_;
    KnownImages known_images_;              // RunnerEnv::images
    std::unique_ptr<Sandboxes> sandboxes_;  // pod_sandbox
    // The node's image store (AttachReply): its podman options, empty when
    // none or when the podman runtime cannot use it (RunnerEnv::store_pull).
    std::vector<std::string> store_options_;
    std::string store_view_;
    // RunnerEnv::podman_warm, and the command that makes it so at the first
    // attach when the node has an image store (warm_podman).
    bool podman_warm_ = false;
    Process warmup_;
    // A job with a node image store runs images: its podman storage made and
    // its pause process started at the attach, by the shim, so that the first
    // pod of an image the store holds starts as fast as a later one.
    void warm_podman();
    // Requests of the shim's own to the agent (image_pull), by id: answered
    // by its reply, or failed when the connection is lost.
    std::map<uint64_t, std::function<void(const Status &)>> agent_calls_;
    std::function<void()> store_pull(const std::string &image,
                                     std::function<void(const Status &)> done);
    // Sends a request or notification of the shim's own to the agent; its id.
    uint64_t send_request(proto::ShimOp op, Json::Value body);
    Signal term_;
    // At the shutdown, once every pod stopped and before the reply: the
    // job's podman state removed, when a pod used it (k8s-shim/podman.h).
    std::unique_ptr<PodmanReset> podman_reset_;
    bool shutting_down_ = false;
    uint64_t shutdown_req_id_ = 0;
    bool shutdown_replied_ = false;
    int exit_code_ = 0;
    // Last: destroyed first (its sessions' loop stopped before anything of
    // the shim its closures may use goes).
    SessionTable sessions_;
};

}  // namespace sk::shim
