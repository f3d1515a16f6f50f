// Container runtime templates (pure). Admins map image patterns to a command
// template, e.g. in runtime.conf:
//
//   template = docker.io/* apptainer exec --nv docker://{image} {command}
//
// The pattern is an fnmatch(3) glob over the container's image; the first
// matching line wins. The template is split on spaces; a word "{command}"
// becomes the container's command+args (zero or more words), "{image}" and
// "{name}" are replaced inside any word, and a word "{mounts:FLAG}" becomes
// FLAG SOURCE:TARGET (":ro" added when read-only) for each of the
// container's volumeMounts, the form apptainer's --bind, podman's -v and
// enroot's --mount take: the runtime then mounts them in its container, and
// the shim makes no mount namespace of its own for that container
// (k8s-shim/mount_ns.h; without {mounts:...} it does, around the runtime's
// process). A word "{cdi:FLAG}" becomes FLAG NAME for each of the
// container's GPUs as the node's CDI specification names it
// ("--device nvidia.com/gpu=0", k8s-shim/cdi.h), nothing when it has no GPU
// or a GPU no specification names (pod_prepare fills it once its GPUs are
// known). Without a matching template the
// process runtime runs command+args directly, and a container without a
// command is refused (there is no image to take an entrypoint from).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "k8s-shim/mount_ns.h"

namespace sk::shim {

// Puts FLAG NAME for each of `names` at each slot expand() recorded (the
// slots' positions in argv, ascending).
void fill_cdi_slots(std::vector<std::string> *argv,
                    const std::vector<std::pair<size_t, std::string>> &slots,
                    const std::vector<std::string> &names);

struct RuntimeTemplate {
    std::string pattern;
    std::vector<std::string> words;
    // A `podman = PATTERN` line: the image runs through the shim's own
    // podman runtime (k8s-shim/podman.h), not through words.
    bool podman = false;
};

// How the podman runtime runs (runtime.conf keys podman_*, insecure_registry,
// gpu_*; k8s-shim/podman.h says what it does with them).
struct PodmanSettings {
    std::string binary = "podman";
    std::string storage_driver = "overlay";
    std::string oci_runtime = "runc";
    std::vector<std::string> options;              // more global options, as given
    std::vector<std::string> insecure_registries;  // HOST[:PORT] pulled over plain HTTP
    // The device node of GPU {index} (an index of the job's GPUs, as
    // CUDA_VISIBLE_DEVICES names them), and the control devices a CUDA
    // process needs (those that exist are passed).
    std::string gpu_device = "/dev/nvidia{index}";
    std::vector<std::string> gpu_control_devices = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                                    "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};
};

class RuntimeTemplates {
  public:
    // Parses runtime.conf text (key = value lines, '#' comments); keys:
    // template and podman (repeatable, in the order matched), podman_binary,
    // podman_storage_driver, podman_oci_runtime, podman_option (repeatable),
    // insecure_registry (repeatable), gpu_device, gpu_control_devices.
    // Unknown keys are errors naming the line.
    static Result<RuntimeTemplates> parse(std::string_view text, std::string_view source);
    Status add(const std::string &value, const std::string &where);

    const RuntimeTemplate *match(const std::string &image) const;
    // argv for `command` run from `image` through template t, with `mounts`
    // for a {mounts:FLAG} word.
    // A {cdi:FLAG} word expands to nothing here: its position in the result
    // and FLAG go to cdi_slots, for fill_cdi_slots.
    static std::vector<std::string> expand(
        const RuntimeTemplate &t, const std::string &image, const std::string &name,
        const std::vector<std::string> &command, const std::vector<BindMount> &mounts = {},
        std::vector<std::pair<size_t, std::string>> *cdi_slots = nullptr);
    // Whether t passes the mounts to the runtime ({mounts:FLAG}).
    static bool passes_mounts(const RuntimeTemplate &t);
    size_t size() const { return templates_.size(); }
    const PodmanSettings &podman() const { return podman_; }
    bool uses_podman() const;

  private:
    std::vector<RuntimeTemplate> templates_;
    PodmanSettings podman_;
};

}  // namespace sk::shim
