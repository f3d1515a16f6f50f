// agent/images: the node image store's pure parts (its podman command
// lines, which images its collection removes), the view its user publishes
// over a c/storage layout made here (what becomes readable, what the jobs'
// podman reads, what an exclusion leaves out), and the image references
// both sides share (common/daemons/image_ref.h).
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "agent/images/image_store.h"
#include "agent/images/store_publish.h"
#include "common/daemons/image_ref.h"
#include "common/fs.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

static const std::string kA(64, 'a'), kB(64, 'b'), kL1(64, '1'), kL2(64, '2');

static bool has(const std::vector<std::string> &v, const std::string &s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

static mode_t mode_of(const std::string &p) {
    struct stat st;
    ck_assert_msg(lstat(p.c_str(), &st) == 0, "%s missing", p.c_str());
    return st.st_mode & 07777;
}

static void write(const std::string &p, const std::string &text, mode_t mode) {
    ck_assert(write_file_atomic(p, text, mode).ok());
    chmod(p.c_str(), mode);
}

START_TEST(image_references) {
    ck_assert_sstr_eq(normalize_image("busybox"), "docker.io/library/busybox");
    ck_assert_sstr_eq(image_store_name("docker.io/library/busybox"),
                      "docker.io/library/busybox:latest");
    ck_assert_sstr_eq(image_store_name("127.0.0.1:5000/e2e/x:1"), "127.0.0.1:5000/e2e/x:1");
    ck_assert_sstr_eq(image_store_name("127.0.0.1:5000/e2e/x"), "127.0.0.1:5000/e2e/x:latest");
    ck_assert_sstr_eq(image_store_name("r.io/x@sha256:00"), "r.io/x@sha256:00");
    ck_assert_sstr_eq(image_ref_error("127.0.0.1:5000/e2e/x:1"), "");
    ck_assert_sstr_eq(image_ref_error("r.io/x@sha256:0a"), "");
    for (const char *bad :
         {"", "busybox", "-r.io/x", "r.io/x y", "r.io//x", "r.io/../x", "r.io/x;rm", "r.io/x\n"})
        ck_assert_msg(!image_ref_error(bad).empty(), "'%s' passed", bad);
    ck_assert(!image_ref_error("r.io/" + std::string(600, 'x')).empty());
    ck_assert_sstr_eq(pull_error("Trying...\nError: unauthorized: login\n"), "unauthorized: login");
}
END_TEST

START_TEST(store_commands) {
    ImageStoreSettings s;
    s.dir = "/var/lib/slurm-k8s/images";
    s.mount_program = "/usr/bin/fuse-overlayfs";
    s.insecure_registries = {"127.0.0.1:5000"};
    auto v = store_pull_argv(s, "127.0.0.1:5000/e2e/x:1");
    ck_assert_sstr_eq(v[0], "podman");
    ck_assert(has(v, "/var/lib/slurm-k8s/images/storage"));
    ck_assert(has(v, "overlay.force_mask=shared"));
    ck_assert(has(v, "overlay.ignore_chown_errors=true"));
    ck_assert(has(v, "overlay.mount_program=/usr/bin/fuse-overlayfs"));
    ck_assert(has(v, "--tls-verify=false"));
    ck_assert(!has(v, "--authfile"));  // never a pod's credentials
    ck_assert_sstr_eq(v.back(), "127.0.0.1:5000/e2e/x:1");
    // A registry the agent does not name insecure: TLS, whatever a shim says.
    ck_assert(!has(store_pull_argv(s, "127.0.0.1:5001/e2e/x:1"), "--tls-verify=false"));
    auto env = store_podman_env(s);
    ck_assert(has(env, "HOME=/var/lib/slurm-k8s/images/home"));
    ck_assert(has(env, "TMPDIR=/var/lib/slurm-k8s/images/tmp"));
}
END_TEST

static StoreListing listing(uint64_t bytes) {
    StoreListing l;
    l.bytes = bytes;
    l.images = {{kA, {"r.io/a:1"}, {"sha256:aa"}, 100},
                {kB, {"r.io/b:1"}, {"sha256:bb"}, 200},
                {std::string(64, 'c'), {"r.io/c:1"}, {"sha256:cc"}, 300}};
    return l;
}

START_TEST(collection_order) {
    const uint64_t G = uint64_t{1} << 30;
    // Under the bound, or no bound: nothing goes.
    ck_assert(image_gc_victims(listing(9 * G), {}, {}, 10 * G).empty());
    ck_assert(image_gc_victims(listing(90 * G), {}, {}, 0).empty());
    // Over it: least recently used first (created, or a later use), down to
    // 90 % of the bound, estimated at a third of the usage each.
    auto v = image_gc_victims(listing(12 * G), {}, {}, 10 * G);
    ck_assert_uint_eq(v.size(), 1);
    ck_assert_sstr_eq(v[0], kA);
    v = image_gc_victims(listing(12 * G), {}, {{kA, 1000}}, 10 * G);
    ck_assert_sstr_eq(v[0], kB);
    v = image_gc_victims(listing(30 * G), {}, {}, 10 * G);
    ck_assert_uint_eq(v.size(), 3);
    // An image a pod names stays, by tag or by digest.
    v = image_gc_victims(listing(30 * G), {"r.io/a:1", "r.io/b@sha256:bb"}, {}, 10 * G);
    ck_assert_uint_eq(v.size(), 1);
    ck_assert_sstr_eq(v[0], std::string(64, 'c'));
}
END_TEST

// A c/storage overlay layout as rootless podman leaves it: 0700 directories,
// 0600 metadata.
static std::string make_store() {
    char tmpl[] = "/tmp/sk-image-store-XXXXXX";
    ck_assert(mkdtemp(tmpl));
    std::string d = tmpl, st = d + "/storage";
    for (const auto &p :
         {st, st + "/overlay", st + "/overlay/l", st + "/overlay/" + kL1,
          st + "/overlay/" + kL1 + "/diff", st + "/overlay/" + kL2,
          st + "/overlay/" + kL2 + "/diff", st + "/overlay-images", st + "/overlay-images/" + kA,
          st + "/overlay-images/" + kB, st + "/overlay-layers"})
        ck_assert(mkdir(p.c_str(), 0700) == 0);
    write(st + "/overlay/" + kL1 + "/link", "L1", 0600);
    write(st + "/overlay/" + kL2 + "/lower", "l/L1", 0600);
    write(st + "/overlay/" + kL1 + "/diff/file", std::string(10000, 'x'), 0644);
    write(st + "/overlay-images/" + kA + "/manifest", "{}", 0600);
    write(st + "/overlay-images/" + kB + "/manifest", "{}", 0600);
    write(st + "/overlay-images/images.lock", "", 0644);
    write(st + "/overlay-layers/layers.lock", "", 0644);
    write(st + "/overlay-images/images.json",
          "[{\"id\":\"" + kA + "\",\"names\":[\"r.io/a:1\"],\"digest\":\"sha256:aa\",\"layer\":\"" +
              kL2 + "\",\"created\":\"2026-12-01T10:00:00.5Z\"},{\"id\":\"" + kB +
              "\",\"names\":[\"r.io/b:1\"],\"digests\":[\"sha256:bb\"],\"created\":\"2026-12-02T10:"
              "00:00Z\"},{\"id\":\"../../etc\",\"names\":[\"bad\"]}]",
          0600);
    write(st + "/overlay-layers/layers.json",
          "[{\"id\":\"" + kL1 + "\"},{\"id\":\"" + kL2 + "\",\"parent\":\"" + kL1 + "\"}]", 0600);
    return d;
}

START_TEST(view_published) {
    std::string d = make_store(), st = d + "/storage", v = d + "/view";
    auto l = publish_store_view(d, {});
    ck_assert_msg(l.ok(), "%s", l.message().c_str());
    ck_assert_uint_eq(l->images.size(), 2);  // the bad id is no image
    ck_assert_sstr_eq(l->images[0].id, kA);
    ck_assert_sstr_eq(l->images[0].names[0], "r.io/a:1");
    ck_assert_sstr_eq(l->images[0].digests[0], "sha256:aa");
    ck_assert_int_eq(l->images[0].created_s, 1796119200);
    ck_assert(l->bytes >= 10000);
    // Readable to the jobs' users: search-only on the way, the metadata read.
    ck_assert_uint_eq(mode_of(st), 0711);
    ck_assert_uint_eq(mode_of(st + "/overlay"), 0711);
    ck_assert_uint_eq(mode_of(st + "/overlay/" + kL1), 0711);
    ck_assert_uint_eq(mode_of(st + "/overlay/" + kL1 + "/link"), 0644);
    ck_assert_uint_eq(mode_of(st + "/overlay/" + kL2 + "/lower"), 0644);
    ck_assert_uint_eq(mode_of(st + "/overlay-images/" + kA), 0755);
    ck_assert_uint_eq(mode_of(st + "/overlay-images/" + kA + "/manifest"), 0644);
    // The store's own JSON stays as c/storage wrote it; the view has copies.
    ck_assert_uint_eq(mode_of(st + "/overlay-images/images.json"), 0600);
    ck_assert_uint_eq(mode_of(v + "/overlay-images/images.json"), 0644);
    ck_assert_uint_eq(mode_of(v + "/overlay-layers/layers.json"), 0644);
    ck_assert_uint_eq(mode_of(v + "/overlay-images/images.lock"), 0644);
    char buf[256];
    ssize_t n = readlink((v + "/overlay").c_str(), buf, sizeof buf);
    ck_assert(n > 0);
    ck_assert_sstr_eq(std::string(buf, static_cast<size_t>(n)), "../storage/overlay");
    auto text = read_file(v + "/overlay-images/" + kB + "/manifest", 4096, Links::Follow);
    ck_assert(text.ok() && *text == "{}");
    auto images = read_file(v + "/overlay-images/images.json", 1 << 20);
    ck_assert(images.ok() && images->find("../../etc") == std::string::npos);

    // Left out: gone from the view's JSON and links, still in the store.
    l = publish_store_view(d, {kA});
    ck_assert(l.ok() && l->images.size() == 1 && l->images[0].id == kB);
    images = read_file(v + "/overlay-images/images.json", 1 << 20);
    ck_assert(images.ok() && images->find(kA) == std::string::npos);
    struct stat sb;
    ck_assert(lstat((v + "/overlay-images/" + kA).c_str(), &sb) != 0);
    ck_assert(lstat((st + "/overlay-images/" + kA).c_str(), &sb) == 0);
    ck_assert(remove_tree(d).ok());
}
END_TEST

START_TEST(empty_store_published) {
    char tmpl[] = "/tmp/sk-image-store-XXXXXX";
    ck_assert(mkdtemp(tmpl));
    std::string d = tmpl;
    ck_assert(mkdir((d + "/storage").c_str(), 0700) == 0);
    auto l = publish_store_view(d, {});
    ck_assert_msg(l.ok(), "%s", l.message().c_str());
    ck_assert(l->images.empty());
    auto images = read_file(d + "/view/overlay-images/images.json", 1 << 20);
    ck_assert(images.ok() && *images == "[]");
    // A listing survives its JSON round trip (the agent reads the helper's).
    StoreListing x = listing(42);
    auto y = store_listing_from_json(to_json(x));
    ck_assert(y.ok() && y->bytes == 42 && y->images.size() == 3 && y->images[1].created_s == 200);
    ck_assert(!store_listing_from_json(J(R"({"bytes":1,"images":[{"id":"x"}]})")).ok());
    ck_assert(remove_tree(d).ok());
}
END_TEST

int main() {
    Suite *s = suite_create("image_store");
    TCase *tc = tcase_create("image_store");
    tcase_add_test(tc, image_references);
    tcase_add_test(tc, store_commands);
    tcase_add_test(tc, collection_order);
    tcase_add_test(tc, view_published);
    tcase_add_test(tc, empty_store_published);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
