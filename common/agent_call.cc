#include "common/agent_call.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

namespace sk {
namespace {

class Fd {
  public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) close(fd_);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int get() const { return fd_; }

  private:
    int fd_;
};

std::string sys_error(const std::string &what, int err) {
    return what + ": " + strerror(err);
}

// Waits for `events` until the deadline; Timeout when it passes.
Status wait_fd(int fd, short events, int64_t deadline, const std::string &what) {
    for (;;) {
        int64_t left = deadline - monotonic_ms();
        if (left <= 0) return fail(Error::Timeout, what + ": no answer within the timeout");
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, static_cast<int>(left));
        if (n > 0) return {};
        if (n < 0 && errno != EINTR) return fail(Error::Io, sys_error(what + ": poll", errno));
    }
}

Status connect_unix(int fd, const std::string &path, int64_t deadline) {
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path)
        return fail(Error::InvalidArgument, "agent socket path too long: " + path);
    memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    // Blocking, bounded by SO_SNDTIMEO: while the agent's listen backlog is
    // full (a burst of job starts, another user's connect loop), a unix
    // socket's connect waits in the kernel's queue for room; a non-blocking
    // one would get EAGAIN and no event for when there is room.
    int err = EAGAIN;  // what a bound that ran out before the first try reads as
    for (;;) {
        int64_t left = deadline - monotonic_ms();
        if (left <= 0) break;
        struct timeval tv = {static_cast<time_t>(left / 1000),
                             static_cast<suseconds_t>((left % 1000) * 1000)};
        if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
            return fail(Error::Io, sys_error("setsockopt SO_SNDTIMEO", errno));
        err = connect(fd, reinterpret_cast<struct sockaddr *>(&sa), sizeof sa) == 0 ? 0 : errno;
        if (err != EINTR) break;
    }
    if (err == ENOENT || err == ECONNREFUSED)
        return fail(Error::Unavailable, sys_error("agent socket " + path, err) +
                                            " (is slurm-k8s-agent running on this node?)");
    if (err == EAGAIN || err == EINTR)
        return fail(Error::Timeout,
                    "connect " + path + ": the agent accepted no connection within the timeout");
    if (err != 0) return fail(Error::Io, sys_error("connect " + path, err));
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return fail(Error::Io, sys_error("fcntl O_NONBLOCK", errno));
    return {};
}

Status send_all(int fd, const std::string &data, int64_t deadline) {
    size_t off = 0;
    while (off < data.size()) {
        ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += static_cast<size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (auto s = wait_fd(fd, POLLOUT, deadline, "send to agent"); !s) return s;
        } else {
            return fail(Error::Unavailable, sys_error("send to agent", errno));
        }
    }
    return {};
}

Result<std::string> read_line(int fd, int64_t deadline) {
    proto::LineBuffer lb;
    char buf[8192];
    for (;;) {
        if (auto line = lb.next()) return std::move(*line);
        if (auto s = wait_fd(fd, POLLIN, deadline, "reply from agent"); !s) return s.failure();
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0) return fail(Error::Unavailable, "agent closed the connection without a reply");
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return fail(Error::Io, sys_error("recv from agent", errno));
        }
        if (auto s = lb.feed(buf, static_cast<size_t>(n)); !s) return s.failure();
    }
}

}  // namespace

std::string admin_socket_for(const std::string &socket_path) {
    size_t slash = socket_path.rfind('/');
    if (slash == std::string::npos) return "admin/" + socket_path;
    return socket_path.substr(0, slash + 1) + "admin/" + socket_path.substr(slash + 1);
}

Result<std::string> agent_exchange(const std::string &path, const std::string &line,
                                   int timeout_ms) {
    const int64_t deadline = monotonic_ms() + (timeout_ms > 0 ? timeout_ms : 1);
    Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));  // non-blocking once connected
    if (fd.get() < 0) return fail(Error::Io, sys_error("socket", errno));
    if (auto s = connect_unix(fd.get(), path, deadline); !s) return s.failure();
    if (auto s = send_all(fd.get(), line, deadline); !s) {
        // The agent may have answered and closed before reading (a refusal
        // at accept): its reply is still queued here, and says more.
        if (auto early = read_line(fd.get(), deadline)) return early;
        return s.failure();
    }
    return read_line(fd.get(), deadline);
}

}  // namespace sk
