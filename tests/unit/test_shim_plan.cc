// Pod spec -> process plan: env order, $(VAR) expansion, init containers,
// GPU assignment, runtime templates and the isolation policy's refusals.
// Inputs include a pod recorded from a real API server (reference
// kubelet-objects/07-init-containers, with its kube-api-access volume).
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/daemons/json.h"
#include "common/fs.h"
#include "k8s-shim/pod_plan.h"
#include "k8s-shim/pod_prepare.h"
#include "k8s-shim/pod_security.h"
#include "k8s-shim/podman.h"
#include "k8s-shim/spawn.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

static const char kRecorded07[] =
    R"JSON({"metadata": {"name": "s07-init", "namespace": "kref", "uid": "be668664-adf3-4924-848a-ad51e33a4ede"}, "spec": {"containers": [{"command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"], "image": "localhost/busybox:1.35", "imagePullPolicy": "IfNotPresent", "name": "app-a", "resources": {}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access-hxpjp", "readOnly": true}]}, {"command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"], "image": "localhost/busybox:1.35", "imagePullPolicy": "IfNotPresent", "name": "app-b", "resources": {}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access-hxpjp", "readOnly": true}]}], "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "initContainers": [{"command": ["sh", "-c", "sleep 6; echo init done"], "image": "localhost/busybox:1.35", "imagePullPolicy": "IfNotPresent", "name": "init", "resources": {}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access-hxpjp", "readOnly": true}]}], "nodeName": "kubelet-peer", "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default", "serviceAccountName": "default", "terminationGracePeriodSeconds": 30, "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300}, {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}], "volumes": [{"name": "kube-api-access-hxpjp", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}, {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}}, {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}}]}}]}})JSON";

static PlanContext ctx() {
    PlanContext c;
    c.uid = 2001;
    c.gid = 2001;
    c.node_name = "slurm-n1-42";
    c.pod_dir = "/state/pods/u1";
    return c;
}

static Json::Value parse(const std::string &s) {
    auto v = json::parse(s);
    ck_assert_msg(v.ok(), "%s", v.ok() ? "" : v.message().c_str());
    return *v;
}

static std::string env_of(const ContainerPlan &c, const std::string &name) {
    for (const auto &e : c.env)
        if (e.name == name) return e.value;
    return "<unset>";
}

struct ExpandCase {
    const char *in, *out;
};
static const ExpandCase kExpand[] = {
    {"$(A)", "1"},     {"x$(A)y$(B)z", "x1y22z"},
    {"$$(A)", "$(A)"},                          // escaped
    {"$$", "$"},       {"$(NOPE)", "$(NOPE)"},  // unknown: kept literally
    {"$(A", "$(A"},                             // unclosed
    {"a$", "a$"},                               // lone trailing $
    {"$x", "$x"},      {"$()", "$()"},
    {"$$$(A)", "$1"},  {"", ""},
};
START_TEST(expand_table) {
    const auto &c = kExpand[_i];
    ck_assert_sstr_eq(expand_vars(c.in, {{"A", "1"}, {"B", "22"}}), c.out);
}
END_TEST

START_TEST(recorded_init_pod) {
    auto plan = plan_pod(parse(kRecorded07), {}, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    ck_assert_sstr_eq(plan->uid, "be668664-adf3-4924-848a-ad51e33a4ede");
    ck_assert_sstr_eq(plan->key(), "kref/s07-init");
    ck_assert_int_eq(plan->init_containers.size(), 1);
    ck_assert_int_eq(plan->containers.size(), 2);
    ck_assert_sstr_eq(plan->init_containers[0].name, "init");
    ck_assert(plan->init_containers[0].init);
    ck_assert_sstr_eq(plan->containers[0].name, "app-a");
    ck_assert_sstr_eq(plan->containers[1].name, "app-b");
    ck_assert_int_eq(plan->init_containers[0].argv.size(), 3);
    ck_assert_sstr_eq(plan->init_containers[0].argv[2], "sleep 6; echo init done");
    ck_assert(plan->restart_policy == RestartPolicy::Always);
    ck_assert_int_eq(plan->grace_s, 30);
    // The API server's kube-api-access projected volume is accepted, exposed as a directory.
    ck_assert_int_eq(plan->volumes.size(), 1);
    ck_assert_sstr_eq(env_of(plan->containers[0], "SLURM_K8S_VOLUME_KUBE_API_ACCESS_HXPJP"),
                      "/state/pods/u1/volumes/kube-api-access-hxpjp");
    ck_assert_sstr_eq(env_of(plan->containers[0], "HOSTNAME"), "slurm-n1-42");
    ck_assert_sstr_eq(env_of(plan->containers[0], "CUDA_VISIBLE_DEVICES"), "");
    ck_assert_sstr_eq(env_of(plan->containers[0], "NVIDIA_VISIBLE_DEVICES"), "void");
    ck_assert_int_eq(plan->gpus_needed(), 0);
}
END_TEST

// Probes without a host dial the pod's IP (status.podIP, which the agent
// sets to the node's InternalIP), as a kubelet does; a host of their own
// wins; no usable podIP falls back to 127.0.0.1.
START_TEST(probe_host_is_pod_ip) {
    const std::string head = R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},)J";
    const std::string spec = R"J("spec":{
      "containers":[{"name":"c","image":"x","command":["run"],
        "ports":[{"name":"http","containerPort":8080}],
        "readinessProbe":{"httpGet":{"path":"/healthz","port":"http"}},
        "livenessProbe":{"tcpSocket":{"port":8080,"host":"10.9.9.9"}},
        "startupProbe":{"tcpSocket":{"port":8080}}}]}})J";
    struct {
        const char *status, *want;
    } cases[] = {
        {R"("status":{"podIP":"127.0.1.2"},)", "127.0.1.2"},
        {R"("status":{"podIP":"fd00::7"},)", "fd00::7"},
        {"", "127.0.0.1"},
        {R"("status":{"podIP":"not an ip"},)", "127.0.0.1"},
        {R"("status":"odd",)", "127.0.0.1"},
    };
    for (const auto &k : cases) {
        auto plan = plan_pod(parse(head + k.status + spec), {}, ctx());
        ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
        const auto &c = plan->containers[0];
        ck_assert_sstr_eq(c.readiness->host, k.want);
        ck_assert_int_eq(c.readiness->port, 8080);
        ck_assert_sstr_eq(c.startup->host, k.want);
        ck_assert_sstr_eq(c.liveness->host, "10.9.9.9");
    }
}
END_TEST

START_TEST(env_order_and_expansion) {
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "containers":[{"name":"c","image":"x","command":["run","$(B)","$(C)"],"args":["$$(B)"],
        "workingDir":"/work",
        "env":[{"name":"A","value":"1"},{"name":"B","value":"$(A)-b"},{"name":"C","value":"$(D)"},
               {"name":"D","value":"4"},{"name":"PATH","value":"/opt/bin"},
               {"name":"POD","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},
               {"name":"CUDA_VISIBLE_DEVICES","value":"0,1,2,3"}]}]}})J");
    auto plan = plan_pod(pod, {}, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    const auto &c = plan->containers[0];
    // Base first (PATH replaced in place), then the container's env in order.
    std::vector<std::string> names;
    for (const auto &e : c.env)
        names.push_back(e.name);
    ck_assert_sstr_eq(names[0], "PATH");
    ck_assert_sstr_eq(env_of(c, "PATH"), "/opt/bin");
    size_t ia = 0, ib = 0, ic = 0, id = 0;
    for (size_t i = 0; i < names.size(); i++) {
        if (names[i] == "A") ia = i;
        if (names[i] == "B") ib = i;
        if (names[i] == "C") ic = i;
        if (names[i] == "D") id = i;
    }
    ck_assert(ia < ib && ib < ic && ic < id);
    ck_assert_sstr_eq(env_of(c, "B"), "1-b");
    ck_assert_sstr_eq(env_of(c, "C"), "$(D)");  // D is defined later: kept literally
    ck_assert_sstr_eq(env_of(c, "POD"), "p");
    // The user cannot widen GPU visibility: the shim's value wins.
    ck_assert_sstr_eq(env_of(c, "CUDA_VISIBLE_DEVICES"), "");
    ck_assert_int_eq(c.argv.size(), 4);
    ck_assert_sstr_eq(c.argv[1], "1-b");
    ck_assert_sstr_eq(c.argv[2], "$(D)");
    ck_assert_sstr_eq(c.argv[3], "$(B)");
    ck_assert_sstr_eq(c.working_dir, "/work");
}
END_TEST

START_TEST(gpus_are_disjoint) {
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "initContainers":[{"name":"i","image":"x","command":["true"],
                         "resources":{"limits":{"nvidia.com/gpu":"1"}}}],
      "containers":[{"name":"a","image":"x","command":["true"],"resources":{"limits":{"nvidia.com/gpu":1}}},
                    {"name":"b","image":"x","command":["true"],"resources":{"limits":{"nvidia.com/gpu":"2"},
                      "requests":{"cpu":"1","memory":"1Gi"}}},
                    {"name":"c","image":"x","command":["true"]}]}})J");
    auto plan = plan_pod(pod, {}, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    ck_assert_int_eq(plan->gpus_needed(), 3);
    assign_gpus(&*plan, {5, 6, 7});
    ck_assert_sstr_eq(env_of(plan->containers[0], "CUDA_VISIBLE_DEVICES"), "5");
    ck_assert_sstr_eq(env_of(plan->containers[1], "CUDA_VISIBLE_DEVICES"), "6,7");
    ck_assert_sstr_eq(env_of(plan->containers[1], "NVIDIA_VISIBLE_DEVICES"), "6,7");
    ck_assert_sstr_eq(env_of(plan->containers[2], "CUDA_VISIBLE_DEVICES"), "");
    ck_assert_sstr_eq(env_of(plan->containers[2], "NVIDIA_VISIBLE_DEVICES"), "void");
    ck_assert_sstr_eq(env_of(plan->init_containers[0], "CUDA_VISIBLE_DEVICES"), "5");
    ck_assert_sstr_eq(plan->containers[1].requests.at("memory"), "1Gi");
    // In an extern step whose devices cgroup opens the lent GPUs 4-7 only,
    // CUDA numbers them 0-3: the process containers' lists follow.
    assign_gpus(&*plan, {5, 6, 7}, {4, 5, 6, 7});
    ck_assert_sstr_eq(env_of(plan->containers[0], "CUDA_VISIBLE_DEVICES"), "1");
    ck_assert_sstr_eq(env_of(plan->containers[1], "CUDA_VISIBLE_DEVICES"), "2,3");
    ck_assert_sstr_eq(env_of(plan->containers[1], "NVIDIA_VISIBLE_DEVICES"), "6,7");
    ck_assert_sstr_eq(env_of(plan->containers[2], "CUDA_VISIBLE_DEVICES"), "");
    ck_assert_sstr_eq(env_of(plan->init_containers[0], "CUDA_VISIBLE_DEVICES"), "1");
}
END_TEST

// prepare_pod, the plan finished in one pass: the GPUs taken for what the
// pod needs and spread (CUDA numbering the job's pool), the pull credentials
// on its image pulls, each supervisor's cgroup request (agent socket, pod,
// its GPUs, container); a refused spec takes no GPU, a refusal of the lease
// says OutOfnvidia.com/gpu.
START_TEST(prepare_pod_in_one_pass) {
    proto::PodRun run;
    run.uid = "u1";
    run.pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "containers":[{"name":"a","image":"x","command":["true"],"resources":{"limits":{"nvidia.com/gpu":1}}},
                    {"name":"b","image":"x","command":["true"]}]}})J");
    PodSetup setup;
    setup.plan = ctx();
    setup.cuda_pool = {4, 5, 6, 7};
    setup.cgroup_socket = "/run/agent.sock";
    setup.job_id = 42;
    int taken = 0, given_back = 0, asked = -1;
    GpuLease lease;
    lease.take = [&](int n) -> Result<std::vector<int>> {
        asked = n;
        taken++;
        return std::vector<int>{6};
    };
    lease.give_back = [&] { given_back++; };
    std::string why;
    auto prepared = prepare_pod(run, setup, lease, &why);
    ck_assert_msg(prepared.ok(), "%s", prepared.ok() ? "" : prepared.message().c_str());
    ck_assert_int_eq(asked, 1);
    ck_assert_int_eq(taken, 1);
    ck_assert_int_eq(given_back, 0);
    ck_assert_uint_eq(prepared->gpus.size(), 1);
    const auto &a = prepared->plan.containers[0];
    ck_assert_sstr_eq(env_of(a, "NVIDIA_VISIBLE_DEVICES"), "6");
    ck_assert_sstr_eq(env_of(a, "CUDA_VISIBLE_DEVICES"), "2");
    ck_assert_sstr_eq(a.cgroup_request, "/run/agent.sock\nu1\n6\na");
    ck_assert_sstr_eq(a.cgroup_pod_uid, "u1");
    ck_assert_int_eq(a.cgroup_job_id, 42);
    ck_assert_sstr_eq(prepared->plan.containers[1].cgroup_request, "/run/agent.sock\nu1\n6\nb");
    ck_assert_sstr_eq(env_of(prepared->plan.containers[1], "NVIDIA_VISIBLE_DEVICES"), "void");
    // Without pod cgroups, no request.
    setup.cgroup_socket.clear();
    prepared = prepare_pod(run, setup, lease, &why);
    ck_assert(prepared.ok() && prepared->plan.containers[0].cgroup_request.empty());
    // The lease refuses: the reason the status gives.
    lease.take = [&](int) -> Result<std::vector<int>> {
        return fail(Error::Refused, "1 nvidia.com/gpu asked, 0 free");
    };
    prepared = prepare_pod(run, setup, lease, &why);
    ck_assert(!prepared.ok());
    ck_assert_sstr_eq(why, "OutOfnvidia.com/gpu");
    // A spec without containers: InvalidPodSpec, no GPU taken.
    taken = 0;
    run.pod["spec"]["containers"] = Json::Value(Json::arrayValue);
    prepared = prepare_pod(run, setup, lease, &why);
    ck_assert(!prepared.ok());
    ck_assert_sstr_eq(why, "InvalidPodSpec");
    ck_assert_int_eq(taken, 0);
}
END_TEST

// The node's other GPUs' device nodes, as a process container's view leaves
// them out: the entries of the pattern's directory with another index (not
// the control devices, not a name that only starts like one).
START_TEST(other_gpus_hidden) {
    char tmpl[] = "/tmp/sk-gpudev-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    std::string dir = tmpl;
    for (const char *n : {"nvidia0", "nvidia1", "nvidia2", "nvidia12", "nvidiactl", "nvidia-uvm",
                          "nvidia3x", "other"}) {
        FILE *f = fopen((dir + "/" + n).c_str(), "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
    }
    const std::string pattern = dir + "/nvidia{index}";
    auto hidden = other_gpu_devices(pattern, {1});
    ck_assert_uint_eq(hidden.size(), 3);
    ck_assert_sstr_eq(hidden[0], dir + "/nvidia0");
    ck_assert_sstr_eq(hidden[1], dir + "/nvidia12");
    ck_assert_sstr_eq(hidden[2], dir + "/nvidia2");
    ck_assert_uint_eq(other_gpu_devices(pattern, {}).size(), 4);  // no GPU: none of them
    ck_assert(other_gpu_devices(dir + "/none/nvidia{index}", {}).empty());
    ck_assert(other_gpu_devices(dir + "/{index}/dev", {}).empty());  // index not in the name
    // Process containers get them; an image container has its own devices.
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "containers":[{"name":"a","image":"x","command":["true"],"resources":{"limits":{"nvidia.com/gpu":1}}},
                    {"name":"b","image":"x","command":["true"]}]}})J");
    auto plan = plan_pod(pod, {}, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    assign_gpus(&*plan, {2});
    hide_other_gpus(&*plan, pattern);
    ck_assert_uint_eq(plan->containers[0].hidden_devices.size(), 3);  // 0, 1, 12
    ck_assert_sstr_eq(plan->containers[0].hidden_devices[1], dir + "/nvidia1");
    ck_assert_uint_eq(plan->containers[1].hidden_devices.size(), 4);
    ck_assert(plan->containers[0].own_mounts());
    for (const char *n : {"nvidia0", "nvidia1", "nvidia2", "nvidia12", "nvidiactl", "nvidia-uvm",
                          "nvidia3x", "other"})
        unlink((dir + "/" + n).c_str());
    rmdir(dir.c_str());
}
END_TEST

START_TEST(runtime_template_and_missing_command) {
    auto t = RuntimeTemplates::parse(
        "# comment\ntemplate = docker.io/* apptainer exec --nv docker://{image} {command}\n"
        "template = *.sqsh enroot start {image} {command}\n",
        "runtime.conf");
    ck_assert_msg(t.ok(), "%s", t.ok() ? "" : t.message().c_str());
    PlanContext c = ctx();
    c.templates = &*t;
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{"containers":[
      {"name":"a","image":"docker.io/vllm/vllm:1","command":["serve"],"args":["--port","80"]},
      {"name":"b","image":"docker.io/nginx"}]}})J");
    auto plan = plan_pod(pod, {}, c);
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    const auto &a = plan->containers[0].argv;
    ck_assert_int_eq(a.size(), 7);
    ck_assert_sstr_eq(a[0], "apptainer");
    ck_assert_sstr_eq(a[3], "docker://docker.io/vllm/vllm:1");
    ck_assert_sstr_eq(a[4], "serve");
    ck_assert_sstr_eq(a[6], "80");
    ck_assert_int_eq(plan->containers[1].argv.size(), 4);  // no command: the image's entrypoint
    // Without a template, a container with no command is refused.
    auto plain = plan_pod(pod, {}, ctx());
    ck_assert(!plain.ok());
    ck_assert(plain.error() == Error::Refused);
    ck_assert(plain.message().find("container b has no command") != std::string::npos);
    ck_assert(!RuntimeTemplates::parse("template = onlypattern\n", "x").ok());
    ck_assert(!RuntimeTemplates::parse("runtime = x\n", "x").ok());
}
END_TEST

// {mounts:FLAG}: the runtime gets the container's volumeMounts (FLAG
// SOURCE:TARGET[:ro] each) and mounts them; without it the shim mounts them
// around the runtime's process.
START_TEST(runtime_template_mounts) {
    auto t = RuntimeTemplates::parse(
        "template = docker.io/* apptainer exec {mounts:--bind} docker://{image} {command}\n"
        "template = local/* wrap {image} {command}\n",
        "runtime.conf");
    ck_assert_msg(t.ok(), "%s", t.ok() ? "" : t.message().c_str());
    PlanContext c = ctx();
    c.templates = &*t;
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "volumes":[{"name":"m","emptyDir":{}},{"name":"c","configMap":{"name":"x"}}],
      "containers":[
      {"name":"a","image":"docker.io/x","command":["run"],"volumeMounts":[
        {"name":"m","mountPath":"/models"},{"name":"c","mountPath":"/etc/c"}]},
      {"name":"b","image":"local/y","command":["run"],"volumeMounts":[
        {"name":"m","mountPath":"/models"}]}]}})J");
    auto plan = plan_pod(pod, {}, c);
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    std::vector<std::string> want = {"apptainer",
                                     "exec",
                                     "--bind",
                                     "/state/pods/u1/volumes/m:/models",
                                     "--bind",
                                     "/state/pods/u1/volumes/c:/etc/c:ro",
                                     "docker://docker.io/x",
                                     "run"};
    ck_assert(plan->containers[0].argv == want);
    ck_assert(!plan->containers[0].own_mounts());  // the runtime mounts them
    ck_assert(plan->containers[1].own_mounts());   // the shim mounts them around `wrap`
    ck_assert_uint_eq(plan->containers[1].argv.size(), 3);
}
END_TEST

// {cdi:FLAG}: nothing at planning (the GPUs are not known), its place kept;
// FLAG NAME per CDI name once they are, nothing without.
START_TEST(runtime_template_cdi) {
    auto t = RuntimeTemplates::parse(
        "template = docker.io/* apptainer exec --oci {cdi:--device} docker://{image} {command}\n",
        "runtime.conf");
    ck_assert(t.ok());
    PlanContext c = ctx();
    c.templates = &*t;
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "containers":[{"name":"a","image":"docker.io/x","command":["run","{cdi:--device}"]}]}})J");
    auto plan = plan_pod(pod, {}, c);
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    auto &a = plan->containers[0];
    ck_assert_uint_eq(a.cdi_slots.size(), 1);  // the template's word, not the command's
    ck_assert_uint_eq(a.cdi_slots[0].first, 3);
    auto argv = a.argv;
    fill_cdi_slots(&argv, a.cdi_slots, {"nvidia.com/gpu=0", "nvidia.com/gpu=GPU-1"});
    std::vector<std::string> want = {"apptainer",
                                     "exec",
                                     "--oci",
                                     "--device",
                                     "nvidia.com/gpu=0",
                                     "--device",
                                     "nvidia.com/gpu=GPU-1",
                                     "docker://docker.io/x",
                                     "run",
                                     "{cdi:--device}"};
    ck_assert(argv == want);
    argv = a.argv;
    fill_cdi_slots(&argv, a.cdi_slots, {});
    ck_assert_uint_eq(argv.size(), 6);
}
END_TEST

// The podman runtime (k8s-shim/podman.h): runtime.conf's keys, a
// kubelet's image names and pull policies, and the `podman run` command line
// a container becomes: command as --entrypoint, args after the image, the
// environment by name (values off the command line, but for the names that
// steer podman), volumes, only its own GPUs' devices (numbered from 0 for
// CUDA), the pod's securityContext for podman to apply.
START_TEST(podman_runtime_plan) {
    auto t = RuntimeTemplates::parse(
        "podman = registry.site/*\ninsecure_registry = registry.site\n"
        "podman_option = --log-level error\ngpu_device = /fake/nvidia{index}\n"
        "gpu_control_devices = /dev/null /nonexistent-ctl\n",
        "runtime.conf");
    ck_assert_msg(t.ok(), "%s", t.ok() ? "" : t.message().c_str());
    ck_assert(t->uses_podman());
    PlanContext c = ctx();
    c.templates = &*t;
    c.podman_dir = "/state/podman";
    c.podman_run_dir = "/tmp/sk-podman-2001/42_n1";
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "volumes":[{"name":"m","emptyDir":{}},{"name":"c","configMap":{"name":"x"}}],
      "containers":[
      {"name":"svc","image":"registry.site/vllm:1","args":["--port","$(PORT)"],
       "env":[{"name":"PORT","value":"80"},{"name":"HOME","value":"/h"}],
       "resources":{"limits":{"nvidia.com/gpu":"2"}},
       "securityContext":{"allowPrivilegeEscalation":false,"seccompProfile":{"type":"RuntimeDefault"},
                          "readOnlyRootFilesystem":true},
       "volumeMounts":[{"name":"m","mountPath":"/models"},{"name":"c","mountPath":"/etc/c"}]},
      {"name":"cmd","image":"registry.site/r:latest","command":["serve","x y"],"workingDir":"/w"}]}})J");
    auto plan = plan_pod(pod, {}, c);
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    assign_gpus(&*plan, {5, 7});
    const ContainerPlan &svc = plan->containers[0];
    ck_assert(svc.image_run.has_value());
    ck_assert(!svc.own_mounts());   // podman mounts them
    ck_assert(!svc.confine.any());  // podman applies it, inside the container
    ck_assert_sstr_eq(svc.image_run->pull_policy, "IfNotPresent");
    ck_assert_sstr_eq(env_of(svc, "CUDA_VISIBLE_DEVICES"), "0,1");
    ck_assert_sstr_eq(env_of(svc, "NVIDIA_VISIBLE_DEVICES"), "5,7");
    ck_assert_sstr_eq(env_of(svc, "PATH"), "<unset>");  // the image's
    auto argv = podman_run_argv(svc, "/shim");
    auto joined = [](const std::vector<std::string> &v) {
        std::string out;
        for (const auto &w : v)
            out += (out.empty() ? "" : " ") + w;
        return out;
    };
    std::string line = joined(argv);
    auto has = [&line](const std::string &part) {
        ck_assert_msg(line.find(part) != std::string::npos, "'%s' not in: %s", part.c_str(),
                      line.c_str());
    };
    ck_assert_sstr_eq(argv[0], "/shim");
    ck_assert_sstr_eq(argv[1], "--podman-main");
    ck_assert_sstr_eq(argv[2], "k8s_svc_p_ns_u1");
    // the podman program and its global options: 15 words + podman_option's 2
    ck_assert_sstr_eq(argv[3], "17");
    ck_assert_sstr_eq(argv[5], "podman");
    ck_assert_sstr_eq(argv[4 + 17 + 1], "run");
    has("--root /state/podman/storage --runroot /tmp/sk-podman-2001/42_n1 --tmpdir "
        "/state/podman/tmp");
    has("--log-level error run --name k8s_svc_p_ns_u1 --replace --rm --pull=never "
        "--userns=keep-id --network=host --log-driver=none");
    has("--hostname slurm-n1-42 --user 2001:2001 --security-opt=no-new-privileges");
    ck_assert(line.find("seccomp=unconfined") == std::string::npos);
    has("--read-only --read-only-tmpfs=false");  // readOnlyRootFilesystem, no tmpfs added
    has("--env PORT --env HOME=/h");             // HOME steers podman: by value
    has("--volume /state/pods/u1/volumes/m:/models --volume /state/pods/u1/volumes/c:/etc/c:ro");
    has("--device /fake/nvidia5:/dev/nvidia5 --device /fake/nvidia7:/dev/nvidia7 "
        "--device /dev/null registry.site/vllm:1 --port 80");
    ck_assert(line.find("nonexistent-ctl") == std::string::npos);
    ck_assert(line.find("--entrypoint") == std::string::npos);  // the image's
    bool home_in_env = false;
    for (const auto &[name, value] : podman_process_env(svc)) {
        if (name == "HOME") home_in_env = value == "/state/podman/home";
        ck_assert(name != "HOME" || value != "/h");
    }
    ck_assert(home_in_env);

    const ContainerPlan &cmd = plan->containers[1];
    ck_assert_sstr_eq(cmd.image_run->pull_policy, "Always");  // :latest
    line = joined(podman_run_argv(cmd, "/shim"));
    has("--workdir /w");
    has("--security-opt=seccomp=unconfined --env");
    has(R"(--entrypoint=["serve","x y"] registry.site/r:latest)");
    ck_assert(line.find("--device") == std::string::npos);     // no GPU, no device
    ck_assert(line.find("--read-only") == std::string::npos);  // a writable root
    ck_assert_sstr_eq(env_of(cmd, "CUDA_VISIBLE_DEVICES"), "");
    line = joined(podman_exec_argv(*cmd.image_run, {"cat", "/x"}, true, false));
    has("podman --root");
    has("exec --interactive k8s_cmd_p_ns_u1 cat /x");
    line = joined(podman_pull_argv(*cmd.image_run));
    has("pull --quiet --tls-verify=false registry.site/r:latest");

    // Bad values say what is wanted.
    for (const char *bad : {"podman = a b\n", "insecure_registry = http://x/\n",
                            "gpu_device = /dev/nvidia\n", "gpu_control_devices = dev/x\n"}) {
        auto r = RuntimeTemplates::parse(bad, "runtime.conf");
        ck_assert_msg(!r.ok(), "accepted: %s", bad);
    }
    // A bad pull policy; a mountPath podman cannot take.
    auto bad = plan_pod(parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "containers":[{"name":"a","image":"registry.site/x:1","imagePullPolicy":"Sometimes"}]}})J"),
                        {}, c);
    ck_assert(!bad.ok() && bad.message().find("imagePullPolicy must be") != std::string::npos);
    bad = plan_pod(parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "volumes":[{"name":"m","emptyDir":{}}],
      "containers":[{"name":"a","image":"registry.site/x:1",
                     "volumeMounts":[{"name":"m","mountPath":"/a:b"}]}]}})J"),
                   {}, c);
    ck_assert(!bad.ok() && bad.message().find("holding ':' or ','") != std::string::npos);
}
END_TEST

struct ImageCase {
    const char *image, *normalized, *policy;
};
static const ImageCase kImages[] = {
    {"busybox", "docker.io/library/busybox", "Always"},
    {"busybox:1.36", "docker.io/library/busybox:1.36", "IfNotPresent"},
    {"vllm/vllm-openai:latest", "docker.io/vllm/vllm-openai:latest", "Always"},
    {"localhost/x:1", "localhost/x:1", "IfNotPresent"},
    {"127.0.0.1:5000/e2e/x", "127.0.0.1:5000/e2e/x", "Always"},
    {"127.0.0.1:5000/e2e/x:2", "127.0.0.1:5000/e2e/x:2", "IfNotPresent"},
    {"reg.site/x@sha256:ab", "reg.site/x@sha256:ab", "IfNotPresent"},
};
START_TEST(image_names_and_policies) {
    const auto &c = kImages[_i];
    ck_assert_sstr_eq(normalize_image(c.image), c.normalized);
    ck_assert_sstr_eq(default_pull_policy(c.image), c.policy);
}
END_TEST

// The kubelet's rule for images pulled with credentials, within a job: an
// image pulled without any (or found in the node's store) serves every pod;
// one pulled with a pod's credentials serves pods with the same ones only.
START_TEST(known_images_by_credentials) {
    KnownImages k;
    ck_assert(!k.usable("r/a:1", ""));
    ck_assert(!k.known("r/a:1"));
    k.add("r/private:1", "{\"auths\":{\"r\":{\"auth\":\"eDp5\"}}}");
    ck_assert(k.known("r/private:1"));
    ck_assert(k.usable("r/private:1", "{\"auths\":{\"r\":{\"auth\":\"eDp5\"}}}"));
    ck_assert(!k.usable("r/private:1", ""));
    ck_assert(!k.usable("r/private:1", "{\"auths\":{\"r\":{\"auth\":\"other\"}}}"));
    k.add("r/private:1", "");  // then pulled anonymously: public after all
    ck_assert(k.usable("r/private:1", "anything"));
    k.forget("r/private:1");
    ck_assert(!k.known("r/private:1"));
    // The node's store: an additional image store of overlay podman only.
    PodmanSettings ps;
    ps.storage_driver = "overlay";
    auto o = podman_store_options(ps, "/var/lib/sk/images/view", "/usr/bin/fuse-overlayfs");
    ck_assert_uint_eq(o.size(), 4);
    ck_assert_sstr_eq(o[1], "overlay.imagestore=/var/lib/sk/images/view");
    ck_assert_sstr_eq(o[3], "overlay.mount_program=/usr/bin/fuse-overlayfs");
    auto cmd = podman_command(ps, "/s/podman", "/tmp/r", o);
    ck_assert(std::find(cmd.begin(), cmd.end(), o[1]) != cmd.end());
    ck_assert(podman_store_options(ps, "", "/usr/bin/fuse-overlayfs").empty());
    ps.storage_driver = "vfs";
    ck_assert(podman_store_options(ps, "/v", "/usr/bin/fuse-overlayfs").empty());
    // The store's view lists its images by name: a job's first pod of one
    // needs no presence check; a tag the view names only as a prefix, or a
    // digest reference, is not taken for listed.
    char tmpl[] = "/tmp/sk-view-XXXXXX";
    ck_assert(mkdtemp(tmpl));
    std::string view = tmpl;
    ck_assert(mkdir((view + "/overlay-images").c_str(), 0755) == 0);
    ck_assert(
        write_file_atomic(
            view + "/overlay-images/images.json",
            R"([{"id":"ab","names":["r.io/e2e/big:1","docker.io/library/busybox:latest","r.io/x:10"]}])",
            0644)
            .ok());
    ck_assert(store_lists(view, "r.io/e2e/big:1"));
    ck_assert(store_lists(view, "docker.io/library/busybox"));  // :latest
    ck_assert(!store_lists(view, "r.io/e2e/big:10"));
    ck_assert(!store_lists(view, "r.io/e2e/big"));
    ck_assert(!store_lists(view, "r.io/x:1"));  // a name "r.io/x:10" begins with
    ck_assert(!store_lists(view, "r.io/e2e/big@sha256:00"));
    ck_assert(!store_lists("", "r.io/e2e/big:1"));
    ck_assert(!store_lists(view + "/none", "r.io/e2e/big:1"));
    ck_assert(remove_tree(view).ok());
}
END_TEST

START_TEST(pull_errors_and_backoff) {
    ck_assert_sstr_eq(pull_error("Trying to pull x...\nError: initializing source x: manifest "
                                 "unknown\n"),
                      "initializing source x: manifest unknown");
    ck_assert_sstr_eq(pull_error("only a line\n"), "only a line");
    ck_assert_sstr_eq(pull_error(""), "the pull failed without a message");
    ck_assert_int_eq(pull_backoff_ms(1), 10000);
    ck_assert_int_eq(pull_backoff_ms(2), 20000);
    ck_assert_int_eq(pull_backoff_ms(6), 300000);
    ck_assert_int_eq(pull_backoff_ms(60), 300000);
}
END_TEST

START_TEST(volume_files_decoded) {
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "volumes":[{"name":"cfg","configMap":{"name":"c"}},{"name":"scratch","emptyDir":{}}],
      "containers":[{"name":"a","image":"x","command":["true"],
                     "volumeMounts":[{"name":"cfg","mountPath":"/tmp/cfg","readOnly":true}]}]}})J");
    auto files = proto::pod_files_from_json(
        parse(R"J({"cfg":{"app.conf":"a2V5PXZhbHVlCg==","sub/x":"eA=="}})J"));
    ck_assert(files.ok());
    auto plan = plan_pod(pod, *files, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    ck_assert_sstr_eq(plan->volumes[0].files.at("app.conf"), "key=value\n");
    ck_assert_sstr_eq(plan->volumes[0].files.at("sub/x"), "x");
    ck_assert_sstr_eq(plan->mounts.at("a")[0].mount_path, "/tmp/cfg");
    auto escape = proto::pod_files_from_json(parse(R"J({"cfg":{"../escape":"eA=="}})J"));
    ck_assert(escape.ok());
    auto bad = plan_pod(pod, *escape, ctx());
    ck_assert(!bad.ok());
    ck_assert(bad.message().find("inside the volume") != std::string::npos);
}
END_TEST

// Probes and hooks as a kubelet's handlers: httpGet over HTTPS, grpc
// (port and service), postStart and preStop by exec, httpGet or sleep.
START_TEST(handlers_planned) {
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},
      "status":{"podIP":"10.1.2.3"},"spec":{"containers":[{"name":"a","command":["true"],
      "ports":[{"name":"web","containerPort":8443}],
      "readinessProbe":{"httpGet":{"port":"web","path":"healthz","scheme":"HTTPS"}},
      "livenessProbe":{"grpc":{"port":9090,"service":"api"}},
      "startupProbe":{"grpc":{"port":9090}},
      "lifecycle":{"postStart":{"httpGet":{"port":8080,"path":"/warm","host":"127.0.0.1"}},
                   "preStop":{"sleep":{"seconds":5}}}},
      {"name":"b","command":["true"],"lifecycle":{"postStart":{"exec":{"command":["touch","x"]}},
                                                 "preStop":{"exec":{"command":["drain"]}}}}]}})J");
    auto plan = plan_pod(pod, {}, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    const ContainerPlan &a = plan->containers[0], &b = plan->containers[1];
    ck_assert(a.readiness->action == ProbeAction::HttpGet && a.readiness->https);
    ck_assert_int_eq(a.readiness->port, 8443);
    ck_assert_sstr_eq(a.readiness->path, "/healthz");
    ck_assert_sstr_eq(a.readiness->host, "10.1.2.3");
    ck_assert(a.liveness->action == ProbeAction::Grpc);
    ck_assert_int_eq(a.liveness->port, 9090);
    ck_assert_sstr_eq(a.liveness->grpc_service, "api");
    ck_assert_sstr_eq(a.startup->grpc_service, "");
    ck_assert(a.post_start->action == ProbeAction::HttpGet && !a.post_start->https);
    ck_assert_sstr_eq(a.post_start->host, "127.0.0.1");
    ck_assert(a.pre_stop->action == ProbeAction::Sleep);
    ck_assert_int_eq(a.pre_stop->sleep_s, 5);
    ck_assert(b.post_start->action == ProbeAction::Exec && b.post_start->exec[0] == "touch");
    ck_assert(b.pre_stop->action == ProbeAction::Exec && b.pre_stop->exec[0] == "drain");
}
END_TEST

// Native sidecars: restartPolicy Always on an init container, its probes
// allowed; its GPUs its own, apart from the app containers' (which regular
// init containers reuse); restartPolicy elsewhere refused or invalid.
START_TEST(sidecars_planned) {
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "initContainers":[
        {"name":"proxy","command":["x"],"restartPolicy":"Always","resources":{"limits":{"nvidia.com/gpu":"1"}},
         "readinessProbe":{"exec":{"command":["true"]}},"lifecycle":{"postStart":{"sleep":{"seconds":1}}}},
        {"name":"setup","command":["x"],"resources":{"limits":{"nvidia.com/gpu":"2"}}}],
      "containers":[{"name":"a","command":["x"],"resources":{"limits":{"nvidia.com/gpu":"1"}}},
                    {"name":"b","command":["x"],"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}})J");
    auto plan = plan_pod(pod, {}, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    ck_assert(plan->init_containers[0].sidecar && !plan->init_containers[1].sidecar);
    ck_assert(plan->init_containers[0].readiness.has_value());
    ck_assert_int_eq(plan->gpus_needed(), 3);  // 1 sidecar + max(2 app, 2 init)
    assign_gpus(&*plan, {4, 5, 6});
    ck_assert(plan->init_containers[0].gpu_indices == std::vector<int>{4});
    ck_assert(plan->containers[0].gpu_indices == std::vector<int>{5});
    ck_assert(plan->containers[1].gpu_indices == std::vector<int>{6});
    ck_assert(plan->init_containers[1].gpu_indices == (std::vector<int>{5, 6}));
    auto bad = plan_pod(parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "initContainers":[{"name":"i","command":["x"],"restartPolicy":"OnFailure"}],
      "containers":[{"name":"a","command":["x"]}]}})J"),
                        {}, ctx());
    ck_assert(!bad.ok() && bad.message().find("restartPolicy must be Always") != std::string::npos);
    bad = plan_pod(parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "containers":[{"name":"a","command":["x"],"restartPolicy":"Always"}]}})J"),
                   {}, ctx());
    ck_assert(!bad.ok() && bad.error() == Error::Refused);
    bad = plan_pod(parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "initContainers":[{"name":"i","command":["x"],"readinessProbe":{"exec":{"command":["x"]}}}],
      "containers":[{"name":"a","command":["x"]}]}})J"),
                   {}, ctx());
    ck_assert(!bad.ok() && bad.message().find("but sidecars") != std::string::npos);
}
END_TEST

// hostPath and claim volumes: the node paths the agent resolved
// (pod_run's host_volumes), bound as such (never made when missing, but for
// a subPath), read-only as the agent or the mount says, exported by path.
START_TEST(host_volumes_planned) {
    auto pod = parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "volumes":[{"name":"models","persistentVolumeClaim":{"claimName":"c"}},
                 {"name":"data","hostPath":{"path":"/shared/d"}}],
      "containers":[{"name":"a","command":["true"],
                     "volumeMounts":[{"name":"models","mountPath":"/models"},
                                     {"name":"data","mountPath":"/d","subPath":"x/y"},
                                     {"name":"data","mountPath":"/ro","readOnly":true}]}]}})J");
    proto::HostVolumes host = {{"models", {"/shared/m", "/shared", "Directory", true}},
                               {"data", {"/shared/d", "/shared", "", false}}};
    auto plan = plan_pod(pod, {}, ctx(), host);
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    ck_assert(plan->volumes[0].kind == VolumeKind::Host);
    ck_assert_sstr_eq(plan->volumes[0].host.path, "/shared/m");
    const auto &b = plan->containers[0].binds;
    ck_assert_uint_eq(b.size(), 3);
    ck_assert_sstr_eq(b[0].source, "/shared/m");
    ck_assert(b[0].read_only && !b[0].make_missing);  // the claim is read-only
    ck_assert_sstr_eq(b[1].source, "/shared/d/x/y");
    ck_assert(!b[1].read_only && b[1].make_missing);  // a subPath is made
    ck_assert_sstr_eq(b[2].source, "/shared/d");
    ck_assert(b[2].read_only && !b[2].make_missing);
    bool exported = false;
    for (const auto &e : plan->containers[0].env)
        if (e.name == "SLURM_K8S_VOLUME_MODELS") exported = e.value == "/shared/m";
    ck_assert(exported);
    // A path that is not under its root, or not clean, is the agent's bug.
    for (const char *bad : {"/etc", "/shared/../etc", "/shared//m"}) {
        proto::HostVolumes h = host;
        h["models"].path = bad;
        auto r = plan_pod(pod, {}, ctx(), h);
        ck_assert_msg(!r.ok() && r.error() == Error::Invalid, "accepted %s", bad);
    }
}
END_TEST

// mountPaths are each container's own (k8s-shim/mount_ns.h): normalised,
// absolute, no ".."; two containers may put different volumes at one path,
// one container one volume per path. Each becomes a bind: the volume's
// directory (or subPath in it), read-only when asked and for file volumes.
START_TEST(mount_paths_normalised_per_container) {
    auto pod_with = [](const std::string &mounts_a, const std::string &mounts_b) {
        return parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
          "volumes":[{"name":"v1","emptyDir":{}},{"name":"v2","configMap":{"name":"m"}}],
          "containers":[{"name":"a","command":["true"],"env":[{"name":"SUB","value":"s1"}],
          "volumeMounts":)J" +
                     mounts_a + R"J(},{"name":"b","command":["true"],"volumeMounts":)J" + mounts_b +
                     "}]}}");
    };
    auto ok = plan_pod(
        pod_with(
            R"([{"name":"v1","mountPath":"//tmp/./x//"},
                     {"name":"v1","mountPath":"/data","subPathExpr":"$(SUB)/./d","readOnly":true}])",
            R"([{"name":"v2","mountPath":"/tmp/x"},{"name":"v1","mountPath":"/w","subPath":"a/b"}])"),
        {}, ctx());
    ck_assert_msg(ok.ok(), "%s", ok.ok() ? "" : ok.message().c_str());
    ck_assert_sstr_eq(ok->mounts.at("a")[0].mount_path, "/tmp/x");
    const auto &a = ok->containers[0].binds, &b = ok->containers[1].binds;
    ck_assert_uint_eq(a.size(), 2);
    ck_assert_sstr_eq(a[0].source, "/state/pods/u1/volumes/v1");
    ck_assert_sstr_eq(a[0].target, "/tmp/x");
    ck_assert(!a[0].read_only);
    ck_assert_sstr_eq(a[1].source, "/state/pods/u1/volumes/v1/s1/d");
    ck_assert_sstr_eq(a[1].target, "/data");
    ck_assert(a[1].read_only);
    ck_assert_uint_eq(b.size(), 2);
    ck_assert_sstr_eq(b[0].source, "/state/pods/u1/volumes/v2");  // another volume, same path
    ck_assert_sstr_eq(b[0].target, "/tmp/x");
    ck_assert(b[0].read_only);  // a configMap is read-only
    ck_assert_sstr_eq(b[1].source, "/state/pods/u1/volumes/v1/a/b");
    struct {
        const char *mount;
        Error code;
        const char *message_has;
    } bad[] = {
        {R"([{"name":"v1","mountPath":"tmp/x"}])", Error::Invalid, "must be an absolute path"},
        {R"([{"name":"v1","mountPath":""}])", Error::Invalid, "must be an absolute path"},
        {R"([{"name":"v1","mountPath":"/tmp/../etc"}])", Error::Invalid, "must not contain '..'"},
        {R"([{"name":"v1","mountPath":"/./"}])", Error::Invalid, "must not be '/'"},
        {R"([{"name":"v1","mountPath":"/proc"}])", Error::Invalid, "is in /proc, which the kernel"},
        {R"([{"name":"v1","mountPath":"/sys/fs/x"}])", Error::Invalid, "is in /sys"},
        {R"([{"name":"v1","mountPath":"/y"},{"name":"v2","mountPath":"/y/"}])", Error::Invalid,
         "container b mounts two volumes at /y"},
    };
    for (const auto &c : bad) {
        auto plan =
            plan_pod(pod_with(R"([{"name":"v1","mountPath":"/tmp/x"}])", c.mount), {}, ctx());
        ck_assert_msg(!plan.ok(), "accepted: %s", c.mount);
        ck_assert_msg(plan.error() == c.code, "%s: %s", c.mount, plan.failure().describe().c_str());
        ck_assert_msg(plan.message().find(c.message_has) != std::string::npos, "%s: '%s'", c.mount,
                      plan.message().c_str());
    }
}
END_TEST

struct Refusal {
    const char *spec;  // the pod's spec
    Error code;
    const char *message_has;
};
#define C1(extra) \
    "{\"containers\":[{\"name\":\"c\",\"image\":\"x\",\"command\":[\"true\"]" extra "}]}"
#define VM1(mount, vol)                   \
    "{\"volumes\":[{\"name\":\"v\"," vol  \
    "}],\"containers\":[{\"name\":\"c\"," \
    "\"command\":[\"x\"],\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/tmp/v\"" mount "}]}]}"
static const Refusal kRefusals[] = {
    {VM1(",\"subPath\":\"/a\"", "\"emptyDir\":{}"), Error::Invalid, "must be a relative path"},
    {VM1(",\"subPath\":\"a/../../b\"", "\"emptyDir\":{}"), Error::Invalid,
     "subPath 'a/../../b' must not contain '..'"},
    {VM1(",\"subPathExpr\":\"$(HOSTNAME)/..\"", "\"emptyDir\":{}"), Error::Invalid,
     "subPath 'slurm-n1-42/..' must not contain '..'"},
    {VM1(",\"subPath\":\"a\",\"subPathExpr\":\"b\"", "\"emptyDir\":{}"), Error::Invalid,
     "both subPath and subPathExpr"},
    {VM1(",\"mountPropagation\":\"HostToContainer\"", "\"emptyDir\":{}"), Error::Refused,
     "mountPropagation"},
    {VM1(",\"recursiveReadOnly\":\"Enabled\"", "\"configMap\":{\"name\":\"m\"}"), Error::Refused,
     "recursiveReadOnly"},
    {VM1(",\"mountFlags\":1", "\"emptyDir\":{}"), Error::Refused, "does not know; it cannot"},
    {C1(",\"securityContext\":{\"privileged\":true}"), Error::Refused, "privileged"},
    {C1(",\"securityContext\":{\"capabilities\":{\"add\":[\"NET_ADMIN\"]}}"), Error::Refused,
     "capabilities (NET_ADMIN)"},
    {C1(",\"securityContext\":{\"runAsUser\":0}"), Error::Refused, "runAsUser 0"},
    {C1(",\"securityContext\":{\"runAsGroup\":5}"), Error::Refused, "runAsGroup 5"},
    {"{\"securityContext\":{\"runAsUser\":1000},\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]"
     "}]}",
     Error::Refused, "runAsUser 1000"},
    {"{\"hostPID\":true,\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}", Error::Refused,
     "hostPID"},
    {"{\"hostIPC\":true,\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}", Error::Refused,
     "hostIPC"},
    {"{\"volumes\":[{\"name\":\"h\",\"hostPath\":{\"path\":\"/"
     "\"}}],\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "hostPath volume the node agent did not resolve"},
    {"{\"volumes\":[{\"name\":\"p\",\"persistentVolumeClaim\":{\"claimName\":\"x\"}}],"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "persistentVolumeClaim volume the node agent did not resolve"},
    {"{\"volumes\":[{\"name\":\"p\",\"nfs\":{\"server\":\"s\",\"path\":\"/x\"}}],"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "type this node does not support"},
    {C1(",\"resources\":{\"limits\":{\"amd.com/gpu\":\"1\"}}"), Error::Refused, "amd.com/gpu"},
    {C1(",\"volumeDevices\":[{\"name\":\"d\",\"devicePath\":\"/dev/xvda\"}]"), Error::Refused,
     "volumeDevices"},
    {"{\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}", Error::Refused, "has no command"},
    {C1(",\"readinessProbe\":{\"grpc\":{\"port\":\"http\"}}"), Error::Invalid,
     "grpc.port must be a port number"},
    {C1(",\"lifecycle\":{\"preStop\":{\"tcpSocket\":{\"port\":1}}}"), Error::Refused,
     "no tcpSocket hook"},
    {C1(",\"lifecycle\":{\"postStart\":{\"sleep\":{\"seconds\":-1}}}"), Error::Invalid,
     "sleep.seconds must be an integer >= 0"},
    {C1(",\"livenessProbe\":{\"httpGet\":{\"port\":1,\"scheme\":\"FTP\"}}"), Error::Invalid,
     "scheme must be HTTP or HTTPS"},
    {C1(",\"lifecycle\":{\"stopSignal\":\"SIGUSR1\"}"), Error::Refused, "stopSignal SIGUSR1"},
    {"{\"containers\":[]}", Error::Invalid, "no containers"},
    {"{\"restartPolicy\":\"Sometimes\",\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Invalid, "restartPolicy"},
    {"{\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]},{\"name\":\"c\",\"command\":[\"y\"]}]}",
     Error::Invalid, "used twice"},
    {C1(",\"readinessProbe\":{\"tcpSocket\":{\"port\":\"nope\"}}"), Error::Invalid, "port"},
    {C1(",\"livenessProbe\":{\"exec\":{\"command\":[\"x\"]},\"periodSeconds\":0}"), Error::Invalid,
     "periodSeconds"},
    {C1(",\"volumeMounts\":[{\"name\":\"missing\",\"mountPath\":\"/x\"}]"), Error::Invalid,
     "does not define"},
    // Volume names become directories and variable names (found by fuzz_pod_plan).
    {"{\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}},{\"name\":\"v\",\"emptyDir\":{}}],"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Invalid, "volume name 'v' is used twice"},
    {"{\"volumes\":[{\"name\":\"../up\",\"emptyDir\":{}}],"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Invalid, "must be a DNS label"},
    {C1(",\"env\":[{\"name\":\"S\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}}}"
        "]"),
     Error::Invalid, "did not resolve"},
    // Fields the shim cannot honour are refused, never ignored (k8s-shim/pod_security.h).
    {C1(",\"securityContext\":{\"readOnlyRootFilesystem\":true}"), Error::Refused,
     "readOnlyRootFilesystem"},
    {C1(",\"securityContext\":{\"seccompProfile\":{\"type\":\"Localhost\","
        "\"localhostProfile\":\"p.json\"}}"),
     Error::Refused, "Localhost seccomp profile"},
    {C1(",\"securityContext\":{\"seccompProfile\":{\"type\":\"Strict\"}}"), Error::Refused,
     "seccomp profile type 'Strict'"},
    {C1(",\"securityContext\":{\"seLinuxOptions\":{\"level\":\"s0:c1\"}}"), Error::Refused,
     "seLinuxOptions"},
    {C1(",\"securityContext\":{\"appArmorProfile\":{\"type\":\"RuntimeDefault\"}}"), Error::Refused,
     "AppArmor profile RuntimeDefault"},
    {C1(",\"securityContext\":{\"procMount\":\"Unmasked\"}"), Error::Refused, "procMount Unmasked"},
    {C1(",\"securityContext\":{\"windowsOptions\":{\"hostProcess\":true}}"), Error::Refused,
     "windowsOptions"},
    {C1(",\"securityContext\":{\"noSuchField\":1}"), Error::Refused,
     "sets noSuchField, a field this node's shim does not know"},
    {C1(",\"securityContext\":{\"runAsNonRoot\":true,\"runAsUser\":0}"), Error::Refused,
     "runAsUser 0"},
    // A value of the wrong type is not taken for "unset".
    {C1(",\"securityContext\":{\"privileged\":\"true\"}"), Error::Refused, "privileged"},
    {C1(",\"securityContext\":{\"capabilities\":{\"add\":\"SYS_ADMIN\"}}"), Error::Refused,
     "capabilities (SYS_ADMIN)"},
    {C1(",\"securityContext\":{\"seccompProfile\":\"RuntimeDefault\"}"), Error::Refused,
     "seccomp profile type ''"},
    {C1(",\"securityContext\":{\"runAsUser\":\"0\"}"), Error::Refused, "runAsUser 0"},
    {"{\"os\":\"windows\",\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}", Error::Refused,
     "Slurm nodes run Linux"},
    {C1(",\"stdin\":\"true\""), Error::Invalid, "stdin must be true or false"},
    {C1(",\"stdinOnce\":1"), Error::Invalid, "stdinOnce must be true or false"},
    {C1(",\"tty\":\"yes\""), Error::Invalid, "tty must be true or false"},
    {C1(",\"restartPolicy\":\"Always\""), Error::Refused, "sidecar"},
    {C1(",\"envFrom\":[{\"configMapRef\":{\"name\":\"c\"}}]"), Error::Refused, "envFrom"},
    {C1(",\"lifecycle\":{\"onStart\":{\"exec\":{\"command\":[\"x\"]}}}"), Error::Refused,
     "lifecycle.onStart"},
    {C1(",\"lifecycle\":{\"stopSignal\":\"SIGUSR1\"}"), Error::Refused, "lifecycle.stopSignal"},
    {C1(",\"futureField\":{}"), Error::Refused, "futureField, a field this node's shim does not"},
    {"{\"securityContext\":{\"sysctls\":[{\"name\":\"net.core.somaxconn\",\"value\":\"1024\"}]},"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "sysctls"},
    {"{\"securityContext\":{\"supplementalGroups\":[2001,4242]},"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "supplemental group 4242"},
    {"{\"securityContext\":{\"fsGroup\":4242},\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]"
     "}",
     Error::Refused, "fsGroup 4242"},
    {"{\"securityContext\":{\"supplementalGroupsPolicy\":\"Strict\"},"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "supplementalGroupsPolicy Strict"},
    {"{\"securityContext\":{\"seccompProfile\":{\"type\":\"Localhost\"}},"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "Localhost seccomp profile"},
    {"{\"hostUsers\":false,\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}", Error::Refused,
     "hostUsers"},
    {"{\"os\":{\"name\":\"windows\"},\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "os windows"},
    {"{\"activeDeadlineSeconds\":-1,\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Invalid, "activeDeadlineSeconds must be a positive integer"},
    {"{\"hostAliases\":[{\"ip\":\"10.0.0.1\",\"hostnames\":[\"db\"]}],"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "hostAliases"},
    {"{\"dnsConfig\":{\"nameservers\":[\"1.1.1.1\"]},"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "dnsConfig"},
    {"{\"hostname\":\"web-0\",\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "hostname"},
    {"{\"readinessGates\":[{\"conditionType\":\"x\"}],"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "readinessGates"},
    {"{\"runtimeClassName\":\"gvisor\",\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "runtimeClassName"},
    {"{\"ephemeralContainers\":[{\"name\":\"dbg\"}],"
     "\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}",
     Error::Refused, "ephemeralContainers"},
    {"{\"newPodField\":true,\"containers\":[{\"name\":\"c\",\"command\":[\"x\"]}]}", Error::Refused,
     "newPodField, a field this node's shim does not know"},
};
START_TEST(refusals_table) {
    const auto &c = kRefusals[_i];
    std::string pod =
        std::string("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":") +
        c.spec + "}";
    auto plan = plan_pod(parse(pod), {}, ctx());
    ck_assert_msg(!plan.ok(), "accepted: %s", c.spec);
    ck_assert_msg(plan.error() == c.code, "%s: %s", c.spec, plan.failure().describe().c_str());
    ck_assert_msg(plan.message().find(c.message_has) != std::string::npos, "%s: '%s'", c.spec,
                  plan.message().c_str());
}
END_TEST

START_TEST(allowed_security_context) {
    // runAsUser equal to the job's user, and hostNetwork, are fine.
    auto pod =
        parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u"},"spec":{"hostNetwork":true,
      "securityContext":{"runAsUser":2001,"runAsGroup":2001},
      "containers":[{"name":"c","image":"x","command":["x"],"securityContext":{"runAsUser":2001,
        "privileged":false,"capabilities":{"drop":["ALL"]}}}]}})J");
    auto plan = plan_pod(pod, {}, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
}
END_TEST

static Json::Value pod_with(const std::string &spec) {
    return parse(R"J({"metadata":{"name":"p","namespace":"ns","uid":"u"},"spec":)J" + spec + "}");
}

START_TEST(fields_without_effect_accepted) {
    // Defaults the API server fills in, scheduling fields, and fields whose
    // request the node already satisfies: accepted (k8s-shim/pod_security.cc).
    PlanContext c = ctx();
    c.groups = {2001, 3000};
    auto plan = plan_pod(pod_with(R"J({"hostNetwork":false,"dnsPolicy":"ClusterFirst",
      "enableServiceLinks":true,"shareProcessNamespace":true,"hostUsers":true,
      "os":{"name":"linux"},"nodeSelector":{"a":"b"},"imagePullSecrets":[{"name":"r"}],
      "securityContext":{"runAsNonRoot":true,"supplementalGroups":[3000],"fsGroup":2001,
        "fsGroupChangePolicy":"OnRootMismatch","supplementalGroupsPolicy":"Merge",
        "seccompProfile":{"type":"Unconfined"},"appArmorProfile":{"type":"Unconfined"}},
      "containers":[{"name":"c","image":"x","command":["x"],"imagePullPolicy":"Always",
        "stdin":false,"tty":false,"ports":[{"containerPort":80}],
        "terminationMessagePath":"/dev/termination-log",
        "resizePolicy":[{"resourceName":"cpu","restartPolicy":"NotRequired"}],
        "securityContext":{"procMount":"Default","readOnlyRootFilesystem":false,
          "allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]})J"),
                         {}, c);
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
}
END_TEST

START_TEST(stdin_planned) {
    // spec.stdin and stdinOnce reach the plan (the container's stdin pipe,
    // k8s-shim/container.cc); unset, stdin is /dev/null.
    auto plan = plan_pod(pod_with(R"J({"containers":[{"name":"a","command":["x"],"stdin":true},
      {"name":"b","command":["x"],"stdin":true,"stdinOnce":true},
      {"name":"c","command":["x"]}]})J"),
                         {}, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    ck_assert(plan->containers[0].stdin_open && !plan->containers[0].stdin_once);
    ck_assert(plan->containers[1].stdin_open && plan->containers[1].stdin_once);
    ck_assert(!plan->containers[2].stdin_open && !plan->containers[2].stdin_once);
}
END_TEST

START_TEST(volume_mounts_accepted) {
    // What a real API server sends (the kube-api-access volume, mounted
    // readOnly) and the "off" values of the mount fields.
    auto plan = plan_pod(pod_with(R"J({"volumes":[{"name":"kube-api-access-x","projected":{}},
      {"name":"scratch","emptyDir":{}}],
      "containers":[{"name":"c","command":["x"],"volumeMounts":[
        {"name":"kube-api-access-x","readOnly":true,
         "mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"},
        {"name":"scratch","mountPath":"/tmp/scratch-x","readOnly":false,
         "mountPropagation":"None","recursiveReadOnly":"Disabled","subPath":""}]}]})J"),
                         {}, ctx());
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
}
END_TEST

START_TEST(confinement_from_security_context) {
    // A process container never gains privileges or holds capabilities.
    auto plain =
        plan_pod(pod_with(R"J({"containers":[{"name":"c","command":["x"]}]})J"), {}, ctx());
    ck_assert(plain.ok());
    ck_assert(plain->containers[0].confine == (Confinement{true, true, false}));
    // RuntimeDefault from the pod, overridden by one container's Unconfined.
    auto sec =
        plan_pod(pod_with(R"J({"securityContext":{"seccompProfile":{"type":"RuntimeDefault"}},
      "initContainers":[{"name":"i","command":["x"]}],
      "containers":[{"name":"a","command":["x"]},{"name":"b","command":["x"],
        "securityContext":{"seccompProfile":{"type":"Unconfined"}}}]})J"),
                 {}, ctx());
    ck_assert_msg(sec.ok(), "%s", sec.ok() ? "" : sec.message().c_str());
    ck_assert(sec->init_containers[0].confine.seccomp_default);
    ck_assert(sec->containers[0].confine == (Confinement{true, true, true}));
    ck_assert(sec->containers[1].confine == (Confinement{true, true, false}));
    // A runtime template's tool keeps its setuid helpers unless the pod says
    // otherwise; the seccomp filter would break it, so it is refused.
    auto t =
        RuntimeTemplates::parse("template = docker.io/* apptainer exec {image} {command}\n", "r");
    ck_assert(t.ok());
    PlanContext c = ctx();
    c.templates = &*t;
    auto tmpl = plan_pod(pod_with(R"J({"containers":[{"name":"a","image":"docker.io/x"},
      {"name":"b","image":"docker.io/x","securityContext":{"allowPrivilegeEscalation":false,
        "capabilities":{"drop":["ALL"]}}}]})J"),
                         {}, c);
    ck_assert_msg(tmpl.ok(), "%s", tmpl.ok() ? "" : tmpl.message().c_str());
    ck_assert(tmpl->containers[0].confine == Confinement{});
    ck_assert(tmpl->containers[1].confine == (Confinement{true, true, false}));
    auto tsec = plan_pod(pod_with(R"J({"containers":[{"name":"a","image":"docker.io/x",
      "securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}]})J"),
                         {}, c);
    ck_assert(!tsec.ok() && tsec.error() == Error::Refused);
    ck_assert(tsec.message().find("runtime template") != std::string::npos);
    // runAsNonRoot holds for a job user that is not root only.
    PlanContext root = ctx();
    root.uid = 0;
    auto nonroot = pod_with(R"J({"containers":[{"name":"c","command":["x"],
      "securityContext":{"runAsNonRoot":true}}]})J");
    ck_assert(plan_pod(nonroot, {}, ctx()).ok());
    auto r = plan_pod(nonroot, {}, root);
    ck_assert(!r.ok() && r.message().find("runAsNonRoot") != std::string::npos);
}
END_TEST

// Every field of the tables has a reason where the user sees one, and
// docs/kubernetes-guide.md lists every field.
START_TEST(field_tables_documented) {
    const char *top = getenv("SK_TOP_SRCDIR");
    std::string path = std::string(top ? top : ".") + "/docs/kubernetes-guide.md";
    FILE *f = fopen(path.c_str(), "r");
    ck_assert_msg(f != nullptr, "cannot read %s", path.c_str());
    std::string doc;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;)
        doc.append(buf, n);
    fclose(f);
    for (const auto *table :
         {&pod_spec_fields(), &container_fields(), &pod_security_context_fields(),
          &container_security_context_fields(), &volume_mount_fields()})
        for (const auto &r : *table) {
            if (r.use != FieldUse::Implemented)
                ck_assert_msg(r.why[0] != '\0', "%s has no reason", r.name);
            ck_assert_msg(doc.find(std::string("`") + r.name + "`") != std::string::npos,
                          "docs/kubernetes-guide.md does not list `%s`", r.name);
        }
}
END_TEST

// A pod with a network of its own: spec.hostname (and subdomain) are its
// own, HOSTNAME is its hostname; every container's command joins the
// pod's namespaces (k8s-shim/confine.h --netns). On the node's network
// they stay refused, HOSTNAME the node's name.
START_TEST(own_network_plan) {
    auto pod = parse(R"J({"metadata":{"name":"web-0","namespace":"ns","uid":"u1"},"spec":{
      "hostname":"web-zero","subdomain":"web",
      "initContainers":[{"name":"i","command":["true"]}],
      "containers":[{"name":"a","command":["serve"]}]}})J");
    auto refused = plan_pod(pod, {}, ctx());
    ck_assert(!refused.ok() && refused.message().find("sets hostname") != std::string::npos);
    PlanContext c = ctx();
    c.own_network = true;
    auto plan = plan_pod(pod, {}, c);
    ck_assert_msg(plan.ok(), "%s", plan.ok() ? "" : plan.message().c_str());
    ck_assert_sstr_eq(env_of(plan->containers[0], "HOSTNAME"), "web-zero");
    set_pod_network(&*plan, "/n/u1/net", "/n/u1/uts");
    for (const auto *cp : {&plan->init_containers[0], &plan->containers[0]}) {
        SpawnSpec s = container_command(cp->argv, *cp, "/pods/u1", "/shim", 0);
        ck_assert_sstr_eq(s.net_ns, "/n/u1/net");
        ck_assert_sstr_eq(s.uts_ns, "/n/u1/uts");
        SpawnSpec exec = container_command({"sh"}, *cp, "/pods/u1", "/shim", 42);
        ck_assert_sstr_eq(exec.net_ns, "/n/u1/net");
    }
    // No spec.hostname: the pod's name, cut to a DNS label's 63 bytes.
    auto named = parse(
        R"J({"metadata":{"name":"a-very-long-pod-name-that-goes-on-and-on-beyond-sixty-three-bytes.more","namespace":"ns","uid":"u2"},
      "spec":{"containers":[{"name":"a","command":["serve"]}]}})J");
    plan = plan_pod(named, {}, c);
    ck_assert(plan.ok());
    ck_assert_sstr_eq(env_of(plan->containers[0], "HOSTNAME"),
                      "a-very-long-pod-name-that-goes-on-and-on-beyond-sixty-three-byt");
    pod["spec"]["hostname"] = "Not_A_Label";
    ck_assert(!plan_pod(pod, {}, c).ok());
    plan = plan_pod(named, {}, ctx());
    ck_assert_sstr_eq(env_of(plan->containers[0], "HOSTNAME"), ctx().node_name.c_str());
}
END_TEST

int main() {
    Suite *s = suite_create("shim_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_loop_test(tc, expand_table, 0, TABLE_SIZE(kExpand));
    tcase_add_test(tc, recorded_init_pod);
    tcase_add_test(tc, probe_host_is_pod_ip);
    tcase_add_test(tc, env_order_and_expansion);
    tcase_add_test(tc, gpus_are_disjoint);
    tcase_add_test(tc, prepare_pod_in_one_pass);
    tcase_add_test(tc, runtime_template_and_missing_command);
    tcase_add_test(tc, runtime_template_mounts);
    tcase_add_test(tc, podman_runtime_plan);
    tcase_add_test(tc, own_network_plan);
    tcase_add_loop_test(tc, image_names_and_policies, 0,
                        static_cast<int>(sizeof kImages / sizeof kImages[0]));
    tcase_add_test(tc, pull_errors_and_backoff);
    tcase_add_test(tc, known_images_by_credentials);
    tcase_add_test(tc, runtime_template_cdi);
    tcase_add_test(tc, volume_files_decoded);
    tcase_add_test(tc, mount_paths_normalised_per_container);
    tcase_add_test(tc, host_volumes_planned);
    tcase_add_test(tc, handlers_planned);
    tcase_add_test(tc, sidecars_planned);
    tcase_add_loop_test(tc, refusals_table, 0, TABLE_SIZE(kRefusals));
    tcase_add_test(tc, allowed_security_context);
    tcase_add_test(tc, fields_without_effect_accepted);
    tcase_add_test(tc, stdin_planned);
    tcase_add_test(tc, volume_mounts_accepted);
    tcase_add_test(tc, confinement_from_security_context);
    tcase_add_test(tc, field_tables_documented);
    tcase_add_test(tc, other_gpus_hidden);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
