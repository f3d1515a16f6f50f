#include "agent/command_runner.h"

#include <signal.h>
#include <uv.h>

#include <exception>

#include "common/log.h"

namespace sk::agent {
namespace {

constexpr size_t kMaxOutput = 64 << 10;

// Owns every handle; freed when the last one is closed.
struct Cmd {
    uv_process_t proc;
    uv_pipe_t out;
    uv_timer_t timer;
    int open = 0;
    bool exited = false, eof = false, timed_out = false, reported = false;
    CommandResult result;
    std::function<void(const CommandResult &)> done;

    void close_all();
    void maybe_report();
};

void on_closed(uv_handle_t *h) noexcept {
    auto *c = static_cast<Cmd *>(h->data);
    if (--c->open == 0) delete c;
}

void close_one(uv_handle_t *h) {
    if (!uv_is_closing(h)) uv_close(h, on_closed);
}

void Cmd::close_all() {
    close_one(reinterpret_cast<uv_handle_t *>(&timer));
    close_one(reinterpret_cast<uv_handle_t *>(&out));
    // A killed process is closed once its exit is seen (so it is reaped).
    if (exited) close_one(reinterpret_cast<uv_handle_t *>(&proc));
}

void Cmd::maybe_report() {
    if (reported || !((exited && eof) || timed_out)) return;
    reported = true;
    try {
        if (done) done(result);
    } catch (const std::exception &e) {
        LOG_ERROR("command callback: unexpected exception: %s", e.what());
    } catch (...) {
        LOG_ERROR("command callback: unexpected exception");
    }
    done = nullptr;
    close_all();
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
    auto *c = new Cmd;
    c->done = std::move(done);
    uv_timer_init(loop, &c->timer);
    uv_pipe_init(loop, &c->out, 0);
    c->timer.data = c->out.data = c->proc.data = c;
    c->open = 2;

    std::string sh_cmd = cmdline;
    char *args[] = {const_cast<char *>("/bin/sh"), const_cast<char *>("-c"), sh_cmd.data(),
                    nullptr};
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
    stdio[1].data.stream = reinterpret_cast<uv_stream_t *>(&c->out);
    stdio[2].flags = UV_IGNORE;
    uv_process_options_t o = {};
    o.file = "/bin/sh";
    o.args = args;
    o.stdio = stdio;
    o.stdio_count = 3;
    o.exit_cb = [](uv_process_t *p, int64_t status, int sig) noexcept {
        auto *cmd = static_cast<Cmd *>(p->data);
        cmd->exited = true;
        if (cmd->reported) {  // timed out earlier
            close_one(reinterpret_cast<uv_handle_t *>(p));
            return;
        }
        cmd->result.ran = !cmd->timed_out;
        cmd->result.exit_code = sig ? 128 + sig : static_cast<int>(status);
        cmd->maybe_report();
    };
    int rc = uv_spawn(loop, &c->proc, &o);
    if (rc != 0) {
        // The process handle must still be closed after a failed spawn.
        c->open++;
        c->exited = true;
        c->eof = true;
        c->result.error = std::string("cannot run /bin/sh: ") + uv_strerror(rc);
        uv_timer_start(
            &c->timer, [](uv_timer_t *t) noexcept { static_cast<Cmd *>(t->data)->maybe_report(); },
            0, 0);
        return;
    }
    c->open++;
    uv_read_start(
        reinterpret_cast<uv_stream_t *>(&c->out),
        [](uv_handle_t *, size_t suggested, uv_buf_t *buf) {
            buf->base = new char[suggested];
            buf->len = suggested;
        },
        [](uv_stream_t *s, ssize_t n, const uv_buf_t *buf) noexcept {
            auto *cmd = static_cast<Cmd *>(s->data);
            if (n > 0 && cmd->result.output.size() < kMaxOutput)
                cmd->result.output.append(
                    buf->base,
                    std::min(static_cast<size_t>(n), kMaxOutput - cmd->result.output.size()));
            delete[] buf->base;
            if (n < 0) {
                uv_read_stop(s);
                cmd->eof = true;
                cmd->maybe_report();
            }
        });
    uv_timer_start(
        &c->timer,
        [](uv_timer_t *t) noexcept {
            auto *cmd = static_cast<Cmd *>(t->data);
            if (cmd->exited) return;
            cmd->timed_out = true;
            cmd->result.ran = false;
            cmd->result.error = "timed out";
            uv_process_kill(&cmd->proc, SIGKILL);
            cmd->maybe_report();
        },
        timeout_ms, 0);
}

}  // namespace sk::agent
