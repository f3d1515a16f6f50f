// The narrow interface between the agent's pod controller and whatever runs
// the pods: the job's shim over the attached socket (shim_runtime.h), or an
// in-memory fake for tests (tests/agent/fake_runtime.h).
//
// Contracts:
//  - run(m): the resolved pod with its volumes' files and pull credentials
//    (proto::PodRun, agent/controllers/env_resolver.h resolve_pod). Idempotent by uid: a
//    second run of a known uid is ok and does nothing. done(error) carries
//    the refusal reason.
//  - kill(uid, grace_s, reason): returns at once; the runtime stops the pod
//    within grace_s and reports its terminal status. Idempotent; an unknown
//    uid is ok.
//  - snapshot(): every pod the runtime knows with its current status (used
//    to re-adopt after an agent restart).
//  - shutdown(grace_s, reason): stop everything, report final statuses, then
//    done.
//  - exec_start(m): starts an exec session's command in a running container
//    (docs/protocol.md "exec_start"): done once it runs (its output then
//    flows on the session's data connection) or with the refusal.
//    A runtime that cannot exec refuses with Unavailable. attach_start(m):
//    the same for an attach session (the container's own stdio).
//  - stats(done): what the running pods use now (proto::PodStatsReply,
//    docs/protocol.md pod_stats), decoded and bounded; done exactly once.
//  - Status notifications go to the sink set with set_status_sink, on every
//    change, from the loop (never inside a call above).
//  - All callbacks run on the agent's loop.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/daemons/shim_protocol.h"
#include "common/result.h"

namespace sk::agent {

// The controllers name stop reasons as strings (the Slurm job's end, a pod's
// deletion); the runtimes take only the ones the shim protocol defines:
// anything else fails naming op ("pod_kill", "shutdown").
inline Result<proto::StopReason> stop_reason_of(const std::string &reason, const char *op) {
    return proto::stop_reason_from_string(reason, std::string(op) + ": 'reason'");
}

// An event the runtime saw (a failed probe, a back-off, a probe kill):
// the optional "events" array of the shim's pod_status (docs/protocol.md).
struct RuntimeEvent {
    std::string type;    // Normal | Warning
    std::string reason;  // Unhealthy, BackOff, Killing, ...
    std::string message;
    std::string container;  // "" = the pod
};

struct PodSnapshot {
    std::string uid, ns, name;
    Json::Value status;  // a Kubernetes PodStatus
    std::vector<RuntimeEvent> events;
    // The runtime sends its own BackOff events (the field was present): the
    // agent then does not derive them from status transitions.
    bool reports_events = false;
};

class PodRuntime {
  public:
    using Done = std::function<void(Status)>;
    using StatusSink = std::function<void(const PodSnapshot &)>;
    using LostSink = std::function<void()>;

    virtual ~PodRuntime() = default;
    virtual void run(const proto::PodRun &m, Done done) = 0;
    virtual void kill(const std::string &uid, uint32_t grace_s, proto::StopReason reason,
                      Done done) = 0;
    virtual void snapshot(std::function<void(Result<std::vector<PodSnapshot>>)> done) = 0;
    virtual void shutdown(uint32_t grace_s, proto::StopReason reason, Done done) = 0;
    // NOLINTNEXTLINE(performance-unnecessary-value-param): the overriders keep done
    virtual void exec_start(const proto::ExecStart & /*m*/, Done done) {
        done(fail(Error::Unavailable, "this node's pod runtime does not run commands in pods"));
    }
    // As exec_start, for an attach session (docs/protocol.md "attach_start").
    // NOLINTNEXTLINE(performance-unnecessary-value-param): the overriders keep done
    virtual void attach_start(const proto::AttachStart & /*m*/, Done done) {
        done(fail(Error::Unavailable, "this node's pod runtime does not attach to containers"));
    }
    // The Slurm job was suspended (pause) or resumed: the pods' processes
    // stopped or continued, Ready=False (JobSuspended, message) while paused
    // (docs/protocol.md "pods_pause"). Idempotent.
    // NOLINTNEXTLINE(performance-unnecessary-value-param): the overriders keep done
    virtual void pause(bool /*pause*/, const std::string & /*message*/, Done done) {
        done(fail(Error::Unavailable, "this node's pod runtime cannot stop its pods"));
    }
    virtual void stats(std::function<void(Result<proto::PodStatsReply>)> done) = 0;
    // New contents for files a running pod's volumes hold (a refreshed
    // ServiceAccount token; docs/protocol.md "pod_files").
    // NOLINTNEXTLINE(performance-unnecessary-value-param): the overriders keep done
    virtual void update_files(const proto::PodFilesUpdate & /*m*/, Done done) {
        done(fail(Error::Unavailable, "this node's pod runtime cannot renew volume files"));
    }

    // The namespaces of pod m.uid's own network, made as the job's user:
    // done(pid of the process that holds them until the pod's run or kill).
    virtual void sandbox(
        const proto::PodSandbox & /*m*/,
        // NOLINTNEXTLINE(performance-unnecessary-value-param): the overriders keep done
        std::function<void(Result<proto::PodSandboxReply>)> done) {
        done(fail(Error::Unavailable, "this node's pod runtime cannot make a pod's network"));
    }

    void set_status_sink(StatusSink s) { sink_ = std::move(s); }
    // Called once when the runtime goes away (the shim's connection closed).
    void set_lost_sink(LostSink s) { lost_ = std::move(s); }

  protected:
    void notify(const PodSnapshot &p) {
        if (sink_) sink_(p);
    }
    void notify_lost() {
        if (lost_) lost_();
    }

  private:
    StatusSink sink_;
    LostSink lost_;
};

}  // namespace sk::agent
