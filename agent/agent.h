// The agent: the socket protocol's operations over the registered virtual
// nodes, persistence, re-adoption at start and garbage collection.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent/config.h"
#include "agent/controllers/virtual_node.h"
#include "agent/socket_server.h"

namespace sk::agent {

// "Is Slurm job N still alive?" Injectable so tests need no Slurm.
class JobAliveChecker {
  public:
    virtual ~JobAliveChecker() = default;
    virtual bool alive(uint32_t job_id) = 0;
};

// Runs job_alive_command ({job} replaced): alive when it exits 0 and prints
// a live state (RUNNING, COMPLETING, CONFIGURING, SUSPENDED, ...) or nothing
// but exits 0 for a script that prints nothing. Blocks (short; start + GC).
class CommandJobChecker : public JobAliveChecker {
  public:
    explicit CommandJobChecker(std::string tmpl) : tmpl_(std::move(tmpl)) {}
    bool alive(uint32_t job_id) override;

  private:
    std::string tmpl_;
};

// Pure: the state squeue printed -> alive.
bool job_state_is_alive(const std::string &state_output);

class Agent {
  public:
    Agent(uv_loop_t *loop, const AgentConfig &cfg, KubeClient &kube, const Clock &clock,
          JobAliveChecker &checker, NodeSpecInput host);
    ~Agent();
    // Loads the state dir (re-adopting live jobs, cleaning dead ones),
    // listens on the socket, arms garbage collection.
    Status start();
    void stop();

  private:
    void handle(const std::shared_ptr<Connection> &c, const proto::Request &req);
    void op_register(const std::shared_ptr<Connection> &c, const proto::Request &req);
    void op_deregister(const std::shared_ptr<Connection> &c, const proto::Request &req);
    void op_status(const std::shared_ptr<Connection> &c, const proto::Request &req);
    void op_list(const std::shared_ptr<Connection> &c, const proto::Request &req);
    void op_attach(const std::shared_ptr<Connection> &c, const proto::Request &req);
    std::shared_ptr<VirtualNode> add_node(JobRecord rec, std::function<void(Status)> ready);
    void gc();

    uv_loop_t *loop_;
    const AgentConfig &cfg_;
    KubeClient &kube_;
    const Clock &clock_;
    JobAliveChecker &checker_;
    JobStore store_;
    AgentContext ctx_;
    std::unique_ptr<SocketServer> server_;
    std::map<std::string, std::shared_ptr<VirtualNode>> nodes_;  // by job_key
    std::vector<uint32_t> admin_uids_;
    Timer gc_timer_;
};

}  // namespace sk::agent
