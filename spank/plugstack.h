// plugstack.conf arguments of spank_k8s.so, parsed strictly into one typed
// config. Slurm passes the words after the plugin path to every hook; hooks
// that run in fresh processes (prolog, epilog) parse them again each time,
// so parsing is pure and cheap. An unknown key or a bad value is an error
// that names the key and the value.
//
//   required /usr/lib/slurm/spank_k8s.so socket=/run/slurm-k8s/agent.sock
//       timeout=5 grace=30 max_gpus_per_node=8 allowed_namespaces=rl,infer
//   (one line in plugstack.conf)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/k8s_names.h"
#include "common/result.h"

namespace sk::spank {

struct PlugConfig {
    std::string socket = "/run/slurm-k8s/agent.sock";
    // The agent's admin socket, which only root reaches; "" = admin/ beside
    // socket (common/agent_call.h admin_socket_for).
    std::string admin_socket;
    uint64_t timeout_s = 5;                       // bound on register/status/one poll, per call
    uint64_t grace_s = 30;                        // pods' stop budget at job end (deregister)
    uint64_t max_gpus_per_node = 0;               // 0 = no site limit
    uint64_t max_gpus_per_job = 0;                // 0 = no site limit
    std::vector<std::string> allowed_namespaces;  // empty = any namespace
    std::vector<std::string> label_prefixes;      // prefixes allowed in user label keys
    std::string default_taint = "slurm-k8s/job={job}:NoSchedule";  // "" = none
    bool fail_on_agent_error = false;                              // on_agent_error=fail|warn
    std::string rundir = "/run/slurm-k8s/jobs";
    std::string shim;  // absolute path of slurm-k8s-shim
    std::string shim_log_level = "info";
    // Container runtime templates for the shim (--runtime-config;
    // etc/runtime.conf.example); "" = the process runtime only.
    std::string runtime_config;
    // The shim's CPU nice value; the pods' and sessions' commands run at the
    // extern step's own (spank/shim_process.h).
    int shim_nice = -5;
    uint64_t wait_default_s = 300;  // --k8s-wait without a value
    std::string cluster;            // cluster label; "" = SLURM_CLUSTER_NAME
    // The device node of GPU {index} (as gres.conf's File= lists them): the
    // steps are denied the other side's GPUs there (spank/device_cgroup.h).
    std::string gpu_device = "/dev/nvidia{index}";
};

// The default shim path comes from the build (bindir).
Result<PlugConfig> parse_plugstack(int argc, const char *const *argv);
// The default taint for one job ("{job}" replaced by the job id); empty when
// default_taint is "".
Result<std::vector<k8s::Taint>> default_taints_for(const PlugConfig &cfg, uint32_t job_id);
// The agent socket of one Slurm node: "{node}" in socket= is replaced by the
// node name, for hosts that run several slurmd (one agent each).
// That socket is the shim's (it runs as the job's user).
std::string socket_for(const PlugConfig &cfg, const std::string &slurm_node);
// The admin socket of one Slurm node ("{node}" replaced alike): the plugin's
// own calls (register, deregister, status), made as root, go there, so that
// no user's flood of the agent socket delays a job's start or end.
std::string admin_socket_for(const PlugConfig &cfg, const std::string &slurm_node);
// One "key: doc" line per key (for the docs and error messages).
std::string plugstack_keys_doc();

}  // namespace sk::spank
