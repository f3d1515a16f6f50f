#include "uv/handles.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <map>
#include <set>
#include <utility>

#include "common/log.h"

namespace sk {
inline namespace uv {

namespace {

template <typename Fn, typename... Args>
void run_guarded(const Fn &fn, const char *what, Args... args) noexcept {
    try {
        if (fn) fn(args...);
    } catch (const std::exception &e) {
        LOG_ERROR("%s: unexpected exception: %s", what, e.what());
    } catch (...) {
        LOG_ERROR("%s: unexpected exception", what);
    }
}

// A repeating callback may close (or destroy) its owner, which drops the
// std::function it runs from: it runs from a copy.
template <typename Fn, typename... Args>
void run_copy(const Fn &fn, const char *what, Args... args) noexcept {
    if (!fn) return;
    Fn copy;
    try {
        copy = fn;
    } catch (...) {
        LOG_ERROR("%s: out of memory", what);
        return;
    }
    run_guarded(copy, what, args...);
}

// A one-shot callback leaves its slot before it runs.
template <typename Fn, typename... Args>
void run_once(Fn &slot, const char *what, Args... args) noexcept {
    Fn fn = std::move(slot);
    slot = nullptr;
    run_guarded(fn, what, args...);
}

}  // namespace

namespace detail {

// The heap half of a handle object: the libuv handle (its data points here)
// and the callbacks. Freed by the close callback.
struct Node {
    virtual ~Node() = default;
    virtual uv_handle_t *handle() = 0;
    virtual void drop() = 0;  // the owner closed the handle: no callback from now on
    bool dropped = false;
};

template <typename H>
struct NodeOf : Node {
    H h{};
    NodeOf() { h.data = static_cast<Node *>(this); }
    uv_handle_t *handle() override { return reinterpret_cast<uv_handle_t *>(&h); }
    static auto *of(H *p) { return static_cast<NodeOf<H> *>(static_cast<Node *>(p->data)); }
};

}  // namespace detail

namespace {

using detail::Node;
using detail::NodeOf;

void free_node(uv_handle_t *h) noexcept {
    delete static_cast<Node *>(h->data);
}

struct TimerNode : NodeOf<uv_timer_t> {
    std::function<void()> cb;
    void drop() override { cb = nullptr; }
};

struct SignalNode : NodeOf<uv_signal_t> {
    std::function<void(int)> cb;
    void drop() override { cb = nullptr; }
};

struct AsyncNode : NodeOf<uv_async_t> {
    std::function<void()> cb;
    void drop() override { cb = nullptr; }
};

template <typename H>
struct StreamNode : NodeOf<H> {
    Stream::ReadCb on_read;
    Stream::DoneCb on_connect, on_shutdown, on_connection;
    uv_connect_t connect_req{};
    uv_shutdown_t shutdown_req{};
    void drop() override {
        on_read = nullptr;
        on_connect = on_shutdown = on_connection = nullptr;
    }
};
using PipeNode = StreamNode<uv_pipe_t>;
using TcpNode = StreamNode<uv_tcp_t>;

struct PollNode : NodeOf<uv_poll_t> {
    Poll::Cb cb;
    void drop() override { cb = nullptr; }
};

struct ProcessNode : NodeOf<uv_process_t> {
    Process::ExitCb on_exit;
    void drop() override { on_exit = nullptr; }
};

// A child started by posix_spawn (SpawnOptions::without_fork), its exit seen
// on its pidfd. The child is reaped here (waitpid on its pid: libuv waits
// only for the children of its own process handles).
struct SpawnedNode : NodeOf<uv_poll_t> {
    Process::ExitCb on_exit;
    pid_t pid = 0;
    int pidfd = -1;
    bool reaped = false;
    void drop() override { on_exit = nullptr; }
    ~SpawnedNode() override {
        if (pidfd >= 0) ::close(pidfd);
    }
};

int pidfd_open_of(pid_t pid) {
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

bool have_pidfds() {
    static const bool have = [] {
        int fd = pidfd_open_of(::getpid());
        if (fd < 0) return false;
        ::close(fd);
        return true;
    }();
    return have;
}

// Streams are Pipe or Tcp nodes; both start with their uv handle's node
// layout, so the stream calls go through the uv_stream_t and the callbacks
// through the node type recorded at init.
uv_stream_t *stream_of(Node *n) {
    return reinterpret_cast<uv_stream_t *>(n->handle());
}

template <typename F>
decltype(auto) with_stream_node(Node *n, F &&f) {
    if (n->handle()->type == UV_TCP) return f(static_cast<TcpNode *>(n));
    return f(static_cast<PipeNode *>(n));
}

Node *stream_node(uv_stream_t *s) {
    return static_cast<Node *>(s->data);
}

}  // namespace

// ---- Handle ----

Handle::Handle(Handle &&o) noexcept : n_(std::exchange(o.n_, nullptr)) {}

Handle &Handle::operator=(Handle &&o) noexcept {
    if (this != &o) {
        close();
        n_ = std::exchange(o.n_, nullptr);
    }
    return *this;
}

Handle::~Handle() {
    close();
}

void Handle::close() noexcept {
    if (!n_) return;
    Node *n = std::exchange(n_, nullptr);
    n->dropped = true;
    n->drop();
    if (!uv_is_closing(n->handle())) uv_close(n->handle(), free_node);
}

bool Handle::active() const {
    return n_ && uv_is_active(n_->handle());
}

void Handle::unref() {
    if (n_) uv_unref(n_->handle());
}

int Handle::fileno() const {
    uv_os_fd_t fd = -1;
    if (!n_ || uv_fileno(n_->handle(), &fd) != 0) return -1;
    return fd;
}

// ---- Timer ----

Timer::Timer(uv_loop_t *loop) {
    auto *n = new TimerNode;
    uv_timer_init(loop, &n->h);
    n_ = n;
}

void Timer::start(uint64_t ms, std::function<void()> cb, uint64_t repeat_ms) {
    if (!n_) return;
    auto *n = static_cast<TimerNode *>(n_);
    n->cb = std::move(cb);
    uv_timer_start(
        &n->h,
        [](uv_timer_t *h) noexcept {
            auto *tn = static_cast<TimerNode *>(TimerNode::of(h));
            run_copy(tn->cb, "timer");
        },
        ms, repeat_ms);
}

void Timer::stop() {
    if (n_) uv_timer_stop(&static_cast<TimerNode *>(n_)->h);
}

// ---- Signal ----

Signal::Signal(uv_loop_t *loop) {
    auto *n = new SignalNode;
    uv_signal_init(loop, &n->h);
    n_ = n;
}

int Signal::start(int signum, std::function<void(int)> cb) {
    if (!n_) return UV_EINVAL;
    auto *n = static_cast<SignalNode *>(n_);
    n->cb = std::move(cb);
    return uv_signal_start(
        &n->h,
        [](uv_signal_t *h, int sig) noexcept {
            run_copy(static_cast<SignalNode *>(SignalNode::of(h))->cb, "signal", sig);
        },
        signum);
}

void Signal::stop() {
    if (n_) uv_signal_stop(&static_cast<SignalNode *>(n_)->h);
}

// ---- Async ----

Async::Async(uv_loop_t *loop, std::function<void()> cb) {
    auto *n = new AsyncNode;
    n->cb = std::move(cb);
    if (uv_async_init(loop, &n->h, [](uv_async_t *h) noexcept {
            run_copy(static_cast<AsyncNode *>(AsyncNode::of(h))->cb, "async");
        }) != 0) {
        delete n;  // never a handle of the loop: nothing to close
        return;
    }
    n_ = n;
}

void Async::send() {
    if (n_) uv_async_send(&static_cast<AsyncNode *>(n_)->h);
}

// ---- Stream ----

namespace {

// One slab for every read: libuv hands each buffer to the read callback
// before it asks for the next one, and the callback does not keep it.
void alloc_slab(uv_handle_t *, size_t, uv_buf_t *buf) noexcept {
    static thread_local char slab[65536];
    buf->base = slab;
    buf->len = sizeof slab;
}

void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) noexcept {
    if (n == 0) return;  // EAGAIN
    with_stream_node(stream_node(s), [&](auto *sn) {
        if (n < 0) uv_read_stop(s);
        run_copy(sn->on_read, "stream read", n, n > 0 ? buf->base : nullptr);
    });
}

struct WriteReq {
    uv_write_t req{};
    std::string data;
    Stream::DoneCb done;
};

}  // namespace

int Stream::read_start(ReadCb cb) {
    if (!n_) return UV_EINVAL;
    return with_stream_node(n_, [&](auto *sn) {
        sn->on_read = std::move(cb);
        return uv_read_start(stream_of(n_), alloc_slab, on_read);
    });
}

void Stream::read_stop() {
    if (n_) uv_read_stop(stream_of(n_));
}

int Stream::write(std::string data, DoneCb done) {
    if (!n_) return UV_EINVAL;
    auto *w = new WriteReq;
    w->data = std::move(data);
    w->done = std::move(done);
    w->req.data = w;
    uv_buf_t b = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    // A write cancelled by the close reports before the node is freed.
    int rc = uv_write(&w->req, stream_of(n_), &b, 1, [](uv_write_t *r, int status) noexcept {
        auto *wr = static_cast<WriteReq *>(r->data);
        if (!stream_node(r->handle)->dropped) run_once(wr->done, "stream write", status);
        delete wr;
    });
    if (rc != 0) delete w;
    return rc;
}

int Stream::shutdown(DoneCb done) {
    if (!n_) return UV_EINVAL;
    return with_stream_node(n_, [&](auto *sn) {
        sn->on_shutdown = std::move(done);
        sn->shutdown_req.data = static_cast<Node *>(sn);
        int rc = uv_shutdown(&sn->shutdown_req, stream_of(n_), [](uv_shutdown_t *r, int status) {
            with_stream_node(static_cast<Node *>(r->data), [&](auto *node) {
                run_once(node->on_shutdown, "stream shutdown", status);
            });
        });
        if (rc != 0) sn->on_shutdown = nullptr;
        return rc;
    });
}

int Stream::listen(int backlog, DoneCb on_connection) {
    if (!n_) return UV_EINVAL;
    return with_stream_node(n_, [&](auto *sn) {
        sn->on_connection = std::move(on_connection);
        int rc = uv_listen(stream_of(n_), backlog, [](uv_stream_t *s, int status) noexcept {
            with_stream_node(stream_node(s), [&](auto *node) {
                run_copy(node->on_connection, "stream connection", status);
            });
        });
        if (rc != 0) sn->on_connection = nullptr;
        return rc;
    });
}

int Stream::accept(Stream &client) {
    if (!n_ || !client.n_) return UV_EINVAL;
    return uv_accept(stream_of(n_), stream_of(client.n_));
}

// ---- Pipe, Tcp ----

Pipe::Pipe(uv_loop_t *loop) {
    auto *n = new PipeNode;
    uv_pipe_init(loop, &n->h, 0);
    n_ = n;
}

void Pipe::connect(const std::string &path, DoneCb done) {
    if (!n_) return;
    auto *n = static_cast<PipeNode *>(n_);
    n->on_connect = std::move(done);
    n->connect_req.data = n;
    uv_pipe_connect(&n->connect_req, &n->h, path.c_str(), [](uv_connect_t *r, int status) {
        run_once(static_cast<PipeNode *>(r->data)->on_connect, "pipe connect", status);
    });
}

int Pipe::bind(const std::string &path) {
    if (!n_) return UV_EINVAL;
    return uv_pipe_bind(&static_cast<PipeNode *>(n_)->h, path.c_str());
}

int Pipe::open(int fd) {
    if (!n_) return UV_EINVAL;
    return uv_pipe_open(&static_cast<PipeNode *>(n_)->h, fd);
}

size_t Stream::write_queue_size() const {
    return n_ ? uv_stream_get_write_queue_size(stream_of(n_)) : 0;
}

Tcp::Tcp(uv_loop_t *loop) {
    auto *n = new TcpNode;
    uv_tcp_init(loop, &n->h);
    n_ = n;
}

int Tcp::connect(const struct sockaddr *addr, DoneCb done) {
    if (!n_) return UV_EINVAL;
    auto *n = static_cast<TcpNode *>(n_);
    n->on_connect = std::move(done);
    n->connect_req.data = n;
    int rc = uv_tcp_connect(&n->connect_req, &n->h, addr, [](uv_connect_t *r, int status) {
        run_once(static_cast<TcpNode *>(r->data)->on_connect, "tcp connect", status);
    });
    if (rc != 0) n->on_connect = nullptr;
    return rc;
}

// ---- Poll ----

static_assert(Poll::kReadable == static_cast<int>(UV_READABLE) &&
                  Poll::kWritable == static_cast<int>(UV_WRITABLE),
              "Poll's events are libuv's");

Poll::Poll(uv_loop_t *loop, int socket) {
    auto *n = new PollNode;
    if (uv_poll_init_socket(loop, &n->h, socket) != 0) {
        delete n;  // never a handle of the loop: nothing to close
        return;
    }
    n_ = n;
}

int Poll::start(int events, Cb cb) {
    if (!n_) return UV_EINVAL;
    auto *n = static_cast<PollNode *>(n_);
    n->cb = std::move(cb);
    return uv_poll_start(&n->h, events, [](uv_poll_t *h, int status, int ev) noexcept {
        run_copy(static_cast<PollNode *>(PollNode::of(h))->cb, "poll", status, ev);
    });
}

void Poll::stop() {
    if (n_) uv_poll_stop(&static_cast<PollNode *>(n_)->h);
}

// ---- Process ----

namespace {

// posix_spawn's file actions for one of the child's stdio descriptors: the
// child's end of a new pipe, or /dev/null. *parent_fd: the end the Pipe
// object takes.
int stdio_action(posix_spawn_file_actions_t *fa, int child_fd, bool pipe, int *parent_fd,
                 int *child_end) {
    if (!pipe)
        return posix_spawn_file_actions_addopen(fa, child_fd, "/dev/null",
                                                child_fd == 0 ? O_RDONLY : O_WRONLY, 0);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return errno;
    *parent_fd = child_fd == 0 ? fds[1] : fds[0];
    *child_end = child_fd == 0 ? fds[0] : fds[1];
    return posix_spawn_file_actions_adddup2(fa, *child_end, child_fd);
}

}  // namespace

int Process::spawn_without_fork(uv_loop_t *loop, const SpawnOptions &o, ExitCb on_exit,
                                char *const *args, char *const *env) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (o.detached) flags |= POSIX_SPAWN_SETSID;
    posix_spawnattr_setflags(&attr, flags);
    Pipe *pipes[3] = {o.in, o.out, o.err};
    int parent[3] = {-1, -1, -1}, child[3] = {-1, -1, -1};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = stdio_action(&fa, i, pipes[i] && pipes[i]->n_, &parent[i], &child[i]);
    if (rc == 0 && !o.cwd.empty()) rc = posix_spawn_file_actions_addchdir_np(&fa, o.cwd.c_str());
    pid_t pid = 0;
    if (rc == 0) {
        const char *file = o.file.empty() ? args[0] : o.file.c_str();
        // Looked up in PATH unless it names a directory, as uv_spawn does.
        rc = std::strchr(file, '/') ? posix_spawn(&pid, file, &fa, &attr, args, env)
                                    : posix_spawnp(&pid, file, &fa, &attr, args, env);
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    for (int fd : child)
        if (fd >= 0) ::close(fd);
    int pidfd = rc == 0 ? pidfd_open_of(pid) : -1;
    if (rc == 0 && pidfd < 0) {  // not expected once have_pidfds(): the child goes
        rc = errno;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
    if (rc != 0) {
        for (int fd : parent)
            if (fd >= 0) ::close(fd);
        return -rc;
    }
    for (int i = 0; i < 3; i++)
        if (parent[i] >= 0 &&
            uv_pipe_open(reinterpret_cast<uv_pipe_t *>(stream_of(pipes[i]->n_)), parent[i]) != 0)
            ::close(parent[i]);  // that stream then reads EOF or fails its writes
    auto *n = new SpawnedNode;
    n->on_exit = std::move(on_exit);
    n->pid = pid;
    n->pidfd = pidfd;
    uv_poll_init(loop, &n->h, pidfd);
    n_ = n;
    uv_poll_start(&n->h, UV_READABLE, [](uv_poll_t *h, int, int) noexcept {
        auto *sn = static_cast<SpawnedNode *>(SpawnedNode::of(h));
        int status = 0;
        pid_t r = ::waitpid(sn->pid, &status, WNOHANG);
        if (r == 0) return;  // not yet (a spurious wake-up)
        uv_poll_stop(h);
        sn->reaped = true;
        // -1: reaped by someone else (SIGCHLD ignored), its status unknown.
        int64_t code = r < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 0;
        int sig = r > 0 && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        run_once(sn->on_exit, "process exit", code, sig);
    });
    return 0;
}

int Process::spawn(uv_loop_t *loop, const SpawnOptions &o, ExitCb on_exit) {
    close();
    if (o.args.empty()) return UV_EINVAL;
    std::vector<char *> args, env;
    for (const auto &a : o.args)
        args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    if (o.env) {
        for (const auto &e : *o.env)
            env.push_back(const_cast<char *>(e.c_str()));
        env.push_back(nullptr);
    }
    uv_stdio_container_t stdio[4];
    Pipe *pipes[3] = {o.in, o.out, o.err};
    for (int i = 0; i < 3; i++) {
        stdio[i].flags = UV_IGNORE;
        if (o.terminal_fd >= 0) {
            stdio[i].flags = UV_INHERIT_FD;
            stdio[i].data.fd = o.terminal_fd;
        } else if (pipes[i] && pipes[i]->n_) {
            // The child's end: readable for stdin, writable for stdout/stderr.
            stdio[i].flags = static_cast<uv_stdio_flags>(
                UV_CREATE_PIPE | (i == 0 ? UV_READABLE_PIPE : UV_WRITABLE_PIPE));
            stdio[i].data.stream = stream_of(pipes[i]->n_);
        }
    }
    uv_process_options_t opt{};
    opt.exit_cb = [](uv_process_t *h, int64_t status, int sig) noexcept {
        run_once(static_cast<ProcessNode *>(ProcessNode::of(h))->on_exit, "process exit", status,
                 sig);
    };
    opt.file = o.file.empty() ? args[0] : o.file.c_str();
    opt.args = args.data();
    opt.env = o.env ? env.data() : nullptr;
    opt.cwd = o.cwd.empty() ? nullptr : o.cwd.c_str();
    if (o.detached) opt.flags |= UV_PROCESS_DETACHED;
    if (o.uid) {
        opt.flags |= UV_PROCESS_SETUID;
        opt.uid = *o.uid;
    }
    if (o.gid) {
        opt.flags |= UV_PROCESS_SETGID;
        opt.gid = *o.gid;
    }
    opt.stdio_count = 3;
    if (o.extra && o.extra->n_) {
        stdio[3].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
        stdio[3].data.stream = stream_of(o.extra->n_);
        opt.stdio_count = 4;
    }
    opt.stdio = stdio;
    if (o.without_fork && !o.uid && !o.gid && o.terminal_fd < 0 && !o.extra && have_pidfds())
        return spawn_without_fork(loop, o, std::move(on_exit), args.data(),
                                  o.env ? env.data() : environ);
    auto *n = new ProcessNode;
    n->on_exit = std::move(on_exit);
    int rc = uv_spawn(loop, &n->h, &opt);
    n_ = n;
    if (rc != 0) close();  // a failed uv_spawn leaves the handle initialised
    return rc;
}

int Process::pid() const {
    if (!n_) return 0;
    if (auto *sn = dynamic_cast<SpawnedNode *>(n_)) return sn->pid;
    return static_cast<ProcessNode *>(n_)->h.pid;
}

bool Process::spawned_without_fork() const {
    return n_ && dynamic_cast<SpawnedNode *>(n_) != nullptr;
}

int Process::kill(int signum) {
    if (!n_) return UV_EINVAL;
    if (auto *sn = dynamic_cast<SpawnedNode *>(n_)) {
        if (sn->reaped) return UV_ESRCH;
        // Through the pidfd: never another process that took a reused pid.
        if (::syscall(SYS_pidfd_send_signal, sn->pidfd, signum, nullptr, 0) != 0) return -errno;
        return 0;
    }
    return uv_process_kill(&static_cast<ProcessNode *>(n_)->h, signum);
}

// ---- deferred calls, the thread pool ----

namespace {

struct Deferred {
    uv_timer_t h;
    std::function<void()> fn;
};

// The calls not yet run, per loop (cancel_deferred). Loop thread only.
std::map<uv_loop_t *, std::set<Deferred *>> &pending_deferred() {
    static std::map<uv_loop_t *, std::set<Deferred *>> pending;
    return pending;
}

void free_deferred(uv_handle_t *h) noexcept {
    delete static_cast<Deferred *>(h->data);
}

void close_deferred(Deferred *d) {
    auto &pending = pending_deferred();
    auto it = pending.find(d->h.loop);
    if (it != pending.end()) {
        it->second.erase(d);
        if (it->second.empty()) pending.erase(it);
    }
    uv_close(reinterpret_cast<uv_handle_t *>(&d->h), free_deferred);
}

}  // namespace

void defer(uv_loop_t *loop, std::function<void()> fn, uint64_t delay_ms) {
    auto *d = new Deferred;
    d->fn = std::move(fn);
    uv_timer_init(loop, &d->h);
    d->h.data = d;
    pending_deferred()[loop].insert(d);
    uv_timer_start(
        &d->h,
        [](uv_timer_t *h) noexcept {
            auto *dd = static_cast<Deferred *>(h->data);
            run_guarded(dd->fn, "deferred call");
            dd->fn = nullptr;  // what it captured goes now, not at the close
            close_deferred(dd);
        },
        delay_ms, 0);
}

void cancel_deferred(uv_loop_t *loop) {
    auto &pending = pending_deferred();
    auto it = pending.find(loop);
    if (it == pending.end()) return;
    std::set<Deferred *> calls = std::move(it->second);
    pending.erase(it);
    for (Deferred *d : calls) {
        d->fn = nullptr;
        uv_timer_stop(&d->h);
        uv_close(reinterpret_cast<uv_handle_t *>(&d->h), free_deferred);
    }
}

namespace {
struct PoolWork {
    uv_work_t req;
    std::function<void()> work;
};
}  // namespace

void run_in_pool(uv_loop_t *loop, std::function<void()> work) {
    auto *w = new PoolWork{{}, std::move(work)};
    w->req.data = w;
    int rc = uv_queue_work(
        loop, &w->req,
        [](uv_work_t *r) { run_guarded(static_cast<PoolWork *>(r->data)->work, "thread pool"); },
        [](uv_work_t *r, int) { delete static_cast<PoolWork *>(r->data); });
    if (rc != 0) {  // only when the loop is closing: run it here
        run_guarded(w->work, "thread pool");
        delete w;
    }
}

int log_open_handles(uv_loop_t *loop, const char *who) {
    struct Ctx {
        const char *who;
        int count;
    } ctx{who, 0};
    uv_walk(
        loop,
        [](uv_handle_t *h, void *arg) {
            auto *c = static_cast<Ctx *>(arg);
            c->count++;
            LOG_WARN("%s: %s handle still open%s", c->who, uv_handle_type_name(h->type),
                     uv_is_closing(h) ? " (closing)" : "");
        },
        &ctx);
    return ctx.count;
}

}  // namespace uv
}  // namespace sk
