// k8s-shim/mount_paths: what the shim may make at a mountPath, as a job user
// who is not root (run as root, each test drops to uid/gid 65534 in its own
// forked process; the fixture, in the parent, makes and removes the
// directories). The squats of other users are in tests/shim/driver.py.
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "k8s-shim/mount_paths.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

namespace {

constexpr uid_t kNobody = 65534;
std::string g_root_dir;  // root's (or the runner's) directory, 0755
std::string g_own_dir;   // the job user's directory (65534's when run as root)

int remove_entry(const char *path, const struct stat *, int, struct FTW *) {
    return remove(path);
}

void setup() {
    char a[] = "/tmp/sk-mount-root-XXXXXX", b[] = "/tmp/sk-mount-own-XXXXXX";
    ck_assert(mkdtemp(a) && mkdtemp(b));
    g_root_dir = a;
    g_own_dir = b;
    ck_assert(chmod(a, 0755) == 0);
    if (getuid() == 0)
        ck_assert(chown(b, kNobody, kNobody) == 0);
    else
        ck_assert(chmod(a, 0555) == 0);  // not writable by its owner either
}

void teardown() {
    chmod(g_root_dir.c_str(), 0755);
    nftw(g_root_dir.c_str(), remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    nftw(g_own_dir.c_str(), remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

// The job user's uid: 65534 when the test runs as root (dropped for the rest
// of this forked test), the runner's otherwise.
uid_t become_job_user() {
    if (getuid() != 0) return getuid();
    ck_assert(setresgid(kNobody, kNobody, kNobody) == 0);
    ck_assert(setresuid(kNobody, kNobody, kNobody) == 0);
    return kNobody;
}

bool lexists(const std::string &p) {
    struct stat st;
    return lstat(p.c_str(), &st) == 0;
}

}  // namespace

START_TEST(only_root_could_make_it_is_skipped) {
    uid_t uid = become_job_user();
    std::string rec = g_own_dir + "/skip.json";
    std::string path = g_root_dir + "/sub/cfg";
    auto r = make_mount_links({{path, g_own_dir + "/volume"}}, uid, rec);
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert_uint_eq(r->skipped.size(), 1);
    ck_assert_sstr_eq(r->skipped[0], path);
    ck_assert(!lexists(g_root_dir + "/sub"));
    ck_assert(!lexists(rec));  // nothing made, nothing recorded
}
END_TEST

START_TEST(made_as_the_job_user_and_removed) {
    uid_t uid = become_job_user();
    std::string rec = g_own_dir + "/made.json";
    std::string path = g_own_dir + "/a/b/cfg", target = g_own_dir + "/volume";
    auto r = make_mount_links({{path, target}}, uid, rec);
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert(r->skipped.empty());
    char buf[4096];
    ssize_t n = readlink(path.c_str(), buf, sizeof buf);
    ck_assert(n > 0);
    ck_assert_sstr_eq(std::string(buf, static_cast<size_t>(n)), target);
    struct stat st;
    ck_assert(stat((g_own_dir + "/a").c_str(), &st) == 0 && (st.st_mode & 0777) == 0700);
    ck_assert(lexists(rec));
    ck_assert(remove_mount_links(rec, uid).ok());
    ck_assert(!lexists(g_own_dir + "/a") && !lexists(rec));
    ck_assert(remove_mount_links(rec, uid).ok());  // no record: nothing to do
}
END_TEST

// A directory recorded before mkdir but without its inode (a crash in
// between) cannot be proven the shim's: it stays, and so does a link whose
// target is not the recorded one.
START_TEST(unproven_entries_are_left) {
    uid_t uid = become_job_user();
    std::string dir = g_own_dir + "/theirs", link = g_own_dir + "/other-link";
    ck_assert(mkdir(dir.c_str(), 0700) == 0);
    ck_assert(symlink("/elsewhere", link.c_str()) == 0);
    std::string rec = g_own_dir + "/crash.json";
    std::ofstream(rec) << R"({"entries":[{"kind":"dir","path":")" << dir
                       << R"("},{"kind":"link","path":")" << link
                       << R"(","target":"/the-volume"}]})";
    auto st = remove_mount_links(rec, uid);
    ck_assert(!st.ok());
    ck_assert_msg(st.message().find(dir + " (not as the shim made it)") != std::string::npos, "%s",
                  st.message().c_str());
    ck_assert(st.message().find(link + " (not as the shim made it)") != std::string::npos);
    ck_assert(lexists(dir) && lexists(link) && !lexists(rec));
}
END_TEST

// A symlink on the way is followed only with a target free of "..", and a
// refusal removes what was made for the links before it.
START_TEST(refusal_undoes_what_was_made) {
    uid_t uid = become_job_user();
    std::string up = g_own_dir + "/up";
    ck_assert(symlink("../x", up.c_str()) == 0);
    std::string rec = g_own_dir + "/undo.json";
    auto r = make_mount_links(
        {{g_own_dir + "/first/cfg", g_own_dir + "/v1"}, {up + "/cfg", g_own_dir + "/v2"}}, uid,
        rec);
    ck_assert(!r.ok());
    ck_assert(r.error() == Error::Refused);
    ck_assert_msg(r.message().find("mountPath " + up + "/cfg: " + up +
                                   " is a symlink to ../x, which has '..'") != std::string::npos,
                  "%s", r.message().c_str());
    ck_assert(!lexists(g_own_dir + "/first") && !lexists(rec));
}
END_TEST

static Suite *suite() {
    Suite *s = suite_create("mount_paths");
    TCase *tc = tcase_create("core");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, only_root_could_make_it_is_skipped);
    tcase_add_test(tc, made_as_the_job_user_and_removed);
    tcase_add_test(tc, unproven_entries_are_left);
    tcase_add_test(tc, refusal_undoes_what_was_made);
    suite_add_tcase(s, tc);
    return s;
}

int main() {
    return sk_run_suite(suite());
}
