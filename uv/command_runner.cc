#include "uv/command_runner.h"

#include <signal.h>
#include <uv.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "common/log.h"
#include "uv/handles.h"

namespace sk::agent {
namespace {

constexpr size_t kMaxOutput = 64 << 10;
constexpr size_t kMaxErrors = 4 << 10;

void append_bounded(std::string *to, const char *data, ssize_t n, size_t max) {
    if (n > 0 && to->size() < max)
        to->append(data, std::min(static_cast<size_t>(n), max - to->size()));
}

// Owns its handles and itself: freed once it reported and the process was
// reaped (a killed process is waited for, so it leaves no zombie).
struct Cmd {
    Process proc;
    Pipe in, out, err;
    Timer timer;
    bool exited = false, eof = false, err_eof = false, timed_out = false, reported = false;
    size_t max_output = kMaxOutput;
    std::shared_ptr<int> token = std::make_shared<int>(0);  // gone with the Cmd
    CommandResult result;
    std::function<void(const CommandResult &)> done;

    void maybe_report();
    void on_exit(int64_t status, int sig);
};

void Cmd::maybe_report() {
    if (reported || !((exited && eof && err_eof) || timed_out)) return;
    reported = true;
    try {
        if (done) done(result);
    } catch (const std::exception &e) {
        LOG_ERROR("command callback: unexpected exception: %s", e.what());
    } catch (...) {
        LOG_ERROR("command callback: unexpected exception");
    }
    done = nullptr;
    timer.close();
    in.close();
    out.close();
    err.close();
    if (exited) delete this;
}

void Cmd::on_exit(int64_t status, int sig) {
    exited = true;
    if (reported) {  // timed out earlier
        delete this;
        return;
    }
    result.ran = !timed_out;
    result.exit_code = sig ? 128 + sig : static_cast<int>(status);
    maybe_report();
}

}  // namespace

std::string expand_job_command(const std::string &tmpl, uint32_t job_id) {
    std::string cmd;
    for (size_t i = 0; i < tmpl.size(); i++) {
        if (tmpl.compare(i, 5, "{job}") == 0) {
            cmd += std::to_string(job_id);
            i += 4;
        } else {
            cmd += tmpl[i];
        }
    }
    return cmd;
}

void run_command_async(uv_loop_t *loop, const std::string &cmdline, uint64_t timeout_ms,
                       std::function<void(const CommandResult &)> done) {
    run_program_async(loop, {"/bin/sh", "-c", cmdline}, {}, timeout_ms, std::move(done));
}

namespace {

// Starts o (args, env, identity set by the caller) with its output read into
// a Cmd that reports to done.
std::function<void()> start_cmd(uv_loop_t *loop, SpawnOptions o, size_t max_output,
                                uint64_t timeout_ms,
                                std::function<void(const CommandResult &)> done,
                                const std::string *input = nullptr) {
    auto *c = new Cmd;
    std::function<void()> kill = [c, token = std::weak_ptr<int>(c->token)] {
        if (!token.expired() && !c->exited) c->proc.kill(SIGKILL);
    };
    c->done = std::move(done);
    c->max_output = max_output;
    c->timer = Timer(loop);
    c->out = Pipe(loop);
    c->err = Pipe(loop);
    std::string program = o.args.empty() ? std::string() : o.args[0];
    o.out = &c->out;
    o.err = &c->err;
    if (input) {
        c->in = Pipe(loop);
        o.in = &c->in;
    }
    int rc = o.args.empty() ? UV_EINVAL : c->proc.spawn(loop, o, [c](int64_t status, int sig) {
        c->on_exit(status, sig);
    });
    if (rc != 0) {
        c->exited = true;
        c->eof = true;
        c->err_eof = true;
        c->result.error = "cannot run " + program + ": " + uv_strerror(rc);
        c->timer.start(0, [c] { c->maybe_report(); });
        return kill;
    }
    if (input) {
        // A program that exits without reading all of it only fails the
        // write (EPIPE, which libuv reports, SIGPIPE being ignored).
        c->in.write(*input);
        c->in.shutdown([c](int) { c->in.close(); });
    }
    c->out.read_start([c](ssize_t n, const char *data) {
        append_bounded(&c->result.output, data, n, c->max_output);
        if (n < 0) {
            c->eof = true;
            c->maybe_report();
        }
    });
    c->err.read_start([c](ssize_t n, const char *data) {
        append_bounded(&c->result.errors, data, n, kMaxErrors);
        if (n < 0) {
            c->err_eof = true;
            c->maybe_report();
        }
    });
    c->timer.start(timeout_ms, [c] {
        if (c->exited) return;
        c->timed_out = true;
        c->result.ran = false;
        c->result.error = "timed out";
        c->proc.kill(SIGKILL);
        c->maybe_report();
    });
    return kill;
}

}  // namespace

std::function<void()> run_program_as_async(uv_loop_t *loop, std::vector<std::string> argv,
                                           const RunAs &as, uint64_t timeout_ms,
                                           std::function<void(const CommandResult &)> done) {
    SpawnOptions o;
    o.args = std::move(argv);
    o.env = as.env;
    o.cwd = as.cwd;
    o.uid = as.uid;
    o.gid = as.gid;
    return start_cmd(loop, std::move(o), as.max_output, timeout_ms, std::move(done));
}

void run_program_with_input(uv_loop_t *loop, std::vector<std::string> argv,
                            std::vector<std::string> env, const std::string &input,
                            uint64_t timeout_ms, std::function<void(const CommandResult &)> done) {
    SpawnOptions o;
    o.args = std::move(argv);
    o.env = std::move(env);
    o.without_fork = true;
    start_cmd(loop, std::move(o), kMaxOutput, timeout_ms, std::move(done), &input);
}

void run_program_async(uv_loop_t *loop, std::vector<std::string> argv,
                       const std::vector<std::string> &extra_env, uint64_t timeout_ms,
                       std::function<void(const CommandResult &)> done) {
    SpawnOptions o;
    o.args = std::move(argv);
    if (!extra_env.empty()) {
        std::vector<std::string> env;
        auto overridden = [&extra_env](const char *kv) {
            const char *eq = strchr(kv, '=');
            size_t n = eq ? static_cast<size_t>(eq - kv) + 1 : strlen(kv);
            for (const auto &e : extra_env)
                if (e.compare(0, n, kv, n) == 0) return true;
            return false;
        };
        for (char **e = environ; e && *e; ++e)
            if (!overridden(*e)) env.emplace_back(*e);
        env.insert(env.end(), extra_env.begin(), extra_env.end());
        o.env = std::move(env);
    }
    // The agent is big (a connection per node identity) and runs these per
    // registration: no fork() of it (SpawnOptions::without_fork).
    o.without_fork = true;
    start_cmd(loop, std::move(o), kMaxOutput, timeout_ms, std::move(done));
}
struct CommandQueue::State {
    struct Waiting {
        std::string cmdline;
        std::vector<Done> done;
    };
    uv_loop_t *loop = nullptr;
    unsigned limit = 1;
    uint64_t timeout_ms = 0;
    unsigned running = 0;
    bool closed = false;
    std::deque<std::shared_ptr<Waiting>> queue;

    static void pump(const std::shared_ptr<State> &st) {
        while (!st->closed && st->running < st->limit && !st->queue.empty()) {
            std::shared_ptr<Waiting> w = std::move(st->queue.front());
            st->queue.pop_front();
            st->running++;
            run_command_async(st->loop, w->cmdline, st->timeout_ms,
                              [st, w](const CommandResult &r) {
                                  st->running--;
                                  for (auto &d : w->done)
                                      d(r);
                                  pump(st);
                              });
        }
    }
};

CommandQueue::CommandQueue(uv_loop_t *loop, unsigned limit, uint64_t timeout_ms)
    : st_(std::make_shared<State>()) {
    st_->loop = loop;
    st_->limit = std::max(1u, limit);
    st_->timeout_ms = timeout_ms;
}

CommandQueue::~CommandQueue() {
    st_->closed = true;
    st_->queue.clear();
}

void CommandQueue::run(const std::string &cmdline, Done done) {
    for (auto &w : st_->queue)
        if (w->cmdline == cmdline) {
            w->done.push_back(std::move(done));
            return;
        }
    auto w = std::make_shared<State::Waiting>();
    w->cmdline = cmdline;
    w->done.push_back(std::move(done));
    st_->queue.push_back(std::move(w));
    State::pump(st_);
}

size_t CommandQueue::waiting() const {
    return st_->queue.size();
}

unsigned CommandQueue::running() const {
    return st_->running;
}

}  // namespace sk::agent
