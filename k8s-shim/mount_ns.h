// A container's volumes at their mountPaths, in a view of the file system
// that is the container's own. The shim and its containers run as the job's
// user, without privilege; the exec helper (k8s-shim/confine.h) of a
// container with volumeMounts first enters a new user namespace (mapping only
// the job's uid and gid, to themselves) and a new mount namespace, and binds
// each volume's directory at its mountPath there. Nothing is created or
// mounted in the node's file system: a mountPath that does not exist is
// made in a tmpfs that "shadows" its deepest existing directory D (a tmpfs
// over D holding an entry for each of D's, each bound to the original, so
// that D still shows what it held, plus the new path). The root directory is
// shadowed the same way, then made the namespace's root (pivot_root). Only
// the container's processes see any of it; it goes with them. Its mounts are
// slaves of the node's: what the node mounts later shows in the container.
//
// The container's exec probes, preStop hook and exec sessions join the
// namespaces of the container's main process (join_container_mounts), so
// they see the same paths.
//
// A user namespace gives the process no power over anything its user could
// not touch before: it binds only what the job's user may read, and the
// RuntimeDefault seccomp filter, loaded after this, denies namespaces and
// mounts to the container itself.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace sk::shim {

struct BindMount {
    std::string source;  // a volume's directory, or a path in it (subPath)
    std::string target;  // the mountPath: absolute, normalised (pod_plan)
    bool read_only = false;
    // A missing source is made (a directory) before the pod starts, as a
    // kubelet makes a subPath: true but for a node path's own root (a
    // hostPath or claim volume without subPath), which is the node's.
    bool make_missing = true;
};

// In the calling process, which must be single-threaded: the namespaces
// above and the binds, parents before children (by the target's depth).
// `scratch` is an empty directory of the job's user (in the pod directory)
// on which the tmpfs of a shadow is built before it is moved in place.
// A bind whose source is missing fails. A target that exists must be of the
// source's kind (directory or not); one that does not is made (a directory,
// or an empty file for a file). A read-only bind is remounted read-only,
// keeping the flags it had. Returns "" or what failed, in words for the
// container's log.
// `hidden`: absolute paths (the device nodes of the node's GPUs that are not
// the container's) left out of the view: their directory is shadowed first,
// without them, so that the container cannot name them (the binds come
// after: a later shadow of a directory above carries this one along).
std::string enter_own_mounts(const std::vector<BindMount> &binds,
                             const std::vector<std::string> &hidden, const std::string &scratch);

// Joins the user and mount namespaces, and the root directory, of the
// container's main process: the child of `supervisor` (its pid, as the shim
// records it) that lives in another user namespace than the caller. Returns
// "" or what failed.
std::string join_container_mounts(pid_t supervisor);

}  // namespace sk::shim
