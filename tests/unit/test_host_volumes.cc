// agent/controllers/host_volumes: hostPath volumes and claims under the
// node's volume_roots, what waits (a claim not bound) and what is refused
// (a path outside, a PersistentVolume of another source, an nfs export the
// node has not mounted), and the nfs mounts of a mountinfo text.
#include <string>

#include "agent/controllers/host_volumes.h"
#include "common/fs.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

static const std::vector<std::string> kRoots = {"/shared", "/scratch/jobs"};

static Json::Value pod_with(const std::string &volumes) {
    return J((R"({"metadata":{"name":"p","namespace":"ns","uid":"u1"},
      "spec":{"containers":[{"name":"c","command":["x"]}],"volumes":)" +
              volumes + "}}")
                 .c_str());
}

static Json::Value claim(const std::string &phase, const std::string &volume) {
    return J((R"({"metadata":{"name":"models","namespace":"ns","uid":"cu"},
      "spec":{"volumeName":")" +
              volume + R"("},"status":{"phase":")" + phase + R"("}})")
                 .c_str());
}

static Json::Value pv(const std::string &source, const std::string &claim_name = "models") {
    return J((R"({"metadata":{"name":"pv1"},"spec":{)" + source +
              R"(,"claimRef":{"namespace":"ns","name":")" + claim_name +
              R"(","uid":"cu"}},"status":{"phase":"Bound"}})")
                 .c_str());
}

START_TEST(host_paths_under_roots) {
    auto pod = pod_with(R"([{"name":"a","hostPath":{"path":"/shared/data/./x/"}},
      {"name":"b","hostPath":{"path":"/scratch/jobs","type":"DirectoryOrCreate"}},
      {"name":"e","emptyDir":{}}])");
    ck_assert(claim_refs(pod).empty());
    auto r = resolve_host_volumes(pod, {}, kRoots, {});
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert_uint_eq(r->size(), 2);
    ck_assert_sstr_eq(r->at("a").path, "/shared/data/x");
    ck_assert_sstr_eq(r->at("a").root, "/shared");
    ck_assert_sstr_eq(r->at("b").root, "/scratch/jobs");
    ck_assert_sstr_eq(r->at("b").type, "DirectoryOrCreate");
    ck_assert(!r->at("a").read_only);
}
END_TEST

struct Refusal {
    const char *volumes;
    std::vector<std::string> roots;
    const char *says;
};
static const Refusal kRefusals[] = {
    {R"([{"name":"a","hostPath":{"path":"/etc"}}])", kRoots,
     "outside the paths this node lets pods mount (/shared, /scratch/jobs"},
    {R"([{"name":"a","hostPath":{"path":"/sharedx"}}])", kRoots, "outside the paths"},
    {R"([{"name":"a","hostPath":{"path":"/scratch/other"}}])", kRoots, "outside the paths"},
    {R"([{"name":"a","hostPath":{"path":"/shared/../etc"}}])", kRoots, "'..'"},
    {R"([{"name":"a","hostPath":{"path":"shared/x"}}])", kRoots, "not an absolute path"},
    {R"([{"name":"a","hostPath":{"path":"/shared/x"}}])", {}, "volume_roots is empty"},
    {R"([{"name":"a","hostPath":{"path":"/shared/x","type":"Pipe"}}])", kRoots,
     "hostPath type 'Pipe'"},
    {R"([{"name":"a","persistentVolumeClaim":{"claimName":"../secrets/x"}}])", kRoots,
     "is not a claim's name"},
    {R"([{"name":"../up","emptyDir":{"medium":"Memory"}}])", kRoots, "must be a DNS label"},
};

START_TEST(host_paths_refused) {
    const auto &c = kRefusals[_i];
    Json::Value pod = pod_with(c.volumes);
    auto r = resolve_host_volumes(pod, {}, c.roots, {});
    Status st;
    if (!r)
        st = r.failure();
    else if (auto m = memory_volumes(pod, uint64_t{1} << 30); !m)
        st = m.failure();
    ck_assert_msg(!st && st.error() == Error::Refused, "accepted %s", c.volumes);
    ck_assert_msg(st.message().find(c.says) != std::string::npos, "%s", st.message().c_str());
}
END_TEST

// A claim, as a kubelet takes it: bound, its volume bound back to it; what
// is not there yet waits (NotFound), in the kubelet's words.
START_TEST(claims_resolved_and_waited_for) {
    auto pod = pod_with(R"([{"name":"m","persistentVolumeClaim":{"claimName":"models"}}])");
    auto refs = claim_refs(pod);
    ck_assert_uint_eq(refs.size(), 1);
    ck_assert_sstr_eq(refs.begin()->first, "persistentvolumeclaims");
    FetchedObjects objs;
    auto r = resolve_host_volumes(pod, objs, kRoots, {});
    ck_assert(!r.ok() && r.error() == Error::NotFound);
    ck_assert_sstr_eq(r.message(), "persistentvolumeclaim \"models\" not found");

    objs[{"persistentvolumeclaims", "models"}] = claim("Pending", "");
    ck_assert(bound_volume_refs(pod, objs).empty());
    r = resolve_host_volumes(pod, objs, kRoots, {});
    ck_assert(!r.ok() && r.error() == Error::NotFound);
    ck_assert(r.message().find("non-bound phase (\"Pending\")") != std::string::npos);

    objs[{"persistentvolumeclaims", "models"}] = claim("Bound", "pv1");
    auto pvs = bound_volume_refs(pod, objs);
    ck_assert_uint_eq(pvs.size(), 1);
    ck_assert_sstr_eq(pvs.begin()->second, "pv1");
    r = resolve_host_volumes(pod, objs, kRoots, {});
    ck_assert(!r.ok() && r.error() == Error::NotFound);
    ck_assert(r.message().find("failed to fetch PV \"pv1\"") != std::string::npos);

    objs[{"persistentvolumes", "pv1"}] = pv(R"("hostPath":{"path":"/shared/models"})", "other");
    r = resolve_host_volumes(pod, objs, kRoots, {});
    ck_assert(!r.ok() && r.error() == Error::NotFound);
    ck_assert(r.message().find("not bound to claim ns/models") != std::string::npos);

    objs[{"persistentvolumes", "pv1"}] = pv(R"("hostPath":{"path":"/shared/models"})");
    r = resolve_host_volumes(pod, objs, kRoots, {});
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert_sstr_eq(r->at("m").path, "/shared/models");
    ck_assert(!r->at("m").read_only);

    // The claim's readOnly makes every mount read-only; a local PV as well.
    auto ro = pod_with(
        R"([{"name":"m","persistentVolumeClaim":{"claimName":"models","readOnly":true}}])");
    objs[{"persistentvolumes", "pv1"}] = pv(R"("local":{"path":"/scratch/jobs/m"})");
    r = resolve_host_volumes(ro, objs, kRoots, {});
    ck_assert(r.ok() && r->at("m").read_only);
    ck_assert_sstr_eq(r->at("m").path, "/scratch/jobs/m");

    // Refused for good: outside the roots, another source.
    objs[{"persistentvolumes", "pv1"}] = pv(R"("hostPath":{"path":"/var/lib/x"})");
    r = resolve_host_volumes(pod, objs, kRoots, {});
    ck_assert(!r.ok() && r.error() == Error::Refused);
    ck_assert(r.message().find("PersistentVolume pv1") != std::string::npos);
    objs[{"persistentvolumes", "pv1"}] = pv(R"("csi":{"driver":"x","volumeHandle":"h"})");
    r = resolve_host_volumes(pod, objs, kRoots, {});
    ck_assert(!r.ok() && r.error() == Error::Refused);
    ck_assert(r.message().find("hostPath, local and nfs") != std::string::npos);

    // A claim being deleted is not started on.
    Json::Value deleting = claim("Bound", "pv1");
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
    objs[{"persistentvolumeclaims", "models"}] = deleting;
    r = resolve_host_volumes(pod, objs, kRoots, {});
    ck_assert(!r.ok() && r.message().find("is being deleted") != std::string::npos);
}
END_TEST

// An nfs PersistentVolume is where the node mounted that export: the
// longest export that holds the path, octal escapes decoded.
START_TEST(nfs_volumes_where_the_node_mounts_them) {
    const std::string mountinfo =
        "22 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw\n"
        "40 22 0:35 / /shared rw,relatime shared:7 - nfs4 fs1:/export rw,vers=4.2\n"
        "41 22 0:36 / /shared/big\\040data rw - nfs fs1:/export/big rw\n"
        "42 22 0:37 / /other rw - nfs fs2:/export rw\n"
        "43 22 0:38 / /tmp rw - tmpfs tmpfs rw\n"
        "garbage line\n";
    auto nfs = nfs_mounts(mountinfo);
    ck_assert_uint_eq(nfs.size(), 3);
    ck_assert_sstr_eq(nfs[1].mount_point, "/shared/big data");
    ck_assert_sstr_eq(nfs[1].source, "fs1:/export/big");
    auto pod = pod_with(R"([{"name":"m","persistentVolumeClaim":{"claimName":"models"}}])");
    FetchedObjects objs;
    objs[{"persistentvolumeclaims", "models"}] = claim("Bound", "pv1");
    objs[{"persistentvolumes", "pv1"}] = pv(R"("nfs":{"server":"fs1","path":"/export/m/v1"})");
    auto r = resolve_host_volumes(pod, objs, kRoots, nfs);
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert_sstr_eq(r->at("m").path, "/shared/m/v1");
    ck_assert_sstr_eq(r->at("m").type, "Directory");
    objs[{"persistentvolumes", "pv1"}] =
        pv(R"("nfs":{"server":"fs1","path":"/export/big/x","readOnly":true})");
    r = resolve_host_volumes(pod, objs, {"/"}, nfs);
    ck_assert(r.ok());
    ck_assert_sstr_eq(r->at("m").path, "/shared/big data/x");
    ck_assert(r->at("m").read_only);
    objs[{"persistentvolumes", "pv1"}] = pv(R"("nfs":{"server":"fs3","path":"/export"})");
    r = resolve_host_volumes(pod, objs, kRoots, nfs);
    ck_assert(!r.ok() && r.error() == Error::Refused);
    ck_assert(r.message().find("has not mounted") != std::string::npos);
    // The export mounted outside the roots.
    objs[{"persistentvolumes", "pv1"}] = pv(R"("nfs":{"server":"fs2","path":"/export/a"})");
    r = resolve_host_volumes(pod, objs, kRoots, nfs);
    ck_assert(!r.ok() && r.message().find("/other/a") != std::string::npos);
}
END_TEST

// A memory emptyDir's tmpfs: its sizeLimit, at most the pod's memory
// limits (when every container has one) or the node's memory.
START_TEST(memory_volume_sizes) {
    auto pod = [](const std::string &limits, const std::string &size) {
        return J((R"({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
          "containers":[{"name":"a","command":["x"])" +
                  limits + R"(},
                        {"name":"b","command":["x"])" +
                  limits + R"(}],
          "volumes":[{"name":"shm","emptyDir":{"medium":"Memory")" +
                  size + R"(}},
                     {"name":"disk","emptyDir":{}}]}})")
                     .c_str());
    };
    const uint64_t node = uint64_t{64} << 30;
    auto r = memory_volumes(pod("", R"(,"sizeLimit":"2Gi")"), node);
    ck_assert(r.ok() && r->size() == 1);
    ck_assert_sstr_eq((*r)[0].volume, "shm");
    ck_assert_uint_eq((*r)[0].bytes, uint64_t{2} << 30);
    r = memory_volumes(pod("", ""), node);  // no limit at all: the node's memory
    ck_assert(r.ok() && (*r)[0].bytes == node);
    const std::string lim = R"(,"resources":{"limits":{"memory":"512Mi"}})";
    r = memory_volumes(pod(lim, ""), node);  // two containers of 512Mi
    ck_assert(r.ok() && (*r)[0].bytes == uint64_t{1} << 30);
    r = memory_volumes(pod(lim, R"(,"sizeLimit":"8Gi")"), node);  // capped by the pod's limits
    ck_assert(r.ok() && (*r)[0].bytes == uint64_t{1} << 30);
    r = memory_volumes(pod("", R"(,"sizeLimit":"lots")"), node);
    ck_assert(!r.ok() && r.error() == Error::Refused);
    ck_assert(r.message().find("sizeLimit 'lots'") != std::string::npos);
}
END_TEST

START_TEST(clean_paths) {
    ck_assert_sstr_eq(*clean_absolute_path("//a/./b//"), "/a/b");
    ck_assert_sstr_eq(*clean_absolute_path("/"), "/");
    ck_assert_sstr_eq(*clean_absolute_path("/./"), "/");
    ck_assert(!clean_absolute_path("a/b").ok());
    ck_assert(!clean_absolute_path("/a/../b").ok());
    ck_assert(!clean_absolute_path("").ok());
    ck_assert(path_within("/a/b", "/a"));
    ck_assert(path_within("/a", "/a"));
    ck_assert(!path_within("/ab", "/a"));
    ck_assert(path_within("/x", "/"));
}
END_TEST

int main() {
    Suite *s = suite_create("host_volumes");
    TCase *tc = tcase_create("host_volumes");
    tcase_add_test(tc, host_paths_under_roots);
    tcase_add_loop_test(tc, host_paths_refused, 0, TABLE_SIZE(kRefusals));
    tcase_add_test(tc, claims_resolved_and_waited_for);
    tcase_add_test(tc, nfs_volumes_where_the_node_mounts_them);
    tcase_add_test(tc, clean_paths);
    tcase_add_test(tc, memory_volume_sizes);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
