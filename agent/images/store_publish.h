// The node image store's read-only view (agent/images/image_store.h), made
// by the store's own unprivileged user (never root: `slurm-k8s-agent
// --image-store-publish STORE [ID...]`, spawned by the agent after each
// change of the store).
//
// The store is rootless podman's overlay storage of that user in
// STORE/storage, pulled with overlay.force_mask=shared (every layer file
// readable by all, its real owner and mode kept in an xattr that
// fuse-overlayfs honours) and read by each job's podman as an additional
// image store. c/storage writes its metadata (images.json, layers.json, the
// per-image directories) with mode 0600 and its directories 0700, and a
// job's podman that read them while a pull rewrites them would fail, so the
// jobs do not read STORE/storage but STORE/view:
//   view/overlay          -> ../storage/overlay (the layers: 0711 dirs, and
//                            each layer's `diff`, 0755 by force_mask)
//   view/overlay-images/  images.json (0644, a copy, written by rename) and
//                         <id> -> ../../storage/overlay-images/<id> (0755)
//   view/overlay-layers/  layers.json (0644, a copy), layers.lock
// Publishing reads the store's metadata under c/storage's own read locks
// (images.lock, layers.lock: fcntl, as its readers take them), makes what
// the view points at readable, adds the new images' links, replaces the two
// JSON files, then removes links of images gone: a job's podman sees the old
// view or the new one, each whole. Images named to publish() are left out
// of the view (the agent removes them from the store next).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <json/json.h>

#include "common/result.h"

namespace sk::agent {

struct StoredImage {
    std::string id;                    // 64 hex digits
    std::vector<std::string> names;    // "host/repo:tag"
    std::vector<std::string> digests;  // "sha256:..."
    int64_t created_s = 0;             // when the store got it (its pull)
};

struct StoreListing {
    uint64_t bytes = 0;               // disk usage of STORE/storage
    std::vector<StoredImage> images;  // those in the view
};

Json::Value to_json(const StoreListing &l);
Result<StoreListing> store_listing_from_json(const Json::Value &v);

// Publishes the view of `store` as described above, leaving out `exclude`
// (image ids), and returns what it lists with the store's disk usage. Runs
// as the store's owner.
Result<StoreListing> publish_store_view(const std::string &store,
                                        const std::set<std::string> &exclude);

constexpr const char kImageStorePublish[] = "--image-store-publish";
// `slurm-k8s-agent --image-store-publish STORE [ID...]`: publish_store_view,
// its listing on stdout as JSON; exit 0, or 1 with the error on stderr.
int image_store_publish_main(int argc, char **argv);

}  // namespace sk::agent
