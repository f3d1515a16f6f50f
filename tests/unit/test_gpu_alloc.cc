// k8s-shim/gpu_alloc: disjoint GPUs per pod, refusals, and restore from the
// persisted JSON after a restart.
#include <string>

#include "k8s-shim/gpu_alloc.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

START_TEST(gpu_allocator_disjoint_refuse_restore) {
    GpuAllocator a({2, 3, 5, 7});
    auto x = a.allocate("a", 2);
    ck_assert(x.ok());
    auto y = a.allocate("b", 1);
    ck_assert(y.ok());
    ck_assert_int_eq((*x)[0], 2);
    ck_assert_int_eq((*x)[1], 3);
    ck_assert_int_eq((*y)[0], 5);
    ck_assert_int_eq((*a.allocate("a", 2))[1], 3);  // idempotent per uid
    auto z = a.allocate("c", 2);
    ck_assert(!z.ok());
    ck_assert(z.error() == Error::Refused);
    ck_assert_msg(
        z.message().find("asks for 2 nvidia.com/gpu but only 1 of the 4") != std::string::npos,
        "%s", z.message().c_str());
    // Restart: a new allocator restored from the persisted JSON gives nothing twice.
    GpuAllocator b({2, 3, 5});  // the loan shrank: 7 gone
    ck_assert(b.restore(a.to_json()).ok());
    ck_assert_int_eq(b.free_gpus().size(), 0);
    ck_assert(!b.allocate("c", 1).ok());
    b.release("a");
    auto w = b.allocate("c", 2);
    ck_assert(w.ok());
    ck_assert_int_eq((*w)[0], 2);
    ck_assert(!b.restore(Json::Value(5)).ok());
}
END_TEST

int main() {
    Suite *s = suite_create("gpu_alloc");
    TCase *tc = tcase_create("gpu");
    tcase_add_test(tc, gpu_allocator_disjoint_refuse_restore);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
