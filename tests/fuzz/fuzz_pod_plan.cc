// Pod spec -> process plan (k8s-shim/pod_plan.h). Input: JSON text, either a
// Pod object or the pod_run body {"pod": ..., "files": {...}}; an input that
// is not JSON goes to expand_vars instead. Properties:
// - plan_pod never throws (it runs inside the shim's noexcept read callback)
//   and fails only with Refused or Invalid, with a message;
// - a plan has the pod's uid and name, at least one container, unique
//   container names, a non-empty argv per container, env without duplicate
//   names, grace >= 0, and gpus_needed() within what containers asked for;
// - without runtime templates every container's processes run with
//   no_new_privs and no capabilities, whatever its securityContext says
//   (k8s-shim/pod_security.h);
// - planning is deterministic;
// - assign_gpus() gives each app container its own indices, init containers
//   a prefix of them, and CUDA_/NVIDIA_VISIBLE_DEVICES exactly once each;
// - expand_vars without variables never grows its input and leaves text
//   without '$' unchanged.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/daemons/json.h"
#include "k8s-shim/pod_plan.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using sk::shim::ContainerPlan;
using sk::shim::PodPlan;

int count_env(const ContainerPlan &c, const std::string &name) {
    int n = 0;
    for (const auto &e : c.env)
        n += e.name == name;
    return n;
}

void check_container(const ContainerPlan &c, std::set<std::string> *names) {
    FUZZ_CHECK(!c.name.empty());
    FUZZ_CHECK(names->insert(c.name).second);
    FUZZ_CHECK(!c.argv.empty());
    FUZZ_CHECK(c.gpus >= 0 && c.gpus <= 1024);
    FUZZ_CHECK(c.confine.no_new_privs && c.confine.drop_capabilities);
    std::set<std::string> env;
    for (const auto &e : c.env) {
        FUZZ_CHECK(!e.name.empty());
        FUZZ_CHECK(env.insert(e.name).second);
    }
}

void check_plan(const PodPlan &p, const Json::Value &pod) {
    FUZZ_CHECK(!p.uid.empty() && p.uid == pod["metadata"]["uid"].asString());
    FUZZ_CHECK(!p.name.empty() && p.name == pod["metadata"]["name"].asString());
    FUZZ_CHECK(!p.containers.empty());
    FUZZ_CHECK(p.grace_s >= 0);
    std::set<std::string> names;
    int sum = 0, init_max = 0;
    for (const auto &c : p.containers) {
        FUZZ_CHECK(!c.init);
        check_container(c, &names);
        sum += c.gpus;
    }
    for (const auto &c : p.init_containers) {
        FUZZ_CHECK(c.init);
        check_container(c, &names);
        init_max = std::max(init_max, c.gpus);
    }
    FUZZ_CHECK(p.gpus_needed() == std::max(sum, init_max));
}

void check_gpus(PodPlan p) {
    int n = p.gpus_needed();
    std::vector<int> idx;
    idx.reserve(static_cast<size_t>(n > 0 ? n : 0));
    for (int i = 0; i < n; i++)
        idx.push_back(100 + i);
    sk::shim::assign_gpus(&p, idx);
    std::set<int> used;
    for (const auto &c : p.containers) {
        FUZZ_CHECK(static_cast<int>(c.gpu_indices.size()) == c.gpus);
        for (int g : c.gpu_indices)
            FUZZ_CHECK(used.insert(g).second);  // never shared between app containers
    }
    for (const auto &c : p.init_containers) {
        FUZZ_CHECK(static_cast<int>(c.gpu_indices.size()) == c.gpus);
        for (size_t i = 0; i < c.gpu_indices.size(); i++)
            FUZZ_CHECK(c.gpu_indices[i] == idx[i]);
    }
    for (const auto *list : {&p.containers, &p.init_containers})
        for (const auto &c : *list) {
            FUZZ_CHECK(count_env(c, "CUDA_VISIBLE_DEVICES") == 1);
            FUZZ_CHECK(count_env(c, "NVIDIA_VISIBLE_DEVICES") == 1);
        }
}

bool same(const PodPlan &a, const PodPlan &b) {
    if (a.containers.size() != b.containers.size() ||
        a.init_containers.size() != b.init_containers.size() ||
        a.volumes.size() != b.volumes.size())
        return false;
    for (size_t i = 0; i < a.containers.size(); i++)
        if (a.containers[i].argv != b.containers[i].argv ||
            !(a.containers[i].env == b.containers[i].env) ||
            !(a.containers[i].confine == b.containers[i].confine))
            return false;
    for (size_t i = 0; i < a.volumes.size(); i++)
        if (a.volumes[i].files != b.volumes[i].files) return false;
    return a.uid == b.uid && a.grace_s == b.grace_s && a.restart_policy == b.restart_policy;
}

}  // namespace

SK_FUZZ_TARGET(pod_plan) {
    std::string text(reinterpret_cast<const char *>(data), size);
    auto v = sk::json::parse(text);
    if (!v) {
        std::string out = sk::shim::expand_vars(text, {});
        FUZZ_CHECK(out.size() <= text.size());
        if (text.find('$') == std::string::npos) FUZZ_CHECK(out == text);
        return 0;
    }
    const Json::Value &root = *v;
    bool wrapped = root.isObject() && root.isMember("pod");
    const Json::Value &pod = wrapped ? root["pod"] : root;
    // Files the pod_run decoder refuses never reach plan_pod: plan without them.
    auto decoded = sk::proto::pod_files_from_json(wrapped ? root["files"] : Json::Value());
    if (!decoded) FUZZ_CHECK(!decoded.message().empty());
    const sk::proto::PodFiles files = decoded ? *decoded : sk::proto::PodFiles();

    sk::shim::PlanContext ctx;
    ctx.uid = 1000;
    ctx.gid = 1000;
    ctx.node_name = "slurm-n1-42";
    ctx.pod_dir = "/tmp/slurm-k8s/pods/uid";
    auto plan = sk::shim::plan_pod(pod, files, ctx);
    if (!plan) {
        FUZZ_CHECK(plan.error() == sk::Error::Refused || plan.error() == sk::Error::Invalid);
        FUZZ_CHECK(!plan.message().empty());
        return 0;
    }
    check_plan(*plan, pod);
    auto again = sk::shim::plan_pod(pod, files, ctx);
    FUZZ_CHECK(again && same(*plan, *again));
    check_gpus(*plan);
    return 0;
}
