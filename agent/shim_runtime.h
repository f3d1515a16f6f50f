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
    void sandbox(const proto::PodSandbox &m,
                 std::function<void(Result<proto::PodSandboxReply>)> done) override;

    bool connected() const { return conn_ && !conn_->closed(); }
    void detach();
    // Who answers the shim's image_pull (the node's image store,
    // agent/images/image_store.h): done(status) once it holds the image. None:
    // image_pull is answered Unavailable.
    // The puller returns a ticket the canceller takes: the shim's
    // image_pull_cancel, or its connection's end, stops waiting.
    using ImagePuller =
        std::function<uint64_t(const std::string &image, std::function<void(const Status &)> done)>;
    void set_image_puller(ImagePuller f, std::function<void(uint64_t)> cancel) {
        image_puller_ = std::move(f);
        image_cancel_ = std::move(cancel);
    }

    // Parses one line from the shim (exposed for tests).
    void on_line(const std::string &line);

  private:
    using ReplyCb = std::function<void(Result<Json::Value>)>;
    // Fails TooLarge, without sending, when the request line would exceed max.
    void call(proto::ShimOp op, const Json::Value &body, ReplyCb cb,
              size_t max = proto::kMaxShimMessageBytes);
    void on_closed();
    // image_pull: answered on the connection once the puller is done, if
    // the connection still stands then.
    void image_pull(uint64_t id, const Json::Value &body);
    void cancel_image_pulls();

    std::shared_ptr<Connection> conn_;
    ImagePuller image_puller_;
    std::function<void(uint64_t)> image_cancel_;
    std::map<uint64_t, uint64_t> image_pulls_;  // the shim's request id -> ticket
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    std::string prefix_;
    uint64_t next_id_ = 1;
    std::map<uint64_t, ReplyCb> pending_;
};

// pod_list reply body -> snapshots (proto::pod_list_reply_from_json).
Result<std::vector<PodSnapshot>> pod_list_from_json(const Json::Value &body);
// pod_status notification body -> snapshot (proto::pod_status_from_json).
Result<PodSnapshot> pod_status_from_json(const Json::Value &body);

}  // namespace sk::agent
