// libskuv: the one way the agent and the shim own libuv handles (as uvw
// does). The owner holds a handle object; the libuv handle and the callbacks
// live in a heap node. Destroying or close()-ing the object drops the
// callbacks (and what they captured) at once and starts uv_close; the close
// callback frees the node. So nothing dangles when the owner dies while a
// close is pending, and no callback fires after its owner closed the handle,
// even when the owner is destroyed from inside one of its own callbacks.
//
// Callbacks are std::function, called through noexcept trampolines that log
// an exception instead of letting it into libuv. Every method of a closed (or
// moved-from, or default-constructed) object is a no-op; the int-returning
// ones return UV_EINVAL then. Loop thread only.
//
// Teardown: once every owner is gone, run the loop until it has no handle
// (the close callbacks free the nodes), then uv_loop_close() returns 0.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

typedef struct uv_loop_s uv_loop_t;
struct sockaddr;

namespace sk {
// Inline: the agent and the shim name these unqualified (Timer, Pipe, ...).
inline namespace uv {

namespace detail {
struct Node;
}

// What every handle object has. Movable: the node does not know its owner's
// address, so moving the object moves the ownership only.
class Handle {
  public:
    Handle(const Handle &) = delete;
    Handle &operator=(const Handle &) = delete;
    Handle(Handle &&o) noexcept;
    Handle &operator=(Handle &&o) noexcept;  // closes the handle it held
    ~Handle();

    // Drops the callbacks and starts uv_close; idempotent.
    void close() noexcept;
    // Holds a handle (not closed, not moved from).
    explicit operator bool() const { return n_ != nullptr; }
    bool active() const;  // uv_is_active: a started timer, a reading stream, a live process
    void unref();         // the loop may end while this handle is active
    // The handle's descriptor (uv_fileno), owned by the handle: -1 when it
    // holds none (closed, not yet bound or opened, or a handle type without one).
    int fileno() const;

  protected:
    Handle() = default;
    explicit Handle(detail::Node *n) : n_(n) {}
    detail::Node *n_ = nullptr;
    friend class Process;  // hands pipes to uv_spawn
};

class Timer : public Handle {
  public:
    Timer() = default;
    explicit Timer(uv_loop_t *loop);
    // (Re)arms: fires after ms, then every repeat_ms when non-zero. The
    // callback may re-arm, stop or destroy the Timer.
    void start(uint64_t ms, std::function<void()> cb, uint64_t repeat_ms = 0);
    void stop();
};

class Signal : public Handle {
  public:
    Signal() = default;
    explicit Signal(uv_loop_t *loop);
    int start(int signum, std::function<void(int signum)> cb);
    void stop();
};

// A wake-up from another thread (uv_async_t): send() may be called from any
// thread while the object is alive (its owner closes it on the loop thread
// only once no other thread can call send() any more); the callback runs on
// the loop, once for one or several sends since the last run. An object
// whose uv_async_init failed holds nothing (false).
class Async : public Handle {
  public:
    Async() = default;
    Async(uv_loop_t *loop, std::function<void()> cb);
    void send();
};

// A byte stream (Pipe, Tcp).
class Stream : public Handle {
  public:
    // n > 0: n bytes at data, valid during the call only. n < 0: UV_EOF or
    // an error; reading has stopped (close the stream or read_start again).
    using ReadCb = std::function<void(ssize_t n, const char *data)>;
    using DoneCb = std::function<void(int status)>;

    int read_start(ReadCb cb);
    void read_stop();
    // Queues a copy of data. done, when given, gets the status, unless the
    // stream was closed first (then the write is cancelled unreported).
    int write(std::string data, DoneCb done = {});
    // Shuts the write side down once the queued writes went out.
    int shutdown(DoneCb done);
    // Bytes queued by write() and not yet written (uv_stream_get_write_queue_size):
    // a relay stops reading its source while the sink holds more than its bound.
    size_t write_queue_size() const;
    // Listens (a bound Pipe): on_connection(status) runs once for each
    // connection waiting (status < 0: libuv's error), which accept() takes.
    int listen(int backlog, DoneCb on_connection);
    // Takes one waiting connection into `client` (a new stream of the same
    // kind on the same loop, not yet used); 0 or a negative libuv error.
    int accept(Stream &client);

  protected:
    Stream() = default;
    using Handle::Handle;
};

class Pipe : public Stream {
  public:
    Pipe() = default;
    explicit Pipe(uv_loop_t *loop);  // a unix socket, or a child's stdout/stderr (Process)
    void connect(const std::string &path, DoneCb done);
    // Binds a unix socket at path (which must not exist); 0 or a negative
    // libuv error.
    int bind(const std::string &path);
    // Takes fd (a pipe, a socket, a pseudo-terminal master), which the Pipe
    // closes; 0 or a negative libuv error (fd is then not taken).
    int open(int fd);
};

class Tcp : public Stream {
  public:
    Tcp() = default;
    explicit Tcp(uv_loop_t *loop);
    int connect(const struct sockaddr *addr, DoneCb done);
};

// Readiness of a socket another library does the I/O on (libcurl's):
// uv_poll_t. The callback gets libuv's status (< 0: an error) and the events
// seen; it may stop, close or destroy the Poll. An object whose
// uv_poll_init_socket failed holds nothing (false).
class Poll : public Handle {
  public:
    enum : int { kReadable = 1, kWritable = 2 };  // UV_READABLE, UV_WRITABLE
    using Cb = std::function<void(int status, int events)>;
    Poll() = default;
    Poll(uv_loop_t *loop, int socket);
    int start(int events, Cb cb);  // (re)starts with these events and this callback
    void stop();
};

struct SpawnOptions {
    std::vector<std::string> args;  // args[0]: the program, looked up in PATH unless `file`
    std::string file;               // the executable when it differs from args[0]
    std::optional<std::vector<std::string>> env;  // "NAME=value"; unset: this process's
    std::string cwd;                              // empty: this process's
    bool detached = false;                        // own session and process group (setsid)
    std::optional<uid_t> uid;
    std::optional<gid_t> gid;
    // stdin reads from `in`, stdout/stderr go to `out`/`err` (each made on
    // the same loop, not yet used); /dev/null for a null one. Unless
    // terminal_fd >= 0: then all three are that descriptor (a pseudo-terminal's
    // slave end), which the caller keeps and closes after the spawn.
    Pipe *in = nullptr;
    Pipe *out = nullptr;
    Pipe *err = nullptr;
    int terminal_fd = -1;
    // The child's descriptor 3 writes into `extra` (made on the same loop,
    // not yet used); the child has no descriptor 3 when null.
    Pipe *extra = nullptr;
    // Started by posix_spawn (glibc's clone(CLONE_VM | CLONE_VFORK): no copy
    // of this process's page tables, which fork(), and so uv_spawn, costs in
    // proportion to the parent's memory) and watched through a pidfd, for a
    // big daemon's short commands. Taken only without uid, gid,
    // terminal_fd and extra, and where the kernel has pidfds (5.3+); uv_spawn
    // otherwise. The same child either way: signals at their defaults and
    // unblocked, the pipes, cwd, env and setsid as asked.
    bool without_fork = false;
};

// A child process. The handle stays open after the exit (pid() still
// answers) until the owner closes it. Closing it before the exit leaves the
// child unwatched by the loop: keep it until on_exit to have the child reaped.
class Process : public Handle {
  public:
    using ExitCb = std::function<void(int64_t status, int term_signal)>;

    Process() = default;
    // Closes a handle held before. Returns 0 or a negative libuv error (the
    // object is then closed, and on_exit never runs).
    int spawn(uv_loop_t *loop, const SpawnOptions &opt, ExitCb on_exit);
    int pid() const;  // 0 when closed
    int kill(int signum);
    // Started by posix_spawn and watched through a pidfd (without_fork taken).
    bool spawned_without_fork() const;

  private:
    int spawn_without_fork(uv_loop_t *loop, const SpawnOptions &o, ExitCb on_exit,
                           char *const *args, char *const *env);
};

// Runs fn on the next loop iteration (never inside the caller), or after
// delay_ms. The call owns its handle and frees it once it ran, so a retry
// needs no self-owning Timer (a Timer whose callback holds it never closes).
void defer(uv_loop_t *loop, std::function<void()> fn, uint64_t delay_ms = 0);

// Runs work on libuv's thread pool (it must not touch the loop or anything
// the loop's thread uses); the loop stays alive until it finished.
void run_in_pool(uv_loop_t *loop, std::function<void()> work);

// Drops every call deferred on `loop` that has not run yet, without running
// it, and closes its handle: for teardown, once the objects those calls
// point to are gone. Only the loop's thread may call defer and this.
void cancel_deferred(uv_loop_t *loop);

// For a daemon's last words: logs every handle still on the loop (each is a
// leak of memory and maybe a descriptor) and returns how many there are.
int log_open_handles(uv_loop_t *loop, const char *who);

}  // namespace uv
}  // namespace sk
