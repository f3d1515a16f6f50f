// The podman runtime: containers whose image matches a `podman = PATTERN`
// line of runtime.conf (k8s-shim/runtime_template.h) run from their image
// through rootless podman, as the job's user, inside the job.
//
// What the shim makes of such a container (docs/admin-guide.md, "Container
// runtimes"):
// - Storage per job: every podman command gets --root/--runroot/--tmpdir
//   under <state_dir>/podman and a HOME, XDG_RUNTIME_DIR and
//   XDG_CONFIG_HOME of its own there, so nothing of the user's own podman
//   setup is used or touched, and the job's end removes it all
//   (podman_reset_argv, then the shim's state directory goes).
// - The image is pulled by the shim before the container starts, as the
//   kubelet does (imagePullPolicy and its defaults: pull_needed), with
//   --tls-verify=false only for the registries runtime.conf names insecure.
// - `podman run` runs under the container's supervisor through the wrapper
//   podman_main (`slurm-k8s-shim --podman-main`), because a signal to
//   `podman run` itself makes it exit 0 at once while the container lives
//   on: the wrapper keeps podman out of the container's process group and
//   turns each signal the shim sends (SIGTERM at the stop) into
//   `podman kill --signal`; it exits as `podman run` does, i.e. with the
//   container's own exit code. The grace period's end is the supervisor's
//   kill of every process (conmon and the container's processes are
//   reparented to the supervisor, a subreaper).
// - The container: --userns=keep-id and --user the job's uid:gid (whatever
//   USER the image names: no root inside),
//   --network=host, --hostname the virtual node, the container's whole
//   environment passed by name (-e NAME: the values stay out of the command
//   line), volumes with -v at their mountPaths, the GPUs it was given
//   (only those) and the control devices with --device, command as
//   --entrypoint and args after the image, as a kubelet maps them.
// - Exec probes, the preStop hook and exec sessions run inside the
//   container with `podman exec`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/daemons/image_ref.h"
#include "common/result.h"
#include "k8s-shim/runtime_template.h"
#include "uv/handles.h"

namespace sk::shim {

struct ContainerPlan;

// What a container of the podman runtime needs beyond its ContainerPlan.
struct ImageRun {
    std::vector<std::string> podman;  // the program and its global options
    // The environment podman itself runs with (podman_environment), before
    // the container's variables it passes by name.
    std::vector<std::pair<std::string, std::string>> tool_env;
    std::string name;                        // the podman container's name
    std::string image;                       // normalized (normalize_image)
    bool has_command = false;                // command given: it replaces ENTRYPOINT
    std::vector<std::string> command, args;  // $(VAR)s expanded
    std::string pull_policy;                 // Always, IfNotPresent, Never
    bool insecure = false;                   // --tls-verify=false
    std::string authfile;                    // --authfile: the pod's pull credentials
    // The pod's pull credentials themselves ("" = none): which pulled an
    // image decides which pods may use it (KnownImages).
    std::string credential;
    std::vector<std::string> run_options;  // security and identity options
    // The file on the node bound at terminationMessagePath ("" = none):
    // emptied at each start, read at the exit for the termination message.
    std::string termination_log, termination_message_path;
    // podman run's --pidfile: there once the container's process exists.
    std::string pidfile;
    std::string gpu_device;  // PodmanSettings::gpu_device
    std::vector<std::string> gpu_control_devices;
    // Its GPUs as CDI devices ("nvidia.com/gpu=0", k8s-shim/cdi.h), one per
    // GPU, when the node's specification names each: passed instead of the
    // device nodes above.
    std::vector<std::string> cdi_devices;
};

// Image names and pull errors (common/daemons/image_ref.h).
using sk::default_pull_policy;
using sk::image_registry;
using sk::normalize_image;
using sk::pull_error;

// The directory of the job's podman state (<state_dir>/podman), its global
// options and the environment every podman command runs with; run_dir is
// its --runroot, short (common/daemons/log_paths.h podman_run_dir).
std::string podman_dir(const std::string &state_dir);
// store_options: podman_store_options, for the pods' commands (not the reset).
std::vector<std::string> podman_command(const PodmanSettings &s, const std::string &dir,
                                        const std::string &run_dir,
                                        const std::vector<std::string> &store_options = {});
// Whether the node's image store's view (agent/images/store_publish.h) lists
// `image` (normalized) by its name: a job's first pod of an image the store
// holds then starts without a podman presence check. A digest reference is
// not looked up (false: the check decides).
bool store_lists(const std::string &view, const std::string &image);
// The options that make the node's image store (agent/images/image_store.h:
// its view, read through fuse-overlayfs) an additional image store of the
// job's podman; none without a store or with another storage driver than
// overlay.
std::vector<std::string> podman_store_options(const PodmanSettings &s, const std::string &view,
                                              const std::string &mount_program);
std::vector<std::pair<std::string, std::string>> podman_environment(const std::string &dir,
                                                                    const std::string &path);
// Makes the directories podman_dir/podman_environment name (0700), and
// run_dir with its parent: each must then be a directory of this user's
// own that nobody else may enter, not a symlink (another user may have made
// the parent in /tmp first: refused, the message says what to remove).
Status make_podman_dirs(const std::string &dir, const std::string &run_dir);

// The images the job's pods may use without a pull, as the kubelet's rule
// for images pulled with credentials has it: an image pulled without
// credentials (or found in the node's image store, which holds public images
// only: agent/images/image_store.h) by any pod; one pulled with a pod's
// credentials only by pods with those same credentials; another pod pulls
// it again with its own (the registry says yes or no; its layers are there).
class KnownImages {
  public:
    // Whether a pod with `credential` ("" = none) may start `image` now.
    bool usable(const std::string &image, const std::string &credential) const;
    // Whether the shim knows how the image came (a pull of its own, or the
    // node's store): a present image it does not know is the store's.
    bool known(const std::string &image) const { return pulled_with_.count(image) > 0; }
    void add(const std::string &image, const std::string &credential);
    void forget(const std::string &image) { pulled_with_.erase(image); }

  private:
    std::map<std::string, std::set<std::string>> pulled_with_;
};

// Where a pod's pull credentials (PodRun::pull_auth) are kept for podman's
// --authfile: <pod_dir>/pull-auth.json, mode 0600.
std::string pull_auth_path(const std::string &pod_dir);

// The podman container's name for a pod's container: as a kubelet names its
// containers for docker, k8s_<container>_<pod>_<namespace>_<uid>.
std::string podman_container_name(const std::string &container, const std::string &pod,
                                  const std::string &ns, const std::string &uid);

// Whether a variable of the container's must be passed with its value on
// podman's command line (--env NAME=VALUE) instead of through podman's own
// environment (--env NAME): the names podman_environment sets and those
// that steer podman itself (CONTAINERS_*, PODMAN_*, XDG_*, LD_*, TMPDIR).
bool podman_env_by_value(const std::string &name);
// The environment of a podman command for container c: the tool's, and
// the container's variables podman passes by name.
std::vector<std::pair<std::string, std::string>> podman_process_env(const ContainerPlan &c);

// Command lines (pure; `c` a container of the podman runtime).
std::vector<std::string> podman_exists_argv(const ImageRun &r);
std::vector<std::string> podman_pull_argv(const ImageRun &r);
// `podman run`, wrapped in `helper --podman-main` (podman_main below). Of
// the control devices, those that exist on the node are passed.
std::vector<std::string> podman_run_argv(const ContainerPlan &c, const std::string &helper);
std::vector<std::string> podman_exec_argv(const ImageRun &r, const std::vector<std::string> &cmd,
                                          bool interactive, bool tty);
std::vector<std::string> podman_rm_argv(const ImageRun &r);
std::vector<std::string> podman_reset_argv(const std::vector<std::string> &podman);

// What a container wrote to its terminationMessagePath: its first 4096
// bytes, a longer file truncated as the kubelet truncates it (hence not
// common/fs.h read_file, which refuses a longer file); the file at `path`
// not followed when it is a symlink; "" when none.
std::string read_termination_message(const std::string &path);
// The kubelet's pull back-off: 10 s, doubled at each failure, at most 300 s.
int64_t pull_backoff_ms(int failures);

constexpr const char kPodmanMain[] = "--podman-main";
// `slurm-k8s-shim --podman-main NAME N -- ARGV...`: runs ARGV (`podman ...
// run ...`, its first N words the podman program and global options) in a
// process group of its own; SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and
// SIGUSR2 become `ARGV[0..N) kill --signal SIG NAME`. Exits with ARGV's exit
// code (128+signal when it was killed), 128 when it cannot start it.
int podman_main(int argc, char **argv);

// The job's podman state removed at the shim's end: `podman system reset`
// of podman_dir (it removes the storage, which the job's user alone could
// not: files of the containers' mapped uids, and ends podman's pause
// process), bounded in time (killed after 20 s), once more when the
// plugin's SIGTERM to the shim's process group ended it before it ran
// (three tries), then what it left of podman's run directory; logged. How
// long the job's end waits for it at most: kPodmanResetMs in podman.cc.
class PodmanReset {
  public:
    PodmanReset(uv_loop_t *loop, const PodmanSettings &podman, std::string state_dir,
                std::string run_dir)
        : loop_(loop),
          podman_(podman),
          state_dir_(std::move(state_dir)),
          run_dir_(std::move(run_dir)) {}
    // Starts it when a pod used podman's storage (done() once it ended and
    // its output was read); false: nothing to reset, or it ran already.
    bool start(std::function<void()> done);
    bool running() const { return proc_ || err_; }

  private:
    bool spawn();
    void ended();  // its exit seen and its stderr read

    uv_loop_t *loop_;
    const PodmanSettings &podman_;
    std::string state_dir_, run_dir_;
    std::function<void()> done_;
    Process proc_;
    Pipe err_;
    Timer timer_;
    std::string output_;
    bool started_ = false, exited_ = false;
    int64_t status_ = 0;
    int tries_ = 0;
};

}  // namespace sk::shim
