// agent/cgroup_broker: the limits of a pod's and a container's cgroups as the
// kubelet sets them, from the pod's spec and what the job lends the node.
#include <string>

#include "agent/cgroup_broker.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

namespace {

proto::RegisterRequest lent(uint32_t memory_mib, uint32_t cpus) {
    proto::RegisterRequest r;
    r.memory_mib = memory_mib;
    r.cpus = cpus;
    return r;
}

}  // namespace

// Every container with limits: the pod's are their sum, the container's its
// own; the shares from the requests; all pods together what the job lends.
START_TEST(limits_from_the_containers) {
    auto spec = J(R"({"containers":[
        {"name":"a","resources":{"limits":{"memory":"64Mi","cpu":"100m"},"requests":{"cpu":"50m"}}},
        {"name":"b","resources":{"limits":{"memory":"32Mi","cpu":"300m"},"requests":{"cpu":"150m"}}}]})");
    auto s = pod_cgroup_limits(spec, "b", lent(512, 2), 256);
    ck_assert_msg(s.ok(), "%s", s.ok() ? "" : s.message().c_str());
    ck_assert_int_eq(s->memory_limit, int64_t{96} << 20);
    ck_assert_int_eq(s->cpu_quota_us, 40000);  // 400m of a 100 ms period
    ck_assert_int_eq(s->cpu_period_us, 100000);
    ck_assert_int_eq(s->cpu_shares, cpu_shares_for(200));
    ck_assert_int_eq(s->pids_max, 256);
    ck_assert_sstr_eq(s->container, "b");
    ck_assert_int_eq(s->container_memory_limit, int64_t{32} << 20);
    ck_assert_int_eq(s->container_cpu_quota_us, 30000);
    ck_assert_int_eq(s->pods_memory_limit, int64_t{512} << 20);
    ck_assert_int_eq(s->pods_cpu_quota_us, 200000);
    ck_assert(s->deny.empty() && s->gpus.empty());  // the caller's
}
END_TEST

// A container without a limit: the pod is held to what the job lends (a pod
// cannot take the trainer's memory or CPUs), the container has none of its own.
START_TEST(limits_fall_back_to_the_job) {
    auto spec = J(R"({"containers":[
        {"name":"a","resources":{"limits":{"memory":"64Mi","cpu":"100m"}}},
        {"name":"b"}]})");
    auto s = pod_cgroup_limits(spec, "b", lent(1024, 3), 0);
    ck_assert(s.ok());
    ck_assert_int_eq(s->memory_limit, int64_t{1024} << 20);
    ck_assert_int_eq(s->cpu_quota_us, 300000);
    ck_assert_int_eq(s->container_memory_limit, 0);
    ck_assert_int_eq(s->container_cpu_quota_us, 0);
    ck_assert_int_eq(s->pids_max, 0);
}
END_TEST

// An init container larger than the app containers together sizes the pod,
// and an init container is found by its name.
START_TEST(limits_of_init_containers) {
    auto spec = J(R"({"initContainers":[
        {"name":"init","resources":{"limits":{"memory":"1Gi","cpu":"2"}}}],
        "containers":[{"name":"a","resources":{"limits":{"memory":"64Mi","cpu":"100m"}}}]})");
    auto s = pod_cgroup_limits(spec, "init", lent(4096, 4), 0);
    ck_assert(s.ok());
    ck_assert_int_eq(s->memory_limit, int64_t{1} << 30);
    ck_assert_int_eq(s->cpu_quota_us, 200000);
    ck_assert_int_eq(s->container_memory_limit, int64_t{1} << 30);
    ck_assert_int_eq(s->container_cpu_quota_us, 200000);
    ck_assert_int_eq(s->cpu_shares, cpu_shares_for(0));  // init containers' requests do not count
}
END_TEST

// A CPU limit above what the job lends (vLLM's manifest: 10 CPUs on a job of
// 4) is held to the job's: cgroup v1 refuses a child quota above its parent's.
START_TEST(cpu_limits_above_the_job_held_to_it) {
    auto spec =
        J(R"({"containers":[{"name":"a","resources":{"limits":{"memory":"20G","cpu":"10"}}}]})");
    auto s = pod_cgroup_limits(spec, "a", lent(8192, 4), 0);
    ck_assert(s.ok());
    ck_assert_int_eq(s->pods_cpu_quota_us, 400000);
    ck_assert_int_eq(s->cpu_quota_us, 400000);
    ck_assert_int_eq(s->container_cpu_quota_us, 400000);
}
END_TEST

// A container the spec does not name is refused, saying which.
START_TEST(limits_of_an_unknown_container) {
    auto s = pod_cgroup_limits(J(R"({"containers":[{"name":"a"}]})"), "x", lent(512, 1), 0);
    ck_assert(!s.ok());
    ck_assert_int_eq(static_cast<int>(s.error()), static_cast<int>(Error::NotFound));
    ck_assert_sstr_eq(s.message(), "no container 'x'");
}
END_TEST

int main(void) {
    Suite *s = suite_create("cgroup_broker");
    TCase *tc = tcase_create("cgroup_broker");
    tcase_add_test(tc, limits_from_the_containers);
    tcase_add_test(tc, limits_fall_back_to_the_job);
    tcase_add_test(tc, limits_of_init_containers);
    tcase_add_test(tc, cpu_limits_above_the_job_held_to_it);
    tcase_add_test(tc, limits_of_an_unknown_container);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
