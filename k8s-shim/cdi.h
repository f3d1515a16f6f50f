// GPUs through CDI (the Container Device Interface: what the GPU vendor's
// tool writes for its node, e.g. `nvidia-ctk cdi generate`, in /etc/cdi or
// /var/run/cdi): where the node's specification names a lent GPU, an image
// container gets it as that CDI device (`podman run --device
// nvidia.com/gpu=NAME`), and podman applies what the specification says for
// it: its device nodes, the driver's libraries and tools (nvidia-smi) as
// mounts, environment and hooks. Without one, the container gets the GPU's
// device nodes only (runtime.conf gpu_device), as before, and the pod's
// events say so. The devices cgroup rules are the same either way.
//
// A lent GPU is the specification's device of kind nvidia.com/gpu whose
// device nodes include that GPU's (gpu_device with its index: the path, or
// hostPath when the spec gives one), else the one named by the index
// ("0"); whole GPUs only (an index or a GPU-UUID name, not a MIG device
// "0:1" / "MIG-..." nor "all").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sk::shim {

constexpr const char *kCdiGpuKind = "nvidia.com/gpu";

struct CdiDevice {
    std::string kind, name;                 // "nvidia.com/gpu", "0"
    std::vector<std::string> device_nodes;  // their node paths (hostPath, else path)
    std::string qualified() const { return kind + "=" + name; }
};

// What a CDI device name says (the CDI spec's names, as nvidia-ctk makes
// them): an index "3", a "GPU-<uuid>", a MIG device "0:1" or "MIG-<uuid>",
// or "all".
enum class CdiNameForm { Index, Uuid, Mig, All, Other };
CdiNameForm cdi_name_form(std::string_view name);

// Pure: the devices of one specification (JSON or YAML), each with its
// kind. Invalid, saying why, when the text is not one (no kind, a device
// without a name).
Result<std::vector<CdiDevice>> parse_cdi_spec(std::string_view text);

// The specifications of `dirs` (*.json, *.yaml, *.yml, at most 64 files of
// 1 MiB each; root's directories, read as the job's user); a file that cannot
// be read or parsed is named in *errors and skipped.
std::vector<CdiDevice> load_cdi_devices(const std::vector<std::string> &dirs,
                                        std::vector<std::string> *errors);
// The directories podman reads specifications from.
const std::vector<std::string> &cdi_spec_dirs();

// The qualified name of the whole-GPU device for the node's GPU `index`
// (gpu_device: its device node's pattern, "{index}" in it); "" when none.
std::string cdi_gpu_for(const std::vector<CdiDevice> &devices, const std::string &gpu_device,
                        int index);

}  // namespace sk::shim
