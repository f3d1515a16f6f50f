// A PodRuntime that "runs" pods in memory, for unit and component tests
// (agent.conf runtime = fake, offered only by the test build of the agent,
// tests/agent/test_agent_main.cc). Pods go Running at once with every
// container started and ready; kill() terminates them (exit 0, Completed ->
// Succeeded). A test drives other states with set_status() or, through the
// test agent binary, with the pod annotation
//   slurm-k8s.io/fake-exit-code: "N"   (containers exit with N at once)
//   slurm-k8s.io/fake-refuse: "reason" (run is refused with that reason)
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/core/runtime.h"

namespace sk::agent {

class FakeRuntime : public PodRuntime {
  public:
    using Post = std::function<void(std::function<void()>)>;  // defer to the loop
    using Now = std::function<int64_t()>;                     // unix seconds

    FakeRuntime(Post post, Now now) : post_(std::move(post)), now_(std::move(now)) {}

    void run(const proto::PodRun &m, Done done) override;
    void kill(const std::string &uid, uint32_t grace_s, proto::StopReason reason,
              Done done) override;
    void snapshot(std::function<void(Result<std::vector<PodSnapshot>>)> done) override;
    void shutdown(uint32_t grace_s, proto::StopReason reason, Done done) override;
    // Each pod whose status says Running, with its running containers, all
    // at zero use (nothing runs); the node's figure is their sum.
    void stats(std::function<void(Result<proto::PodStatsReply>)> done) override;
    // Records the call (pauses()); the pods' statuses stay as they are.
    void pause(bool pause, const std::string &message, Done done) override;
    void update_files(const proto::PodFilesUpdate &m, Done done) override;

    // Test control: the runtime's connection went away (the lost sink).
    void lose() { notify_lost(); }
    // Test control: replace a pod's status and notify it.
    bool set_status(const std::string &uid, const Json::Value &status);
    size_t size() const { return pods_.size(); }
    bool has(const std::string &uid) const { return pods_.count(uid) != 0; }
    unsigned run_calls() const { return runs_; }
    // Every kill() (shutdown() kills each pod through it too) and every
    // shutdown(), in call order, for assertions.
    struct Call {
        std::string uid;  // "" for shutdown
        uint32_t grace_s;
        std::string reason;
    };
    const std::vector<Call> &kills() const { return kills_; }
    const std::vector<Call> &shutdowns() const { return shutdowns_; }
    const std::vector<bool> &pauses() const { return pauses_; }  // pause(), in call order
    // update_files(), in call order (answered ok).
    const std::vector<proto::PodFilesUpdate> &file_updates() const { return file_updates_; }

    static Json::Value running_status(const Json::Value &pod, int64_t now_s);
    static Json::Value terminated_status(const Json::Value &pod, const Json::Value &prev,
                                         int exit_code, int64_t now_s);

  private:
    void emit(const std::string &uid);
    static bool is_terminal(const Json::Value &status);
    Post post_;
    Now now_;
    std::map<std::string, PodSnapshot> pods_;
    std::map<std::string, Json::Value> specs_;
    unsigned runs_ = 0;
    std::vector<Call> kills_, shutdowns_;
    std::vector<bool> pauses_;
    std::vector<proto::PodFilesUpdate> file_updates_;
};

}  // namespace sk::agent
