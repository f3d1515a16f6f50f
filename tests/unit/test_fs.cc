// common/fs: atomic replacement (content, mode, no temporary file left, no
// symlink followed, failures leave the old file) and bounded reads.
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/fs.h"
#include "tests/unit/check_main.h"

using namespace sk;

static std::string g_dir;

static void setup() {
    char tmpl[] = "/tmp/sk-test-fs-XXXXXX";
    ck_assert(mkdtemp(tmpl) != nullptr);
    g_dir = tmpl;
}

static int remove_entry(const char *path, const struct stat *, int, struct FTW *) {
    return remove(path);
}

static void teardown() {
    ck_assert_int_eq(nftw(g_dir.c_str(), remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

static std::vector<std::string> entries() {
    std::vector<std::string> out;
    DIR *d = opendir(g_dir.c_str());
    ck_assert(d != nullptr);
    while (struct dirent *e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
    return out;
}

static std::string slurp(const std::string &path) {
    auto r = read_file(path, 1 << 20);
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    return *r;
}

START_TEST(write_replaces_with_mode) {
    const Durability kinds[] = {Durability::Durable, Durability::Cached};
    std::string path = g_dir + "/state.json";
    mode_t old_mask = umask(022);
    ck_assert(write_file_atomic(path, "one", 0600, kinds[_i]).ok());
    ck_assert_sstr_eq(slurp(path), "one");
    ck_assert(write_file_atomic(path, std::string(100000, 'x'), 0640, kinds[_i]).ok());
    ck_assert_int_eq(slurp(path).size(), 100000);
    struct stat st;
    ck_assert_int_eq(stat(path.c_str(), &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0640);  // the new file's mode, less the umask
    umask(077);
    ck_assert(write_file_atomic(path, "", 0640, kinds[_i]).ok());
    ck_assert_int_eq(stat(path.c_str(), &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0600);
    umask(old_mask);
    ck_assert_sstr_eq(slurp(path), "");
    // Only the file itself: no temporary file is left behind.
    auto names = entries();
    ck_assert_int_eq(names.size(), 1);
    ck_assert_sstr_eq(names[0], "state.json");
}
END_TEST

// A symlink at the path is replaced, never written through.
START_TEST(write_replaces_a_symlink_not_its_target) {
    std::string target = g_dir + "/target", link = g_dir + "/link";
    ck_assert(write_file_atomic(target, "precious", 0600).ok());
    ck_assert_int_eq(symlink(target.c_str(), link.c_str()), 0);
    ck_assert(write_file_atomic(link, "new", 0600).ok());
    ck_assert_sstr_eq(slurp(target), "precious");
    struct stat st;
    ck_assert_int_eq(lstat(link.c_str(), &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_sstr_eq(slurp(link), "new");
}
END_TEST

// A failed write (here: the rename, onto a directory) leaves the old state
// and no temporary file.
START_TEST(write_failure_cleans_up) {
    std::string dir = g_dir + "/adir";
    ck_assert_int_eq(mkdir(dir.c_str(), 0700), 0);
    ck_assert_int_eq(mkdir((dir + "/x").c_str(), 0700), 0);
    auto st = write_file_atomic(dir, "data", 0600);
    ck_assert(!st.ok());
    ck_assert(st.error() == Error::Io);
    ck_assert_msg(st.message().find(dir) != std::string::npos, "%s", st.message().c_str());
    auto names = entries();
    ck_assert_int_eq(names.size(), 1);
    ck_assert_sstr_eq(names[0], "adir");
    // No directory to create the temporary file in.
    auto missing = write_file_atomic(g_dir + "/no/such/file", "data", 0600);
    ck_assert(!missing.ok());
    ck_assert_int_eq(entries().size(), 1);
}
END_TEST

START_TEST(sync_to_disk_ignores_errors) {
    std::string path = g_dir + "/f";
    ck_assert(write_file_atomic(path, "x", 0600, Durability::Cached).ok());
    sync_to_disk(path);
    sync_to_disk(g_dir + "/gone");  // no error, no crash
    sync_to_disk("relative-and-missing");
    ck_assert_sstr_eq(slurp(path), "x");
}
END_TEST

START_TEST(read_is_bounded_and_refuses_links_and_fifos) {
    std::string path = g_dir + "/f", link = g_dir + "/l", fifo = g_dir + "/p";
    ck_assert(write_file_atomic(path, "12345", 0600).ok());
    ck_assert_sstr_eq(*read_file(path, 5), "12345");
    auto big = read_file(path, 4);
    ck_assert(!big.ok() && big.error() == Error::TooLarge);
    ck_assert_int_eq(symlink(path.c_str(), link.c_str()), 0);
    auto viaLink = read_file(link, 100);
    ck_assert(!viaLink.ok() && viaLink.error() == Error::Io);
    ck_assert_int_eq(mkfifo(fifo.c_str(), 0600), 0);
    auto viaFifo = read_file(fifo, 100);  // must not block
    ck_assert(!viaFifo.ok() && viaFifo.error() == Error::Io);
    auto dir = read_file(g_dir, 100);
    ck_assert(!dir.ok() && dir.error() == Error::Io);
    auto missing = read_file(g_dir + "/missing", 100);
    ck_assert(!missing.ok() && missing.error() == Error::NotFound);
    // /proc files report size 0 and are read to their end.
    auto stat_text = read_file("/proc/self/stat", 4096);
    ck_assert(stat_text.ok() && !stat_text->empty());
}
END_TEST

// remove_tree: the whole tree goes, depth first; a symlink in it goes as a
// link, what it points to stays; a tree already gone is fine.
START_TEST(remove_tree_follows_no_link) {
    const std::string outside = g_dir + "/keep", tree = g_dir + "/tree";
    ck_assert_int_eq(mkdir(outside.c_str(), 0700), 0);
    ck_assert(write_file_atomic(outside + "/precious", "x", 0600).ok());
    ck_assert_int_eq(mkdir(tree.c_str(), 0700), 0);
    ck_assert_int_eq(mkdir((tree + "/a").c_str(), 0700), 0);
    ck_assert(write_file_atomic(tree + "/a/f", "y", 0600).ok());
    ck_assert_int_eq(symlink(outside.c_str(), (tree + "/a/link").c_str()), 0);
    ck_assert_int_eq(symlink((outside + "/precious").c_str(), (tree + "/flink").c_str()), 0);
    ck_assert(remove_tree(tree).ok());
    struct stat st;
    ck_assert_int_ne(lstat(tree.c_str(), &st), 0);
    ck_assert_int_eq(lstat((outside + "/precious").c_str(), &st), 0);
    ck_assert(remove_tree(tree).ok());  // gone already
}
END_TEST

// The temporary files of writers that died are removed; a live writer's, this
// process's, other names and directories are not (agent garbage collection).
START_TEST(stale_temp_files_of_dead_writers_removed) {
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    ck_assert(dead > 0);
    int wst = 0;
    ck_assert_int_eq(waitpid(dead, &wst, 0), dead);
    std::string d = std::to_string(dead), me = std::to_string(getpid());
    std::string ppid = std::to_string(getppid());
    auto touch = [](const std::string &p) {
        FILE *f = fopen(p.c_str(), "w");
        ck_assert(f != nullptr);
        fclose(f);
    };
    touch(g_dir + "/a.json.tmp." + d + ".0");      // dead writer: removed
    touch(g_dir + "/gpus.json.tmp." + d + ".17");  // dead writer: removed
    touch(g_dir + "/b.json.tmp." + me + ".0");     // this process: kept
    touch(g_dir + "/c.json.tmp." + ppid + ".0");   // a live writer: kept
    touch(g_dir + "/d.json.tmp." + d + ".x");      // not the pattern: kept
    touch(g_dir + "/e.json.tmp." + d);             // not the pattern: kept
    touch(g_dir + "/f.json");                      // kept
    ck_assert_int_eq(mkdir((g_dir + "/g.tmp." + d + ".1").c_str(), 0700), 0);        // a dir: kept
    ck_assert(symlink("/etc/passwd", (g_dir + "/h.tmp." + d + ".2").c_str()) == 0);  // the link
    ck_assert_uint_eq(remove_stale_temp_files(g_dir), 3);
    auto left = entries();
    std::sort(left.begin(), left.end());
    std::vector<std::string> want = {"b.json.tmp." + me + ".0",
                                     "c.json.tmp." + ppid + ".0",
                                     "d.json.tmp." + d + ".x",
                                     "e.json.tmp." + d,
                                     "f.json",
                                     "g.tmp." + d + ".1"};
    std::sort(want.begin(), want.end());
    ck_assert(left == want);
    struct stat st;
    ck_assert_int_eq(stat("/etc/passwd", &st), 0);  // the link's target untouched
    // A symlink in place of the directory is not followed.
    ck_assert(symlink(g_dir.c_str(), (g_dir + "/link").c_str()) == 0);
    touch(g_dir + "/z.tmp." + d + ".0");
    ck_assert_uint_eq(remove_stale_temp_files(g_dir + "/link"), 0);
    ck_assert_uint_eq(remove_stale_temp_files(g_dir + "/missing"), 0);
}
END_TEST

int main() {
    Suite *s = suite_create("fs");
    TCase *tc = tcase_create("fs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, write_replaces_with_mode, 0, 2);
    tcase_add_test(tc, write_replaces_a_symlink_not_its_target);
    tcase_add_test(tc, write_failure_cleans_up);
    tcase_add_test(tc, sync_to_disk_ignores_errors);
    tcase_add_test(tc, read_is_bounded_and_refuses_links_and_fifos);
    tcase_add_test(tc, stale_temp_files_of_dead_writers_removed);
    tcase_add_test(tc, remove_tree_follows_no_link);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
