// Files the daemons and the plugin keep: atomic replacement and bounded,
// link-refusing reads. Everything here is safe on a directory that a job's
// user can write (the shim's state, the volumes of a pod): no path is
// followed through a symlink in its last component, no read blocks on a
// FIFO or grows without bound.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "common/result.h"

namespace sk {

enum class Durability {
    Cached,   // in the page cache: a process that restarts sees it, a machine crash may not
    Durable,  // the content and the rename are on disk when the call returns
};

// Replaces `path` with `data`: a reader sees the old content or the new one,
// never a mix, and a failed call leaves `path` as it was. The data goes to a
// new temporary file beside `path` (same directory, so the rename stays on
// one file system), created with O_EXCL | O_NOFOLLOW | O_CLOEXEC and `mode`
// (less the umask), under a name no other writer uses at the same time; then
// written in full (short writes and EINTR resumed), with Durable fsync()ed,
// closed and renamed over `path`; with Durable the directory is fsync()ed as
// well (an error there is not reported: the new content is in place). On
// every failure the temporary file is removed and the error (Error::Io, with
// the path and errno) returned. `path` itself may be a symlink: the rename
// replaces the link, never what it points to.
Status write_file_atomic(const std::string &path, std::string_view data, mode_t mode,
                         Durability durability = Durability::Durable);

// The temporary files write_file_atomic left in `dir` ("<name>.tmp.<pid>.<n>")
// whose writer is gone (no process <pid>; never this process's own): a
// writer killed between create and rename leaves one. Each is removed with
// unlinkat() from a directory fd opened O_NOFOLLOW (the directory cannot be
// swapped for a symlink; unlink never follows one); only regular files and
// symlinks matching the pattern are touched. Returns how many were removed.
size_t remove_stale_temp_files(const std::string &dir);

// fsync() of the file at `path` (not following a symlink) and of its
// directory. Errors are ignored: the file may be gone or replaced already,
// and a successor is synced on its own. For work handed to another thread
// after a write_file_atomic(..., Durability::Cached).
void sync_to_disk(const std::string &path) noexcept;

// The content of the regular file at `path`, at most `max_bytes` of it.
// Refuses a symlink as the last component (O_NOFOLLOW), anything but a
// regular file (a FIFO would block, a device never end), and a file longer
// than max_bytes (Error::TooLarge). A missing file is Error::NotFound, any
// other failure Error::Io. Files that report no size (/proc) are read to
// their end under the same bound.
Result<std::string> read_file(const std::string &path, size_t max_bytes);

}  // namespace sk
