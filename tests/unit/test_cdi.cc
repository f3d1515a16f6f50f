// k8s-shim/cdi: CDI specifications (YAML as nvidia-ctk writes them, JSON),
// which device is a lent GPU (by its device node, else by its index; whole
// GPUs only), names' forms (index, UUID, MIG, all), a bad file skipped and
// named, and the podman arguments of a container given CDI devices (and a
// terminal).
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "k8s-shim/cdi.h"
#include "k8s-shim/pod_plan.h"
#include "k8s-shim/podman.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

static const char *kNvidiaYaml = R"(---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
- name: "0:1"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
    - path: /dev/nvidia-caps/nvidia-cap12
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
    - path: /dev/nvidia1
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05
    options: [ro, nosuid, nodev, bind]
)";

START_TEST(yaml_spec_and_whole_gpus) {
    auto devs = parse_cdi_spec(kNvidiaYaml);
    ck_assert_msg(devs.ok(), "%s", devs.ok() ? "" : devs.message().c_str());
    ck_assert_uint_eq(devs->size(), 4);
    ck_assert_sstr_eq((*devs)[0].qualified(), "nvidia.com/gpu=0");
    ck_assert_sstr_eq((*devs)[1].device_nodes[0], "/dev/nvidia1");
    // By its device node: GPU 1 is the UUID-named device; never the MIG
    // device or "all", though they list /dev/nvidia0 too.
    ck_assert_sstr_eq(cdi_gpu_for(*devs, "/dev/nvidia{index}", 0), "nvidia.com/gpu=0");
    ck_assert_sstr_eq(cdi_gpu_for(*devs, "/dev/nvidia{index}", 1),
                      "nvidia.com/gpu=GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c");
    ck_assert_sstr_eq(cdi_gpu_for(*devs, "/dev/nvidia{index}", 2), "");
    // The node's devices elsewhere (gres.conf File=): a device named by the
    // index is taken when no device node matches.
    ck_assert_sstr_eq(cdi_gpu_for(*devs, "/opt/dev/nvidia{index}", 0), "nvidia.com/gpu=0");
}
END_TEST

START_TEST(json_spec_with_host_paths) {
    auto devs = parse_cdi_spec(R"({"cdiVersion":"0.6.0","kind":"nvidia.com/gpu","devices":[
        {"name":"2","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia2","hostPath":"/srv/dev/nvidia2"}]}}]})");
    ck_assert(devs.ok());
    ck_assert_sstr_eq(cdi_gpu_for(*devs, "/srv/dev/nvidia{index}", 2), "nvidia.com/gpu=2");
    // Another kind is not a GPU.
    auto other = parse_cdi_spec(R"({"kind":"vendor.com/fpga","devices":[{"name":"0"}]})");
    ck_assert(other.ok());
    ck_assert_sstr_eq(cdi_gpu_for(*other, "/dev/nvidia{index}", 0), "");
    for (const char *bad :
         {"kind: nvidia.com/gpu\n", "devices: []\n", "[1, 2]", "kind: x\ndevices: []\n",
          "kind: a/b\ndevices:\n- containerEdits: {}\n", "{not yaml"}) {
        auto r = parse_cdi_spec(bad);
        ck_assert_msg(!r.ok() && r.error() == Error::Invalid, "accepted %s", bad);
    }
}
END_TEST

START_TEST(name_forms) {
    ck_assert(cdi_name_form("0") == CdiNameForm::Index);
    ck_assert(cdi_name_form("12") == CdiNameForm::Index);
    ck_assert(cdi_name_form("GPU-4cf8db2d") == CdiNameForm::Uuid);
    ck_assert(cdi_name_form("0:1") == CdiNameForm::Mig);
    ck_assert(cdi_name_form("MIG-aa11") == CdiNameForm::Mig);
    ck_assert(cdi_name_form("all") == CdiNameForm::All);
    ck_assert(cdi_name_form("0:") == CdiNameForm::Other);
    ck_assert(cdi_name_form("") == CdiNameForm::Other);
}
END_TEST

START_TEST(specs_loaded_from_dirs) {
    std::string dir = sk_test_tmpdir("/tmp/sk-cdi-XXXXXX");
    std::ofstream(dir + "/nvidia.yaml") << kNvidiaYaml;
    std::ofstream(dir + "/broken.json") << "{\"kind\": 3}";
    std::ofstream(dir + "/notes.txt") << "not a spec";
    std::vector<std::string> errors;
    auto devs = load_cdi_devices({dir, dir + "/missing"}, &errors);
    ck_assert_uint_eq(devs.size(), 4);
    ck_assert_uint_eq(errors.size(), 1);
    ck_assert(errors[0].find("broken.json") != std::string::npos);
}
END_TEST

// podman run gets the CDI names instead of the device nodes.
START_TEST(podman_gets_cdi_devices) {
    ContainerPlan c;
    c.name = "svc";
    c.gpu_indices = {3};
    ImageRun r;
    r.podman = {"podman"};
    r.name = "k8s_svc";
    r.image = "registry.site/x:1";
    r.gpu_device = "/dev/nvidia{index}";
    r.gpu_control_devices = {"/dev/null"};
    r.cdi_devices = {"nvidia.com/gpu=3"};
    c.image_run = r;
    std::string line;
    for (const auto &w : podman_run_argv(c, "/shim"))
        line += w + " ";
    ck_assert_msg(line.find("--device nvidia.com/gpu=3 ") != std::string::npos, "%s", line.c_str());
    ck_assert_msg(line.find("/dev/nvidia3") == std::string::npos, "%s", line.c_str());
    ck_assert_msg(line.find("--device /dev/null") == std::string::npos, "%s", line.c_str());
    c.image_run->cdi_devices.clear();
    line.clear();
    for (const auto &w : podman_run_argv(c, "/shim"))
        line += w + " ";
    ck_assert_msg(line.find("--device /dev/nvidia3:/dev/nvidia3") != std::string::npos, "%s",
                  line.c_str());
    ck_assert_msg(line.find("--tty") == std::string::npos, "%s", line.c_str());
    // spec.tty (and stdin): podman gives the container a terminal of its own.
    c.tty = true;
    c.stdin_open = true;
    line.clear();
    for (const auto &w : podman_run_argv(c, "/shim"))
        line += w + " ";
    ck_assert_msg(line.find("--tty --interactive ") != std::string::npos, "%s", line.c_str());
}
END_TEST

int main() {
    Suite *s = suite_create("cdi");
    TCase *tc = tcase_create("cdi");
    tcase_add_test(tc, yaml_spec_and_whole_gpus);
    tcase_add_test(tc, json_spec_with_host_paths);
    tcase_add_test(tc, name_forms);
    tcase_add_test(tc, specs_loaded_from_dirs);
    tcase_add_test(tc, podman_gets_cdi_devices);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
