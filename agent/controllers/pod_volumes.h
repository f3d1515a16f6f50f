// What a pod's start reads from the API and what keeps its volumes current
// while it runs, as a kubelet's token and volume managers do:
// - the reads a start depends on: the ConfigMaps and Secrets its env and
//   volumes name (get_objects) and its projected ServiceAccount tokens
//   (request_tokens: a TokenRequest bound to the pod);
// - the tokens requested again at 80 % of their lifetime and written into
//   the pod's volume (the runtime's update_files); a failure is retried in
//   10 s;
// - every volume_refresh_s the ConfigMaps and Secrets of each running pod's
//   volumes read again and the files that changed sent (only files the pod
//   started with: the runtime's volume holds the start's keys); a failed
//   read waits for the next round.
// Owned by the PodController, which says which pods run (Pods). All on the
// loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <json/json.h>

#include "agent/controllers/agent_context.h"
#include "agent/controllers/env_resolver.h"
#include "agent/controllers/node_bound.h"
#include "agent/core/timer_source.h"
#include "common/daemons/shim_protocol.h"
#include "common/result.h"

namespace sk::agent {

class PodVolumes : public NodeBound {
  public:
    // What PodVolumes asks of the pods' owner.
    class Pods {
      public:
        virtual ~Pods() = default;
        // The pod was handed to the runtime and has not ended.
        virtual bool runs(const std::string &uid) const = 0;
        // A runtime is attached (update_files can reach it).
        virtual bool has_runtime() const = 0;
        // Writes new contents of some of a pod's volume files (NotFound: the
        // runtime no longer runs it).
        virtual void update_files(const proto::PodFilesUpdate &m,
                                  std::function<void(const Status &)> done) = 0;
    };

    PodVolumes(AgentContext &ctx, Pods &pods);
    PodVolumes(const PodVolumes &) = delete;
    PodVolumes &operator=(const PodVolumes &) = delete;

    void start();  // the volume refresh every volume_refresh_s
    void stop();   // every timer; answers still to come are dropped

    // The start's reads: each object of refs in namespace ns into *fetched
    // (one not found is left out; any other failure kept in *error), then
    // done() once *remaining reaches 0 (the caller counts these and its own).
    void get_objects(const std::string &ns, const std::set<ObjectRef> &refs,
                     const std::shared_ptr<FetchedObjects> &fetched,
                     const std::shared_ptr<size_t> &remaining, const std::shared_ptr<Status> &error,
                     const std::function<void()> &done);
    // The pod's projected tokens (TokenRequests bound to it) into *fetched;
    // a refusal kept in *error says which ServiceAccount; done() after all.
    void request_tokens(const Json::Value &pod, const std::vector<TokenNeed> &needs,
                        const std::shared_ptr<FetchedObjects> &fetched,
                        const std::shared_ptr<Status> &error, const std::function<void()> &done);

    // The pod started with these files and fetched objects: its files kept
    // current from here, its tokens' next request planned.
    void started(const std::string &uid, const Json::Value &pod, const proto::PodFiles &files,
                 const FetchedObjects &fetched);
    // A pod the runtime already held (an agent restart): its tokens'
    // lifetimes were not kept, so they are requested again now, as a kubelet
    // that restarts does.
    void adopted(const std::string &uid, const Json::Value &pod);
    void forget(const std::string &uid);  // the pod is gone

  private:
    struct Volumes {
        Json::Value pod;
        // Its tokens are requested again at this time (unix s; 0 = it has
        // none, or a refresh is under way).
        int64_t token_refresh_at_s = 0;
        // The files of its volumes as the runtime has them (resolve_pod's).
        proto::PodFiles files;
        bool files_refreshing = false;  // a volume refresh is under way
    };
    void note_tokens(Volumes &v, const FetchedObjects &fetched);
    void arm_token_timer();
    void refresh_tokens(const std::string &uid);
    void refresh_all_files();
    void refresh_files(const std::string &uid);

    AgentContext &ctx_;
    Pods &pods_;
    bool stopped_ = false;
    std::map<std::string, Volumes> volumes_;  // by pod uid
    ControllerTimer token_timer_;             // the next token refresh (token_refresh_at_s)
    ControllerTimer files_timer_;  // every volume_refresh_s: refresh_files of the running pods
};

}  // namespace sk::agent
