// The namespaces of a pod's own network (docs/kubernetes-guide.md,
// "Network"), made as the job's user. The agent asks for them (pod_sandbox,
// common/daemons/shim_protocol.h) before it plans the pod: the shim starts
//   slurm-k8s-shim --pod-sandbox HOSTNAME
// which enters a new user namespace (the job's uid and gid mapped to
// themselves), a new network namespace owned by it (its loopback up) and a
// new UTS namespace (HOSTNAME), writes "ready\n" on stdout and waits for
// EOF on stdin. The
// agent meanwhile takes hold of the namespaces (agent/network/pod_network.h)
// and plugs the network in (CNI, as root); the pod's processes join them
// through the agent's paths (k8s-shim/confine.h --netns), which the job's
// user may do because it owns the user namespace: no capability of the node
// is given to it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "uv/handles.h"

namespace sk::shim {

constexpr const char kPodSandbox[] = "--pod-sandbox";

// argv[1] is kPodSandbox. Returns the exit code: 0 after EOF on stdin, 1
// when a namespace could not be made (why on stderr).
int pod_sandbox_main(int argc, char **argv);

// The shim's sandboxes, by pod uid: each process held until release() (the
// pod's pod_run or pod_kill) or until kSandboxHoldSeconds passed.
class Sandboxes {
  public:
    using Done = std::function<void(int pid, const std::string &error)>;
    Sandboxes(uv_loop_t *loop, std::string helper) : loop_(loop), helper_(std::move(helper)) {}
    ~Sandboxes();
    Sandboxes(const Sandboxes &) = delete;
    Sandboxes &operator=(const Sandboxes &) = delete;
    // Starts one for pod `uid` (one already held for it is let go first);
    // done(pid, "") once it is ready, done(0, why) when it failed.
    void make(const std::string &uid, const std::string &hostname, Done done);
    void release(const std::string &uid);
    size_t size() const { return held_.size(); }

  private:
    struct Held;
    uv_loop_t *loop_;
    std::string helper_;
    std::map<std::string, std::shared_ptr<Held>> held_;
    std::vector<std::shared_ptr<Held>> going_;  // let go, not exited yet
};

}  // namespace sk::shim
