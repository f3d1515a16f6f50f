// A VirtualNode (agent/controllers/virtual_node.h) on a virtual clock
// (tests/unit/manual_timers.h: time jumps from one due timer to the next, so
// a wait of seconds takes microseconds), driven only through its public
// interface, over the fake HTTP transport and the fake runtime: what test_pod_controller and
// test_node_lease_controller share. The fake API side keeps just enough state for the controllers'
// replies: created objects get a uid and a resourceVersion, a pod status
// PATCH is merged into the pod the test served and answered with it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <json/json.h>

#include "agent/controllers/virtual_node.h"
#include "agent/core/agent_config.h"
#include "agent/core/clock.h"
#include "agent/core/job_store.h"
#include "agent/core/slurm_jobs.h"
#include "agent/kube/kube_client.h"
#include "common/rfc3339.h"
#include "tests/agent/fake_runtime.h"
#include "tests/unit/fake_transport.h"
#include "tests/unit/manual_timers.h"

namespace sk::agent::test {

constexpr const char *kNodeName = "slurm-n1-42";
constexpr const char *kNodeUid = "node-uid-1";
constexpr const char *kLeasePath =
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/slurm-n1-42";
constexpr const char *kLeasesPath =
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
constexpr const char *kNodePath = "/api/v1/nodes/slurm-n1-42";
constexpr const char *kPodsPath = "/api/v1/pods";  // list and watch (queries differ)

// Slurm's answers as a test scripts them (none set: end time 0, Unknown).
class ScriptedSlurm : public SlurmJobs {
  public:
    std::function<void(uint32_t job, const std::function<void(int64_t)> &)> on_end_time;
    std::function<void(uint32_t job, const std::function<void(JobState)> &)> on_state;
    void state(uint32_t job_id, std::function<void(JobState)> cb) override {
        if (on_state)
            on_state(job_id, cb);
        else
            cb(JobState::Unknown);
    }
    void end_time(uint32_t job_id, std::function<void(int64_t)> cb) override {
        if (on_end_time)
            on_end_time(job_id, cb);
        else
            cb(0);
    }
};

class ControllerEnv {
  public:
    ControllerEnv();
    ~ControllerEnv();
    ControllerEnv(const ControllerEnv &) = delete;
    ControllerEnv &operator=(const ControllerEnv &) = delete;

    // Virtual milliseconds since the environment was made.
    uint64_t now_ms() const { return timers_.now_ms(); }
    FakeTransport &http() { return *http_; }
    AgentConfig &cfg() { return cfg_; }
    AgentContext &ctx() { return ctx_; }
    // Slurm as the nodes made from here on ask it (AgentContext::slurm; by
    // default they ask nothing).
    ScriptedSlurm &slurm() {
        ctx_.slurm = &slurm_;
        return slurm_;
    }

    // A Node POST answers with uid kNodeUid (then uid-2, ...: every create
    // is a new object); a Lease POST with a fresh uid; a Lease PUT echoes
    // with resourceVersion + 1; GET of the Node answers the last one created.
    void serve_node_and_lease();
    // The pod list answers these pods (resourceVersion rv); each pod's
    // status PATCH is merged into it and answered with the result.
    void serve_pods(const std::vector<Json::Value> &pods, const std::string &list_rv = "10");
    // Only the status PATCH of a pod (one that arrives by watch event).
    void serve_pod(const Json::Value &pod);
    // The next status PATCHes of pod name get these answers first (then merging resumes).
    void fail_pod_patches(const std::string &name, std::vector<FakeAnswer> first);
    // The pod as the fake API side holds it now (after merged PATCHes).
    Json::Value served_pod(const std::string &name) const;

    // Job 42 on n1, node slurm-n1-42.
    JobRecord record() const;
    // Creates the node and starts it; ready(status) when ready_cb ran.
    std::shared_ptr<VirtualNode> start_node(std::function<void(Status)> ready = {});
    // Gives the node a fake runtime (owned by the node); the pointer stays
    // valid while the node holds it.
    // shim_pid: the pid the agent watches once the runtime is lost (0: none).
    FakeRuntime *attach_fake_runtime(int shim_pid = 0);

    // Runs what is due and moves the virtual clock from one due call to the
    // next until pred() holds or timeout_ms (virtual) passed; pred() at the
    // end. With nothing left armed it stops waiting at once.
    bool run_until(const std::function<bool()> &pred, uint64_t timeout_ms = 3000);
    void run_for(uint64_t ms);
    // Stops and drops the node, cancels what is still deferred: 0, or -1
    // when a timer is still armed (one the node left behind).
    int close();

    std::shared_ptr<VirtualNode> node;

  private:
    ManualTimers timers_;  // the controllers' timers and clock; outlives all below
    bool closed_ = false;
    std::unique_ptr<FakeTransport> http_;
    std::unique_ptr<KubeClient> kube_;
    AgentConfig cfg_;
    std::string dir_;
    std::unique_ptr<JobStore> store_;
    ScriptedSlurm slurm_;
    AgentContext ctx_;
    std::map<std::string, Json::Value> pods_;                        // by "ns/name"
    std::map<std::string, std::vector<FakeAnswer>> patch_failures_;  // by "ns/name"
    int node_creates_ = 0, lease_creates_ = 0;
    Json::Value last_node_;
};

// A pod list answer.
FakeAnswer pod_list(const std::vector<Json::Value> &pods, const std::string &rv);

// A Pod bound to kNodeName with one container "main".
Json::Value make_pod(const std::string &name, const std::string &uid, const std::string &rv = "11");

}  // namespace sk::agent::test
