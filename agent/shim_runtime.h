// PodRuntime over the connection of an attached shim: the messages of
// common/daemons/shim_protocol.h (docs/protocol.md). agent -> shim requests pod_run,
// pod_kill, pod_list, shutdown, each answered by a Reply with the same id;
// shim -> agent notifications pod_status, answered ok.
#pragma once

#include <map>
#include <memory>

#include "agent/core/runtime.h"
#include "agent/socket_server.h"
#include "common/daemons/shim_protocol.h"

namespace sk::agent {

class ShimRuntime : public PodRuntime {
  public:
    // Takes over conn's lines; the object must outlive the connection or
    // call detach() first.
    explicit ShimRuntime(std::shared_ptr<Connection> conn, std::string log_prefix);
    ~ShimRuntime() override;

    void run(const proto::PodRun &m, Done done) override;
    void kill(const std::string &uid, uint32_t grace_s, proto::StopReason reason,
              Done done) override;
    void snapshot(std::function<void(Result<std::vector<PodSnapshot>>)> done) override;
    void shutdown(uint32_t grace_s, proto::StopReason reason, Done done) override;
    void exec_start(const proto::ExecStart &m, Done done) override;
    void attach_start(const proto::AttachStart &m, Done done) override;
    void stats(std::function<void(Result<proto::PodStatsReply>)> done) override;
    void pause(bool pause, const std::string &message, Done done) override;
    void update_files(const proto::PodFilesUpdate &m, Done done) override;

    bool connected() const { return conn_ && !conn_->closed(); }
    void detach();

    // Parses one line from the shim (exposed for tests).
    void on_line(const std::string &line);

  private:
    using ReplyCb = std::function<void(Result<Json::Value>)>;
    // Fails TooLarge, without sending, when the request line would exceed max.
    void call(proto::ShimOp op, const Json::Value &body, ReplyCb cb,
              size_t max = proto::kMaxShimMessageBytes);
    void on_closed();

    std::shared_ptr<Connection> conn_;
    std::string prefix_;
    uint64_t next_id_ = 1;
    std::map<uint64_t, ReplyCb> pending_;
};

// pod_list reply body -> snapshots (proto::pod_list_reply_from_json).
Result<std::vector<PodSnapshot>> pod_list_from_json(const Json::Value &body);
// pod_status notification body -> snapshot (proto::pod_status_from_json).
Result<PodSnapshot> pod_status_from_json(const Json::Value &body);

}  // namespace sk::agent
