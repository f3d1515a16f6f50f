// The daemon's PodNetworks (agent/core/pod_networks.h): each pod's own
// network namespace, made as the job's user by its shim (k8s-shim/sandbox.h)
// and held here by root, plugged into the host's pod bridge by the standard
// CNI plugins (agent/network/cni.h) run as root.
//
// State, under `dir` (root's, 0711: the pods' processes open their
// namespaces by name, nobody lists them): <pod uid>/net and /uts, bind
// mounts of the namespaces (the pods' processes join them,
// k8s-shim/confine.h --netns), and <pod uid>/result.json (0600), the
// plugins' result, which the removal passes back to them and from which an
// agent restarted finds its pods again (re-adopted, not made twice). IPAM
// leases: `ipam_dir`. A directory whose pod is gone is collected
// (Agent::collect_networks).
//
// What the job's user hands in is checked before root acts on it: the
// sandbox's pid must be a process of the job's user whose network and UTS
// namespaces are owned by a user namespace of that user (not the host's,
// not another pod's), opened through /proc/<pid> held open, so that a pid
// reused meanwhile fails.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/core/pod_networks.h"
#include "agent/network/cni.h"

typedef struct uv_loop_s uv_loop_t;

namespace sk::agent {

struct PodNetworkSettings {
    CniSettings cni;
    std::string dir;  // the namespaces' mounts and results
    uint64_t plugin_timeout_ms = 30000;
};

class CniPodNetworks : public PodNetworks {
  public:
    CniPodNetworks(uv_loop_t *loop, PodNetworkSettings s);
    ~CniPodNetworks() override;
    CniPodNetworks(const CniPodNetworks &) = delete;
    CniPodNetworks &operator=(const CniPodNetworks &) = delete;
    // Makes the directories; finds the pods attached before a restart.
    Status start();

    void attach(const PodNetworkRequest &r, std::function<void(Result<PodAddress>)> done) override;
    void detach(const std::string &pod_uid, std::function<void()> done) override;
    const PodAddress *find(const std::string &pod_uid) const override;
    std::vector<std::string> attached() const override;
    const PodNetworkSettings &settings() const { return s_; }

  private:
    struct Pod;
    // Runs the chain's plugins from `i` on (ADD forwards, DEL backwards),
    // then done(result of the last ADD, or the first error of an ADD; a
    // DEL's errors are logged and it goes on).
    void run_chain(const std::string &uid, bool add, size_t i, Json::Value prev,
                   const std::function<void(Result<Json::Value>)> &done);
    void attached_now(const std::string &uid, Result<Json::Value> r);
    void remove_now(const std::string &uid);
    void finish_removal(const std::string &uid);
    std::string pod_dir(const std::string &uid) const { return s_.dir + "/" + uid; }

    uv_loop_t *loop_;
    PodNetworkSettings s_;
    std::map<std::string, Pod> pods_;
};

// Holds the namespaces of sandbox `pid` at <dir>/net and /uts once they
// pass the checks above (`held`: the network namespaces' inodes held for
// other pods). "" or why not.
std::string hold_namespaces(int pid, uint32_t uid, const std::string &dir,
                            const std::vector<unsigned long> &held, unsigned long *net_ino);
// Unmounts and removes what hold_namespaces made in `dir` (idempotent).
void release_namespaces(const std::string &dir);

}  // namespace sk::agent
