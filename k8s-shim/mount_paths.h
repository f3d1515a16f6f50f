// A volume's mountPath in a process pod. There is no mount namespace: the
// containers see the node's file system, so the shim places a symlink at the
// mountPath pointing at the volume's directory in the pod directory
// (k8s-shim/pod_plan.h volume_dir). The path is usually in a directory other
// users share (/tmp), so the shim makes that link only where nobody but the
// job's user and root can decide what the path names (docs/security.md,
// "Volumes"):
//
//  - every existing component of the path is owned by the job's user or
//    root, and every directory on it is writable by nobody else, or is
//    sticky (then nobody else can rename or remove an entry the job's user
//    or root owns);
//  - a symlink on the way is followed only when the same holds for it, its
//    target is walked by the same rules, and its target has no "..";
//  - missing directories are made with mkdirat(0700), the link with
//    symlinkat, each in a directory opened with O_PATH | O_NOFOLLOW from "/":
//    an entry that appears in between makes the call fail (EEXIST), it is
//    never reused.
//
// A path that is already there (another user's squat, a directory of the
// node, a link of another pod) or that breaks a rule above refuses the pod
// (Error::Refused, the message names the path and why). A path the job's
// user cannot create because its directory belongs to root and is not
// writable (/etc/..., /var/run/secrets/...) is skipped: nobody but root can
// put anything there, the container finds nothing at it, and the volume is
// still at $SLURM_K8S_VOLUME_<NAME>.
//
// Everything made is written to a record (a JSON file in the pod directory)
// before it is made, and with its inode after. remove_mount_links() removes,
// newest first, exactly what the record names and still finds as it was
// made (a link owned by the job's user with the recorded target, an empty
// directory with the recorded inode), walking the same way; it runs when the
// pod stops and, for a shim that crashed, when its successor starts.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"

namespace sk::shim {

struct MountLink {
    std::string mount_path;  // absolute, normalised (pod_plan: normalise_mount_path)
    std::string target;      // the volume's directory
};

struct MountOutcome {
    std::vector<std::string> skipped;  // mountPaths that only root could create
};

// The record of a pod's links: <pod_dir>/mounts.json.
std::string mount_record(const std::string &pod_dir);

// Makes the links for `links` as the user `uid` (the shim's own), recording
// into `record_path`. On a refusal or an I/O error everything made so far is
// removed again and the record with it.
Result<MountOutcome> make_mount_links(const std::vector<MountLink> &links, uid_t uid,
                                      const std::string &record_path);

// Removes what the record at `record_path` names and is still what was made
// (see above), then the record. A missing record is nothing to do. Entries
// that cannot be proven to be the shim's, or a directory the containers put
// files into, are left and named in the returned error (Error::Io); the
// record is removed all the same, so that a later sweep never removes an
// entry somebody else made at the same path afterwards.
Status remove_mount_links(const std::string &record_path, uid_t uid);

}  // namespace sk::shim
