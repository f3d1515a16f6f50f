// Image references as a kubelet reads them, shared by the shim (its pulls)
// and the agent (the node's image store, agent/images/image_store.h).
#pragma once

#include <string>

namespace sk {

// A kubelet's reading of an image name: one without a registry is
// docker.io's ("busybox" -> "docker.io/library/busybox").
std::string normalize_image(const std::string &image);
// The registry host[:port] of a normalized image.
std::string image_registry(const std::string &image);
// imagePullPolicy when the pod names none, as the API server defaults it:
// Always for ":latest" or no tag, IfNotPresent otherwise.
std::string default_pull_policy(const std::string &image);
// A normalized image as podman names it in its store: ":latest" added when
// it has neither a tag nor a digest.
std::string image_store_name(const std::string &normalized);
// Why a normalized image reference may not be handed to a pull ("" = it may):
// at most 512 bytes of [A-Za-z0-9._:/@-], a registry and a path, no empty
// or ".." component, not starting with '-'. What the agent pulls for a job
// is checked with it (a user's text on root's side).
std::string image_ref_error(const std::string &normalized);
// A pull's error for a user: the last line of its output starting with
// "Error: " (or the last line), bounded.
std::string pull_error(const std::string &output);

}  // namespace sk
