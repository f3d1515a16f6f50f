// One pod on the libuv loop: init containers in order (a native sidecar,
// restartPolicy Always, once it started, runs on beside the rest), then the
// app containers, each as a process group with CRI logs; restarts with
// back-off; probes; termination (preStop, SIGTERM, grace, SIGKILL of the
// group; the sidecars after the app containers, the last first).
// Decisions come from the pure core (pod_status, backoff, probe); this file
// only spawns, signals, times and writes.
//
// Lifetime: the runner and its containers own their libuv handles
// (uv/handles.h): destroying the runner closes them, and no callback reaches
// it afterwards. The shim frees a runner once idle(), so that no process of
// the pod is left unreaped and no log pipe undrained.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/result.h"
#include "k8s-shim/clock.h"
#include "k8s-shim/container.h"
#include "k8s-shim/pod_plan.h"
#include "k8s-shim/pod_status.h"
#include "k8s-shim/spawn.h"

namespace sk::shim {

class PodRunner : private ContainerHost {
  public:
    PodRunner(RunnerEnv env, PodPlan plan);
    ~PodRunner() override;
    PodRunner(const PodRunner &) = delete;
    PodRunner &operator=(const PodRunner &) = delete;

    // Prepares the pod directory and volumes, then starts the first step.
    // Fails (Io) when the directory cannot be prepared; nothing runs then.
    Status start();
    // Stops the pod: preStop, SIGTERM, grace_s, SIGKILL. Idempotent.
    void kill(int64_t grace_s, const std::string &reason);
    // The Slurm job was suspended (pause) or resumed: every container's
    // processes stopped or continued, Ready=False (JobSuspended, message)
    // while paused (common/daemons/shim_protocol.h PodsPause). Idempotent.
    void pause(bool paused, const std::string &message);
    // New contents for files the pod's configMap/secret/projected/downwardAPI
    // volumes already hold (a refreshed ServiceAccount token): each replaced
    // atomically. A volume or file the pod did not start with is refused
    // (InvalidArgument) and nothing is written.
    Status update_files(const proto::PodFiles &files);

    Json::Value status();  // current PodStatus (keeps transition times)
    bool finished() const { return finished_; }
    // Finished, and no process (probe check, preStop hook) or pipe of the pod
    // is still open: the runner may be destroyed.
    bool idle() const;
    const PodPlan &plan() const override { return plan_; }
    const PodRun &run() const override { return run_; }
    const RunnerEnv &env() const override { return env_; }
    // Persisted record of the running processes (pid, start time, restarts).
    Json::Value process_record() const;

    // What an exec session into `container` runs (k8s-shim/exec_session.h):
    // argv with the container's environment, working directory and
    // confinement. NotFound: the pod has no container of that name;
    // Invalid: the container is not running, or the pod is stopping.
    // interactive, tty: the session's stdin and terminal (podman exec's).
    Result<SpawnSpec> exec_spec(const std::string &container, const std::vector<std::string> &argv,
                                bool interactive = false, bool tty = false) const;
    // Whether `container` runs now (an exec session into it ends otherwise).
    bool container_running(const std::string &container) const;
    // The running instance an attach session taps (k8s-shim/attach_session.h);
    // fails as exec_spec does.
    Result<Container *> attach_container(const std::string &container);
    // The containers that run now (init containers included), each with its
    // supervisor's pid and its instance's start (unix ms), for pod_stats.
    struct RunningContainer {
        std::string name;
        int pid = 0;
        int64_t started_ms = 0;
        bool image = false;  // the podman runtime's (pod_stats.h image_container_usage)
    };
    std::vector<RunningContainer> running_containers() const;

    // Kubelet-like events (Unhealthy, BackOff, Killing) queued for the next
    // pod_status notification (its optional "events" array, docs/protocol.md).
    // Each call reports a change so the notification goes out.
    void add_event(const std::string &type, const std::string &reason, const std::string &message,
                   const std::string &container) override;
    // The queued events as a JSON array; empties the queue.
    Json::Value take_events();
    bool has_events() const { return !events_.empty(); }

  private:
    // ContainerHost: called by the containers.
    void container_started(Container *c) override;
    void container_exited(Container *c) override;
    void changed() override;

    // The running container an exec or attach session may enter, or why not
    // (exec_spec); verb: "exec in", "attach to", for the message.
    Result<Container *> running_container(const std::string &container, const char *verb) const;
    Status prepare_volumes();
    void start_app_containers();
    void check_finished();
    void deadline_exceeded();
    void advance_init();
    bool app_containers_done() const;
    bool has_sidecars() const;
    void stop_sidecars();
    static void settle_waiting(Container *c);

    RunnerEnv env_;
    PodPlan plan_;
    PodRun run_;
    std::vector<std::unique_ptr<Container>> init_, app_;
    size_t next_init_ = 0;
    bool finished_ = false;
    Json::Value last_status_;
    Timer deadline_;                // activeDeadlineSeconds after the start
    bool advancing_ = false;        // advance_init under way
    bool sidecars_ending_ = false;  // the app containers completed: the sidecars stop
    int64_t stop_deadline_ms_ = 0;  // wall time the pod's stop ends (kill)
    Json::Value events_{Json::arrayValue};
};

}  // namespace sk::shim
