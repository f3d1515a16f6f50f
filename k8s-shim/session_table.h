// The exec and attach sessions of the job's pods (docs/architecture.md "Exec
// sessions"), as the shim's loop knows them: admitted within their bounds,
// started, killed with their pod or container, recorded for state.json, and
// freed once ended. Exec sessions run on a loop and thread of their own
// (uv/thread_loop.h "sk-sessions", at the job's nice value: their relays off
// the shim's loop), made when the first one starts; attach sessions tap a
// container of the shim's loop and run there. A session is never destroyed
// inside its own callback.
#pragma once

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/daemons/protocol.h"
#include "common/daemons/shim_protocol.h"
#include "common/result.h"
#include "k8s-shim/attach_session.h"
#include "k8s-shim/exec_session.h"
#include "uv/thread_loop.h"

namespace sk::shim {

class SessionTable {
  public:
    // What the table asks of the shim, on the shim's loop.
    class Host {
      public:
        // The answer to exec_start or attach_start, once the session started
        // or could not.
        virtual void send_reply(const proto::Reply &r) = 0;
        // An exec session's supervisor started or ended: pod uid's state.json
        // is to be written again (exec_records).
        virtual void exec_changed(const std::string &uid) = 0;
        // The container an attach session taps, asked again once its data
        // connection is up (the container may have stopped).
        virtual Result<Container *> attach_container(const std::string &uid,
                                                     const std::string &container) = 0;

      protected:
        virtual ~Host() = default;
    };

    // Bounds per pod and per job: a client that opens sessions without end
    // gets a refusal, never an unbounded number of processes and connections.
    static constexpr size_t kMaxPerPod = 16;
    static constexpr size_t kMaxPerJob = 64;

    // supervisor: the program that supervises an exec's command
    // (k8s-shim/supervise.h); socket_path: the agent's, where each session
    // opens its data connection.
    SessionTable(uv_loop_t *loop, Host &host, std::string supervisor, std::string socket_path);
    ~SessionTable();  // the sessions' loop stopped: what they run is killed
    SessionTable(const SessionTable &) = delete;
    SessionTable &operator=(const SessionTable &) = delete;

    // Whether a session (exec or attach) has this id.
    bool has(const std::string &session) const {
        return execs_.count(session) || attaches_.count(session);
    }
    // Refused (what to do said) when pod uid or the job has as many sessions
    // as allowed, exec and attach together.
    Status admit(const std::string &uid) const;
    // The reply goes through Host::send_reply once the command started or
    // could not (its request id: req_id).
    Status start_exec(uint64_t req_id, proto::ExecStart m, SpawnSpec spec);
    void start_attach(uint64_t req_id, proto::AttachStart m);
    // Ends the exec sessions into pod uid: all of them (why said to each), or
    // (running given) those whose container running() says is not running.
    // Attach sessions end with their container instance, never here.
    void kill_execs(const std::string &uid, const std::string &why,
                    const std::function<bool(const std::string &container)> &running = nullptr);
    // The exec supervisors in pod uid as state.json's processes entries
    // ("<container>:exec:<pid>": ':' is in no container name), stopped with
    // the containers when this shim dies.
    void exec_records(const std::string &uid, Json::Value *processes) const;
    // Frees the attach sessions that ended (the shim's reap timer).
    void reap() { attaches_ended_.clear(); }

  private:
    struct ExecInfo {
        proto::ExecStart req;
        int pid = 0;
        unsigned long long start_ticks = 0;
    };
    uv_loop_t *loop_;
    Host &host_;
    std::string supervisor_, socket_path_;
    // The shim's loop's: exec sessions by id (the request; the supervisor
    // once started).
    std::map<std::string, ExecInfo> execs_;
    std::unique_ptr<ThreadLoop> sessions_;
    // The sessions' loop's alone.
    std::map<std::string, std::unique_ptr<ExecSession>> live_execs_;
    std::vector<std::unique_ptr<ExecSession>> dead_execs_;
    // The shim's loop's.
    std::map<std::string, std::unique_ptr<AttachSession>> attaches_;
    std::vector<std::unique_ptr<AttachSession>> attaches_ended_;
};

}  // namespace sk::shim
