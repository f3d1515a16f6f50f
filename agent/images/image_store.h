// The node's image store: images that outlive the job (agent.conf
// image_store; docs/admin-guide.md "The node's image store").
//
// One rootless podman storage per node, owned by an unprivileged user of its
// own (image_store_user, never root: nothing run as root unpacks or parses
// an image layer), shared read-only by every job on the node: each job's
// podman reads its view (agent/images/store_publish.h) as an additional
// image store, through fuse-overlayfs, so an image pulled once starts in
// every later job without a pull.
//
// - Pulls: a shim asks on its pod stream (image_pull, docs/protocol.md) when
//   a container's image is not present; the agent runs `podman pull` as the
//   store's user, without credentials: only a public image enters the store.
//   An image that needs the pod's imagePullSecrets fails here, and the shim
//   pulls it into the job's own storage with them, as before, so a private
//   image never becomes usable by a user who could not pull it (the store is
//   readable by every user of the node). Pulls of the same image wait for
//   one; at most image_store_pulls run at once, the others queue (at most
//   kMaxQueuedPerUser per user, kMaxQueued in all). Registries in
//   image_store_insecure_registries are pulled over plain HTTP (the agent's
//   list: a user never chooses how the store reaches a registry).
// - After each change the view is published again by the store's user
//   (`slurm-k8s-agent --image-store-publish`), which also reports the
//   store's disk usage.
// - Collection: beyond image_store_size, the least recently used images
//   that no pod on this node's virtual nodes names are removed (first left
//   out of the view, then `podman rmi`), down to 90 % of the bound, as the
//   kubelet's image GC between its high and low thresholds. An image's last
//   use is its pull or the last GC round that saw a pod naming it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/images/store_publish.h"
#include "common/result.h"
#include "uv/handles.h"

namespace sk::agent {

struct AgentConfig;

// What the store runs with (from agent.conf).
struct ImageStoreSettings {
    std::string dir;  // STORE: storage/, view/, home/, tmp/, run/
    uid_t uid = 0;    // the store's user
    gid_t gid = 0;
    uint64_t size = 0;  // bound in bytes; 0 = none
    std::vector<std::string> insecure_registries;
    uint64_t pulls = 2;
    std::string mount_program;  // fuse-overlayfs
    std::string podman = "podman";
    std::string self_exe;  // slurm-k8s-agent, for --image-store-publish
};

// Resolves image_store_user (not root) and the agent's own binary.
Result<ImageStoreSettings> image_store_settings(const AgentConfig &cfg);

// Pure: the store's podman and its global options (the store user's
// rootless overlay storage, force_mask=shared, no chown needed), the
// environment it runs with, and a pull of `image`.
std::vector<std::string> store_podman_argv(const ImageStoreSettings &s);
std::vector<std::string> store_podman_env(const ImageStoreSettings &s);
std::vector<std::string> store_pull_argv(const ImageStoreSettings &s, const std::string &image);
// Pure: which images to remove, in order, to bring `l` under 90 % of
// `limit`: those no pod names (`in_use`: podman's names, image_store_name),
// least recently used first (`last_used`: id -> unix s; else its created
// time). Removing stops once the estimate (each image's share: the usage
// split evenly) is under the low mark. Empty when l.bytes <= limit or no
// bound.
std::vector<std::string> image_gc_victims(const StoreListing &l,
                                          const std::set<std::string> &in_use,
                                          const std::map<std::string, int64_t> &last_used,
                                          uint64_t limit);

class ImageStore {
  public:
    using Done = std::function<void(const Status &)>;
    ImageStore(uv_loop_t *loop, ImageStoreSettings s);
    ~ImageStore();
    ImageStore(const ImageStore &) = delete;
    ImageStore &operator=(const ImageStore &) = delete;

    // Makes STORE and its directories (STORE root's 0755, the rest the
    // store user's), publishes the view once. A failure leaves the store off
    // (the jobs pull into their own storage), logged by the caller.
    Status start();
    // The view a job's podman reads (attach's image_store).
    std::string view_dir() const { return s_.dir + "/view"; }
    const std::string &mount_program() const { return s_.mount_program; }
    // Pulls `image` (normalized, image_ref_error-clean) for a job of user
    // `uid`; done(ok) once the view lists it, done(failure) with the pull's
    // message. Returns a ticket for cancel(). Loop thread.
    uint64_t pull(uid_t uid, const std::string &image, Done done);
    // The asker no longer waits (its pod stopped, its shim went): done never
    // runs; a pull nobody waits for any more is dropped from the queue or
    // killed (a registry that never answers holds no pull slot for long).
    void cancel(uint64_t ticket);
    // Where the store learns the images pods on this node name now
    // (image_store_name): collection spares them. Before start().
    void set_in_use(std::function<std::set<std::string>()> f) { in_use_ = std::move(f); }
    // A periodic round: the images in use were used now; then a collection
    // round when over the bound.
    void tick(int64_t now_s);
    // For status and tests: what the last publish listed.
    const StoreListing &listing() const { return listing_; }

  private:
    struct Pull {
        std::string image;
        uid_t uid = 0;
        std::map<uint64_t, Done> waiters;  // by ticket
        std::function<void()> kill;        // while it runs
    };
    void start_next();
    void pull_ended(const std::string &image, const Status &st);
    // Runs `argv` as the store's user; done(status, stdout, stderr).
    std::function<void()> run_as_store(
        std::vector<std::string> argv,
        const std::function<void(int64_t, const std::string &, const std::string &)> &done);
    void publish(const std::vector<std::string> &exclude,
                 const std::function<void(const Status &)> &done);
    void collect();
    void stop_pause_process() const;

    uv_loop_t *loop_;
    ImageStoreSettings s_;
    std::deque<std::string> queue_;      // images waiting for a pull slot
    std::map<std::string, Pull> pulls_;  // by image: queued or running
    size_t running_ = 0;
    uint64_t next_ticket_ = 1;
    StoreListing listing_;
    std::map<std::string, int64_t> last_used_;  // image id -> unix s
    std::function<std::set<std::string>()> in_use_;
    bool collecting_ = false;
    // Alive while this object is: children's callbacks check it.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

constexpr size_t kMaxQueuedPerUser = 8;
constexpr size_t kMaxQueued = 64;

}  // namespace sk::agent
