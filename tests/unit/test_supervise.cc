// k8s-shim/supervise: the kill pass over a container's descendants (new
// sessions, double forks, SIGTERM ignored, a bounded fork bomb) and the
// supervisor's exit, which is the main's.
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/procfs.h"
#include "k8s-shim/supervise.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::shim;

static bool gone_or_zombie(pid_t p) {
    return proc_start_ticks(p) == 0;
}

// Polls until n descendants are alive, or 30 s.
static bool wait_descendants(size_t n) {
    for (int i = 0; i < 3000; i++) {
        if (live_descendants().size() >= n) return true;
        struct timespec ts = {0, 10000000L};  // 10 ms
        nanosleep(&ts, nullptr);
    }
    return false;
}

// A child that starts a daemon (setsid, double fork) and a grandchild that
// ignores SIGTERM in a session of its own, then exits: both reparent here.
START_TEST(sweep_kills_daemons_in_other_sessions) {
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t c = fork();
    if (c == 0) {
        for (int k = 0; k < 2; k++) {
            if (fork() == 0) {
                setsid();
                signal(SIGTERM, SIG_IGN);
                if (k == 0 && fork() != 0) _exit(0);  // the double fork
                pid_t me = getpid();
                (void)!write(fds[1], &me, sizeof me);
                for (;;)
                    pause();
            }
        }
        _exit(0);
    }
    close(fds[1]);
    std::vector<pid_t> pids;
    pid_t p;
    while (pids.size() < 2 && read(fds[0], &p, sizeof p) == static_cast<ssize_t>(sizeof p))
        pids.push_back(p);
    ck_assert_int_eq(pids.size(), 2);
    int ws = 0;
    bool reaped = false;
    sweep_descendants(c, &ws, &reaped);
    ck_assert(live_descendants().empty());
    for (pid_t d : pids)
        ck_assert_msg(gone_or_zombie(d), "pid %d survived", d);
    ck_assert(reaped);  // the main, reaped by the pass
    ck_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}
END_TEST

// 32 processes (5 levels of forks, each in a new session), each forking short-lived children in
// a loop: the pass stops them all, then kills them, and returns.
START_TEST(sweep_outlasts_a_fork_bomb) {
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    pid_t c = fork();
    if (c == 0) {
        for (int depth = 1; depth < 6; depth++)
            if (fork() == 0) setsid();  // each level: parent and child go on
        for (;;) {
            pid_t q = fork();
            if (q == 0) _exit(0);
            if (q > 0) (void)waitpid(q, nullptr, 0);
        }
    }
    ck_assert(wait_descendants(32));
    int ws = 0;
    bool reaped = false;
    sweep_descendants(c, &ws, &reaped);
    ck_assert(live_descendants().empty());
    ck_assert(reaped);
    ck_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
}
END_TEST

// supervise_main in a child: its exit is the main's, and its daemons die.
struct SuperviseCase {
    const char *script;
    bool signaled;
    int code;  // exit code, or signal
};
static const SuperviseCase kSupervise[] = {
    {"exit 3", false, 3},
    {"kill -TERM $$", true, SIGTERM},
    {"(setsid sleep 1000 &) ; exit 0", false, 0},
    {"trap '' TERM; (trap '' TERM; sleep 1000) & exit 7", false, 7},
};
START_TEST(supervise_exits_as_its_main) {
    const auto &c = kSupervise[_i];
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    pid_t s = fork();
    if (s == 0) {
        char sh[] = "/bin/sh", dash_c[] = "-c";
        std::string script = c.script;
        char *argv[] = {sh, dash_c, script.data(), nullptr};
        _exit(supervise_main(argv));
    }
    int ws = 0;
    ck_assert_int_eq(waitpid(s, &ws, 0), s);
    if (c.signaled) {
        ck_assert(WIFSIGNALED(ws));
        ck_assert_int_eq(WTERMSIG(ws), c.code);
    } else {
        ck_assert(WIFEXITED(ws));
        ck_assert_int_eq(WEXITSTATUS(ws), c.code);
    }
    // A daemon the supervisor left would have been reparented here.
    ck_assert(live_descendants().empty());
}
END_TEST

START_TEST(supervise_reports_exec_failure) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t s = fork();
    if (s == 0) {
        dup2(fds[1], 2);
        char prog[] = "/nonexistent/sk-program";
        char *argv[] = {prog, nullptr};
        _exit(supervise_main(argv));
    }
    close(fds[1]);
    int ws = 0;
    ck_assert_int_eq(waitpid(s, &ws, 0), s);
    ck_assert(WIFEXITED(ws));
    ck_assert_int_eq(WEXITSTATUS(ws), 128);
    char buf[256] = {0};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    ck_assert_int_gt(n, 0);
    ck_assert_sstr_eq(std::string(buf),
                      "cannot start '/nonexistent/sk-program': No such file or directory\n");
}
END_TEST

// The command runs at the nice value it is given, its supervisor at its
// own; a value below the supervisor's leaves the command at the supervisor's
// (it could not be had without privilege).
START_TEST(supervise_sets_the_commands_nice) {
    errno = 0;
    int base = getpriority(PRIO_PROCESS, 0);
    ck_assert_int_eq(errno, 0);
    if (base > 16) return;  // no room to raise it in
    for (int want : {base + 3, base - 1}) {
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        pid_t s = fork();
        if (s == 0) {
            dup2(fds[1], 1);
            char sh[] = "/bin/sh", dash_c[] = "-c";
            char script[] = "cut -d' ' -f19 /proc/self/stat";
            char *argv[] = {sh, dash_c, script, nullptr};
            _exit(supervise_main(argv, false, &want));
        }
        close(fds[1]);
        int ws = 0;
        ck_assert_int_eq(waitpid(s, &ws, 0), s);
        ck_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
        char buf[32] = {0};
        ck_assert_int_gt(read(fds[0], buf, sizeof buf - 1), 0);
        close(fds[0]);
        // /proc/PID/stat's 19th field, from a command whose name has no space.
        ck_assert_int_eq(strtol(buf, nullptr, 10), want >= base ? want : base);
    }
    errno = 0;
    ck_assert_int_eq(getpriority(PRIO_PROCESS, 0), base);
}
END_TEST

START_TEST(argv_encoding_round_trips) {
    std::vector<std::vector<std::string>> cmds = {
        {"/bin/sh", "-c", "echo 'a:b' 12:x"}, {"x"}, {"", "two words", "\n:\xff", ""}};
    for (const auto &c : cmds) {
        std::vector<std::string> back;
        ck_assert(decode_supervise_argv(encode_supervise_argv(c), &back));
        ck_assert(back == c);
    }
    ck_assert_sstr_eq(encode_supervise_argv({"ab", "", "c:d"}), "2:ab0:3:c:d");
}
END_TEST

static const char *const kBadArgv[] = {
    "",               // no command
    "3:ab",           // shorter than its length
    "2ab",            // no colon
    ":ab",            // no length
    "-1:a",           // not a length
    "2:ab1",          // a length without its colon
    "99999999999:a",  // a length longer than the value
};
START_TEST(argv_decoding_refuses_malformed) {
    std::vector<std::string> out{"keep"};
    ck_assert(!decode_supervise_argv(kBadArgv[_i], &out));
    ck_assert(out == std::vector<std::string>{"keep"});  // untouched
}
END_TEST

int main() {
    Suite *s = suite_create("supervise");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sweep_kills_daemons_in_other_sessions);
    tcase_add_test(tc, sweep_outlasts_a_fork_bomb);
    tcase_add_loop_test(tc, supervise_exits_as_its_main, 0, TABLE_SIZE(kSupervise));
    tcase_add_test(tc, supervise_reports_exec_failure);
    tcase_add_test(tc, supervise_sets_the_commands_nice);
    tcase_add_test(tc, argv_encoding_round_trips);
    tcase_add_loop_test(tc, argv_decoding_refuses_malformed, 0, TABLE_SIZE(kBadArgv));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
