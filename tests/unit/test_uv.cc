// libskuv (uv/handles.h): a handle object closes its handle when it goes,
// the node is freed by the close callback, no callback reaches an owner that
// closed it (also from inside its own callback), what a callback captured is
// released at the close, and every loop ends with no handle
// (uv_loop_close() == 0): what the daemons' teardown relies on.
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/unit/check_main.h"
#include "uv/command_runner.h"
#include "uv/handles.h"
#include "uv/thread_loop.h"

using namespace sk;

namespace {

struct Loop {
    uv_loop_t loop;
    Loop() { ck_assert_int_eq(uv_loop_init(&loop), 0); }
    // Runs dry: every close callback ran, nothing is left on the loop.
    void run() { uv_run(&loop, UV_RUN_DEFAULT); }
    void close() {
        run();
        ck_assert_int_eq(uv_loop_alive(&loop), 0);
        ck_assert_int_eq(uv_loop_close(&loop), 0);
    }
};

}  // namespace

// ---- timers ----

// A timer closed (destroyed, closed, moved over) while armed never fires; its
// callback's captures go at the close, not at the close callback.
enum class Drop { Destroy, Close, MoveOver };
static const Drop kDrops[] = {Drop::Destroy, Drop::Close, Drop::MoveOver};
START_TEST(timer_close_while_pending) {
    Loop l;
    auto held = std::make_shared<int>(0);
    int fired = 0, other = 0;
    {
        Timer t(&l.loop);
        t.start(1, [held, &fired] { fired++; });
        ck_assert(t.active());
        ck_assert_int_eq(held.use_count(), 2);
        switch (kDrops[_i]) {
            case Drop::Destroy:
                break;
            case Drop::Close:
                t.close();
                ck_assert(!t);
                ck_assert(!t.active());
                t.start(1, [&fired] { fired++; });  // a closed Timer: a no-op
                break;
            case Drop::MoveOver: {
                Timer u(&l.loop);
                u.start(1, [&other] { other++; });
                t = std::move(u);  // t's old handle closes; u's moves in
                // The moved-from Timer's emptiness is what is checked here.
                // cppcheck-suppress accessMoved
                ck_assert(!u);  // NOLINT(bugprone-use-after-move)
                ck_assert(t.active());
                l.run();
                ck_assert_int_eq(other, 1);
                break;
            }
        }
        if (kDrops[_i] != Drop::Destroy) ck_assert_int_eq(held.use_count(), 1);
    }
    ck_assert_int_eq(held.use_count(), 1);
    l.close();
    ck_assert_int_eq(fired, 0);
}
END_TEST

// The owner destroyed from inside its own timer's callback (the repeating
// case too): the callback finishes, fires no more, and the loop ends.
struct Owner {
    Timer t;
    std::shared_ptr<int> held;
    int *fired;
};
static const uint64_t kRepeats[] = {0, 1};
START_TEST(timer_owner_destroyed_in_callback) {
    Loop l;
    int fired = 0;
    auto held = std::make_shared<int>(0);
    auto *o = new Owner{Timer(&l.loop), held, &fired};
    o->t.start(
        0,
        [o] {
            (*o->fired)++;
            delete o;
        },
        kRepeats[_i]);
    ck_assert_int_eq(held.use_count(), 2);
    l.close();
    ck_assert_int_eq(fired, 1);
    ck_assert_int_eq(held.use_count(), 1);
}
END_TEST

// A repeating timer stops itself after three runs; re-arming from the
// callback replaces the callback it runs from.
START_TEST(timer_rearm_in_callback) {
    Loop l;
    Timer t(&l.loop);
    int runs = 0;
    std::function<void()> step = [&] {
        if (++runs < 3)
            t.start(0, step);
        else
            t.stop();
    };
    t.start(0, step);
    l.run();
    ck_assert_int_eq(runs, 3);
    ck_assert(!t.active());
    t.close();
    l.close();
}
END_TEST

// unref: an armed, unref'd timer does not keep the loop running.
START_TEST(timer_unref) {
    Loop l;
    Timer t(&l.loop);
    int fired = 0;
    t.start(
        60000, [&fired] { fired++; }, 60000);
    t.unref();
    l.run();  // returns at once
    ck_assert(t.active());
    t.close();
    l.close();
    ck_assert_int_eq(fired, 0);
}
END_TEST

// ---- processes and pipes ----

// A child's stdout read to EOF, its exit status; the owner (process and pipe
// together) destroyed in the exit callback or after it.
struct Child {
    Process proc;
    Pipe out;
    std::string output;
    int64_t status = -1;
    bool eof = false;
};
// Each test below runs with uv_spawn and with posix_spawn + a pidfd
// (SpawnOptions::without_fork): the same child, the same callbacks.
static const bool kWithoutFork[] = {false, true};
// posix_spawn is taken where pidfds work (not under valgrind, which lacks
// pidfd_open): uv_spawn otherwise.
static bool pidfds() {
    int fd = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
    if (fd >= 0) close(fd);
    return fd >= 0;
}
static const bool kDestroyInExit[] = {false, true, false, true};
START_TEST(process_output_and_exit) {
    Loop l;
    auto *c = new Child{Process(), Pipe(&l.loop), "", -1, false};
    SpawnOptions o;
    o.args = {"/bin/sh", "-c", "echo hello; exit 3"};
    o.out = &c->out;
    o.detached = true;
    o.without_fork = _i >= 2;
    int64_t status = -1;
    bool destroy = kDestroyInExit[_i];
    int rc = c->proc.spawn(&l.loop, o, [c, &status, destroy](int64_t st, int sig) {
        ck_assert_int_eq(sig, 0);
        status = st;
        c->status = st;
        if (destroy) delete c;
    });
    ck_assert_int_eq(rc, 0);
    ck_assert_int_gt(c->proc.pid(), 1);
    ck_assert(c->proc.spawned_without_fork() == (o.without_fork && pidfds()));
    // The pipe opens with the spawn: read from it after.
    ck_assert_int_eq(c->out.read_start([c](ssize_t n, const char *data) {
        if (n > 0)
            c->output.append(data, static_cast<size_t>(n));
        else
            c->eof = true;
    }),
                     0);
    if (destroy) {
        l.close();
    } else {
        l.run();  // the handles stay open: the process handle is not active now
        ck_assert(c->eof);
        ck_assert_sstr_eq(c->output, "hello\n");
        ck_assert_int_eq(c->status, 3);
        ck_assert_int_gt(c->proc.pid(), 1);  // still answers after the exit
        delete c;
        l.close();
    }
    ck_assert_int_eq(status, 3);
}
END_TEST

// A program that does not exist: spawn fails, the object is closed, no
// callback runs, the pipe given for stdout is still the caller's to close.
START_TEST(process_spawn_fails) {
    Loop l;
    Process p;
    Pipe out(&l.loop);
    int exits = 0;
    SpawnOptions o;
    o.args = {"/nonexistent/program"};
    o.out = &out;
    o.without_fork = kWithoutFork[_i];
    int rc = p.spawn(&l.loop, o, [&exits](int64_t, int) { exits++; });
    ck_assert_int_lt(rc, 0);
    ck_assert(!p);
    ck_assert_int_eq(p.pid(), 0);
    ck_assert_int_eq(p.kill(SIGTERM), UV_EINVAL);
    out.close();
    l.close();
    ck_assert_int_eq(exits, 0);
}
END_TEST

// A process killed through its handle reports the signal; env and cwd are
// what the options say.
START_TEST(process_kill_env_cwd) {
    Loop l;
    Process p;
    Pipe out(&l.loop);
    std::string output;
    SpawnOptions o;
    o.args = {"sh", "-c", "echo \"$SK_X $(pwd)\"; exec sleep 60"};
    o.file = "/bin/sh";
    o.env = std::vector<std::string>{"SK_X=42", "PATH=/bin:/usr/bin"};
    o.cwd = "/";
    o.out = &out;
    o.without_fork = kWithoutFork[_i];
    int sig = 0;
    ck_assert_int_eq(p.spawn(&l.loop, o, [&](int64_t, int s) { sig = s; }), 0);
    ck_assert(p.spawned_without_fork() == (o.without_fork && pidfds()));
    ck_assert_int_eq(out.read_start([&output](ssize_t n, const char *data) {
        if (n > 0) output.append(data, static_cast<size_t>(n));
    }),
                     0);
    Timer t(&l.loop);
    t.start(50, [&] { ck_assert_int_eq(p.kill(SIGKILL), 0); });
    l.run();
    ck_assert_int_eq(sig, SIGKILL);
    ck_assert_sstr_eq(output, "42 /\n");
    p.close();
    out.close();
    t.close();
    l.close();
}
END_TEST

// ---- unix sockets: connect, write, shutdown, close while pending ----

static std::string listen_unix(int *fd) {
    std::string path = "/tmp/sk_test_uv_" + std::to_string(getpid()) + ".sock";
    unlink(path.c_str());
    *fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(*fd, 0);
    struct sockaddr_un a = {};
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    ck_assert_int_eq(bind(*fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    ck_assert_int_eq(listen(*fd, 4), 0);
    return path;
}

// Connected: a write and a shutdown report; the peer reads what was written
// then EOF; closing from the shutdown callback ends the loop.
START_TEST(pipe_write_shutdown) {
    Loop l;
    int lfd;
    std::string path = listen_unix(&lfd);
    Pipe p(&l.loop);
    int connected = 1, written = 1, shut = 1;
    p.connect(path, [&](int st) {
        connected = st;
        ck_assert_int_eq(p.write("hello\n", [&](int s) { written = s; }), 0);
        ck_assert_int_eq(p.shutdown([&](int s) {
            shut = s;
            p.close();
        }),
                         0);
    });
    l.run();
    ck_assert_int_eq(connected, 0);
    ck_assert_int_eq(written, 0);
    ck_assert_int_eq(shut, 0);
    ck_assert(!p);
    int cfd = accept(lfd, nullptr, nullptr);
    ck_assert_int_ge(cfd, 0);
    char buf[16];
    ck_assert_int_eq(read(cfd, buf, sizeof buf), 6);
    ck_assert_int_eq(read(cfd, buf, sizeof buf), 0);
    close(cfd);
    close(lfd);
    unlink(path.c_str());
    l.close();
}
END_TEST

// Closed with a connect, a write and a read pending: none of their callbacks
// runs (the cancelled requests report to no one), and the loop ends.
START_TEST(pipe_close_while_pending) {
    Loop l;
    int lfd;
    std::string path = listen_unix(&lfd);
    int calls = 0;
    auto held = std::make_shared<int>(0);
    {
        Pipe p(&l.loop);
        p.connect(path, [&calls, held](int) { calls++; });
    }
    ck_assert_int_eq(held.use_count(), 1);
    auto *p = new Pipe(&l.loop);
    p->connect(path, [&, p](int st) {
        ck_assert_int_eq(st, 0);
        p->read_start([&calls](ssize_t, const char *) { calls++; });
        ck_assert_int_eq(p->write(std::string(1 << 20, 'x'), [&calls](int) { calls++; }), 0);
        delete p;  // the owner goes from its own connect callback
    });
    l.run();
    ck_assert_int_eq(calls, 0);
    close(lfd);
    unlink(path.c_str());
    l.close();
}
END_TEST

// The peer closes: the read callback gets UV_EOF once.
START_TEST(pipe_read_eof) {
    Loop l;
    int lfd;
    std::string path = listen_unix(&lfd);
    Pipe p(&l.loop);
    std::string got;
    ssize_t end = 0;
    int ends = 0;
    p.connect(path, [&](int st) {
        ck_assert_int_eq(st, 0);
        int cfd = accept(lfd, nullptr, nullptr);
        ck_assert_int_eq(write(cfd, "abc", 3), 3);
        close(cfd);
        p.read_start([&](ssize_t n, const char *data) {
            if (n > 0) {
                got.append(data, static_cast<size_t>(n));
                return;
            }
            end = n;
            ends++;
        });
    });
    l.run();
    ck_assert_sstr_eq(got, "abc");
    ck_assert_int_eq(end, UV_EOF);
    ck_assert_int_eq(ends, 1);
    p.close();
    close(lfd);
    unlink(path.c_str());
    l.close();
}
END_TEST

// A server's side: bind, listen, accept. Each waiting connection reports
// once; accept() takes it into a Pipe whose descriptor names the peer
// (SO_PEERCRED: this process); a second bind at the path is refused; the
// listener closed from its own callback reports nothing more and the loop
// ends; a closed handle has no descriptor.
START_TEST(pipe_bind_listen_accept) {
    Loop l;
    std::string path = "/tmp/sk_test_uv_listen_" + std::to_string(getpid()) + ".sock";
    unlink(path.c_str());
    Pipe listener(&l.loop);
    ck_assert_int_eq(listener.fileno(), -1);  // not bound yet
    ck_assert_int_eq(listener.bind(path), 0);
    ck_assert_int_ge(listener.fileno(), 0);
    Pipe again(&l.loop);
    ck_assert_int_eq(again.bind(path), UV_EADDRINUSE);
    again.close();
    ck_assert_int_eq(again.fileno(), -1);
    Pipe served, client(&l.loop);
    int connections = 0, status = 1;
    pid_t peer = 0;
    std::string got;
    ck_assert_int_eq(listener.listen(4,
                                     [&](int st) {
                                         connections++;
                                         status = st;
                                         served = Pipe(&l.loop);
                                         ck_assert_int_eq(listener.accept(served), 0);
                                         struct ucred cred = {};
                                         socklen_t len = sizeof cred;
                                         ck_assert_int_eq(getsockopt(served.fileno(), SOL_SOCKET,
                                                                     SO_PEERCRED, &cred, &len),
                                                          0);
                                         peer = cred.pid;
                                         ck_assert_int_eq(served.write("hi"), 0);
                                         listener.close();
                                     }),
                     0);
    client.connect(path, [&](int st) {
        ck_assert_int_eq(st, 0);
        client.read_start([&](ssize_t n, const char *data) {
            if (n > 0) got.append(data, static_cast<size_t>(n));
            if (got == "hi") {
                client.close();
                served.close();
            }
        });
    });
    l.run();
    ck_assert_int_eq(connections, 1);
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(peer, getpid());
    ck_assert_sstr_eq(got, "hi");
    ck_assert(!listener);
    ck_assert_int_eq(listener.fileno(), -1);
    ck_assert_int_eq(served.accept(client), UV_EINVAL);  // both closed
    unlink(path.c_str());
    l.close();
}
END_TEST

// ---- tcp ----

// A refused connect reports its error; a Tcp closed while connecting does not.
START_TEST(tcp_connect_refused) {
    Loop l;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ck_assert_int_eq(getsockname(s, reinterpret_cast<sockaddr *>(&a), &len), 0);
    close(s);  // nothing listens on that port now
    Tcp t(&l.loop);
    int status = 0, calls = 0;
    ck_assert_int_eq(t.connect(reinterpret_cast<sockaddr *>(&a), [&](int st) { status = st; }), 0);
    {
        Tcp u(&l.loop);
        ck_assert_int_eq(u.connect(reinterpret_cast<sockaddr *>(&a), [&](int) { calls++; }), 0);
    }
    l.run();
    ck_assert_int_eq(status, UV_ECONNREFUSED);
    ck_assert_int_eq(calls, 0);
    t.close();
    l.close();
}
END_TEST

// ---- signals ----

START_TEST(signal_delivered_then_closed_in_callback) {
    Loop l;
    auto *s = new Signal(&l.loop);
    int got = 0;
    ck_assert_int_eq(s->start(SIGUSR1,
                              [&got, s](int signum) {
                                  got = signum;
                                  delete s;
                              }),
                     0);
    ck_assert_int_eq(raise(SIGUSR1), 0);
    l.close();
    ck_assert_int_eq(got, SIGUSR1);
}
END_TEST

// ---- deferred calls: a retry must not outlive its loop ----
// Each case defers one call, maybe cancels it as the agent's teardown does,
// runs the loop dry: the call ran or not, what it captured is released
// either way, and the loop closes (no handle left: no leak at SIGTERM).
struct DeferCase {
    uint64_t delay_ms;
    bool cancel;
    int runs;
};
static const DeferCase kDefer[] = {
    {0, false, 1},
    {30, false, 1},
    {0, true, 0},
    {60000, true, 0},  // a pending retry at shutdown: dropped, not waited for
};
START_TEST(defer_lifecycle) {
    const DeferCase &k = kDefer[_i];
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    auto held = std::make_shared<int>(0);
    int runs = 0;
    defer(
        &loop, [held, &runs] { runs++; }, k.delay_ms);
    ck_assert_int_eq(held.use_count(), 2);
    if (k.cancel) cancel_deferred(&loop);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(runs, k.runs);
    ck_assert_int_eq(held.use_count(), 1);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    cancel_deferred(&loop);  // nothing left: a no-op
}
END_TEST

// Thread-pool work finishes before the loop ends.
START_TEST(pool_work_runs) {
    Loop l;
    int done = 0;
    run_in_pool(&l.loop, [&done] { done = 1; });
    l.close();
    ck_assert_int_eq(done, 1);
}
END_TEST

// An exception from a callback is logged, not let into libuv.
START_TEST(callback_exception_contained) {
    Loop l;
    Timer t(&l.loop);
    int after = 0;
    t.start(0, [] { throw std::runtime_error("boom"); });
    l.run();
    t.start(0, [&after] { after++; });
    l.run();
    ck_assert_int_eq(after, 1);
    t.close();
    l.close();
}
END_TEST

// The open-handle report a daemon logs at exit counts what is left.
START_TEST(open_handles_counted) {
    Loop l;
    {
        Timer a(&l.loop), b(&l.loop);
        ck_assert_int_eq(log_open_handles(&l.loop, "test"), 2);
    }
    l.run();
    ck_assert_int_eq(log_open_handles(&l.loop, "test"), 0);
    l.close();
}
END_TEST

// ---- ThreadLoop (uv/thread_loop.h) ----

// Closures go to the thread and back in order, the thread has its name and
// nice value, a timer made before start() runs there, stop(last) runs last
// there and then nothing more runs on either side.
START_TEST(thread_loop_round_trips) {
    Loop main;
    errno = 0;
    int base = getpriority(PRIO_PROCESS, 0);
    std::vector<int> seen;  // the main loop's
    std::atomic<bool> on_thread_ok{true};
    std::string name;
    int thread_nice = 99;
    bool timer_fired = false, last_ran = false;
    {
        ThreadLoop tl(&main.loop, "sk-test-loop", base + 2);
        Timer t(tl.loop());  // made before start(): the thread's from then on
        auto maybe_done = [&] {
            if (seen.size() == 100 && timer_fired) uv_stop(&main.loop);
        };
        tl.post([&] {
            t.start(1, [&] {
                tl.post_main([&] {
                    timer_fired = true;
                    maybe_done();
                });
            });
        });
        ck_assert(tl.start().ok());
        pthread_t self = pthread_self();
        for (int i = 0; i < 100; i++)
            tl.post([&, i, self] {
                if (pthread_equal(pthread_self(), self)) on_thread_ok = false;
                if (i == 0) {
                    char buf[16] = {0};
                    pthread_getname_np(pthread_self(), buf, sizeof buf);
                    name = buf;
                    thread_nice = getpriority(PRIO_PROCESS, 0);
                }
                tl.post_main([&, i] {
                    seen.push_back(i);
                    maybe_done();
                });
            });
        Timer keep(&main.loop);  // the wake-up does not hold the main loop: this does
        keep.start(30000, [&] { uv_stop(&main.loop); });
        uv_run(&main.loop, UV_RUN_DEFAULT);
        keep.close();
        tl.stop([&] {
            last_ran = true;
            t.close();
        });
        tl.post([&] { on_thread_ok = false; });     // after stop(): never runs
        tl.post_main([&] { seen.push_back(-1); });  // nor this
    }
    ck_assert(on_thread_ok);
    ck_assert_int_eq(seen.size(), 100);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(seen[i], i);
    ck_assert_sstr_eq(name, "sk-test-loop");
    ck_assert_int_eq(thread_nice, base + 2);
    ck_assert(timer_fired && last_ran);
    errno = 0;
    ck_assert_int_eq(getpriority(PRIO_PROCESS, 0), base);  // the main thread's is its own
    main.close();
}
END_TEST

// Never started: stop(last) runs last here and closes the loop.
START_TEST(thread_loop_stopped_unstarted) {
    Loop main;
    bool last_ran = false, posted_ran = false;
    {
        ThreadLoop tl(&main.loop, "sk-test-idle", std::nullopt);
        Timer t(tl.loop());
        tl.post([&] { posted_ran = true; });
        tl.stop([&] {
            last_ran = true;
            t.close();
        });
    }
    ck_assert(last_ran);
    ck_assert(!posted_ran);  // dropped: only `last` runs at a stop
    main.close();
}
END_TEST

// ---- the command queue ----

// A directory of the test's (check_main.h: removed when the test's process
// exits).
struct TmpDir {
    std::string path = sk_test_tmpdir("/tmp/sk-cmdq-XXXXXX");
    std::string at(const std::string &name) const { return path + "/" + name; }
    bool has(const std::string &name) const { return access(at(name).c_str(), F_OK) == 0; }
    void touch(const std::string &name) const {
        FILE *f = fopen(at(name).c_str(), "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
    }
};

// A command that says it started, waits for DIR/go.TAG, appends its tag
// to DIR/log and prints it: the test decides when each command ends.
std::string gated(const TmpDir &d, const std::string &tag) {
    return "touch " + d.at("started." + tag) + "; while [ ! -e " + d.at("go." + tag) +
           " ]; do sleep 0.01; done; echo " + tag + " >>" + d.at("log") + "; echo " + tag;
}

// Runs the loop until `done` holds (each turn waits for an event: a
// command's end, or the 10 ms timer of a wait on a file).
void run_until(Loop &l, const std::function<bool()> &done) {
    for (int i = 0; i < 3000 && !done(); i++) {
        uv_run(&l.loop, UV_RUN_NOWAIT);
        if (!done()) usleep(10000);
    }
    ck_assert(done());
}

// At most `limit` run at once and the rest start in the order asked; a
// command line still waiting is joined (run once, every caller answered),
// one running is not; each caller gets its own command's output.
START_TEST(command_queue_limits_and_joins) {
    TmpDir d;
    Loop l;
    std::vector<std::string> got;
    {
        agent::CommandQueue q(&l.loop, 2, 30000);
        auto note = [&got](const agent::CommandResult &r) { got.push_back(r.output); };
        for (const char *tag : {"a", "b", "c", "d"})
            q.run(gated(d, tag), note);
        ck_assert_uint_eq(q.running(), 2);
        ck_assert_uint_eq(q.waiting(), 2);
        q.run(gated(d, "d"), note);  // waiting: joins
        ck_assert_uint_eq(q.waiting(), 2);
        q.run(gated(d, "a"), note);  // running: asked again after the others
        ck_assert_uint_eq(q.waiting(), 3);
        // a ends: c (the first waiting) starts, d does not.
        d.touch("go.a");
        run_until(l, [&] { return got.size() == 1 && d.has("started.c"); });
        ck_assert_str_eq(got[0].c_str(), "a\n");
        ck_assert_uint_eq(q.running(), 2);
        ck_assert(!d.has("started.d"));
        // b ends: d starts (once, for its two callers).
        d.touch("go.b");
        run_until(l, [&] { return got.size() == 2 && d.has("started.d"); });
        ck_assert_uint_eq(q.waiting(), 1);
        d.touch("go.c");
        d.touch("go.d");
        l.run();
        ck_assert_uint_eq(q.running(), 0);
        ck_assert_uint_eq(q.waiting(), 0);
    }
    l.close();
    ck_assert_uint_eq(got.size(), 6);
    int ds = 0;
    for (const auto &o : got)
        ds += o == "d\n";
    ck_assert_int_eq(ds, 2);
    // What ran: a twice (asked again while running), d once.
    std::string log;
    if (FILE *f = fopen(d.at("log").c_str(), "r")) {
        char buf[64];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            log.append(buf, n);
        fclose(f);
    }
    std::vector<std::string> lines;
    for (size_t p = 0, e; (e = log.find('\n', p)) != std::string::npos; p = e + 1)
        lines.push_back(log.substr(p, e - p));
    std::sort(lines.begin(), lines.end());
    ck_assert_msg((lines == std::vector<std::string>{"a", "a", "b", "c", "d"}), "ran: %s",
                  log.c_str());
}
END_TEST

// Destroying the queue drops what waits (never started, never answered)
// and lets the running command report.
START_TEST(command_queue_destroyed_drops_waiting) {
    TmpDir d;
    Loop l;
    std::vector<std::string> got;
    {
        agent::CommandQueue q(&l.loop, 1, 30000);
        for (const char *tag : {"x", "y", "z"})
            q.run(gated(d, tag),
                  [&got](const agent::CommandResult &r) { got.push_back(r.output); });
    }
    for (const char *tag : {"x", "y", "z"})
        d.touch(std::string("go.") + tag);
    l.close();
    ck_assert_uint_eq(got.size(), 1);
    ck_assert_str_eq(got[0].c_str(), "x\n");
    ck_assert(!d.has("started.y") && !d.has("started.z"));
}
END_TEST

int main(void) {
    Suite *s = suite_create("uv");
    TCase *tc = tcase_create("handles");
    tcase_add_loop_test(tc, timer_close_while_pending, 0, TABLE_SIZE(kDrops));
    tcase_add_loop_test(tc, timer_owner_destroyed_in_callback, 0, TABLE_SIZE(kRepeats));
    tcase_add_test(tc, timer_rearm_in_callback);
    tcase_add_test(tc, timer_unref);
    tcase_add_loop_test(tc, process_output_and_exit, 0, TABLE_SIZE(kDestroyInExit));
    tcase_add_loop_test(tc, process_spawn_fails, 0, TABLE_SIZE(kWithoutFork));
    tcase_add_loop_test(tc, process_kill_env_cwd, 0, TABLE_SIZE(kWithoutFork));
    tcase_add_test(tc, pipe_write_shutdown);
    tcase_add_test(tc, pipe_close_while_pending);
    tcase_add_test(tc, pipe_read_eof);
    tcase_add_test(tc, pipe_bind_listen_accept);
    tcase_add_test(tc, tcp_connect_refused);
    tcase_add_test(tc, signal_delivered_then_closed_in_callback);
    tcase_add_loop_test(tc, defer_lifecycle, 0, TABLE_SIZE(kDefer));
    tcase_add_test(tc, pool_work_runs);
    tcase_add_test(tc, callback_exception_contained);
    tcase_add_test(tc, open_handles_counted);
    tcase_add_test(tc, thread_loop_round_trips);
    tcase_add_test(tc, thread_loop_stopped_unstarted);
    tcase_add_test(tc, command_queue_limits_and_joins);
    tcase_add_test(tc, command_queue_destroyed_drops_waiting);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
