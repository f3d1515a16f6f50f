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
// rm -rf of a directory, depth first, never following a symlink nor leaving
// the file system (nftw FTW_PHYS | FTW_MOUNT); one already gone is fine.
// For a tree the caller's own process made or owns (the shim's pod
// directories as the job's user); root removes a user's tree as its owner
// instead (agent/garbage_collector.cc).
Status remove_tree(const std::string &dir);

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
// Links::Follow: a symlink as the last component is followed, for files an
// admin names (a projected volume's token is a link into `..data`), never
// for paths a job or a pod can write.
enum class Links { Refuse, Follow };
Result<std::string> read_file(const std::string &path, size_t max_bytes,
                              Links links = Links::Refuse);

// Opens for reading the regular file at `path`, which lies below
// `trusted_dir`, so that whoever can write below trusted_dir cannot redirect
// the open: trusted_dir is opened as given (root made it, or the admin named
// it), every component after it with openat(2) from its parent's descriptor
// and O_NOFOLLOW (a symlink at any component is refused, never followed; ".."
// and "." are refused too). Each directory below trusted_dir and the file must
// belong to trusted_dir's owner (the job's user for a shim state dir: another
// user's file hard-linked or moved in is refused), and the file must be a
// regular file with a single link; it is opened O_NONBLOCK so that a FIFO
// cannot block the open, and refused after fstat(2). Error::NotFound when a
// component is missing, Error::Refused with the reason when something is
// refused, Error::InvalidArgument when path is not below trusted_dir,
// Error::Io otherwise. The caller owns the returned descriptor
// (O_RDONLY | O_CLOEXEC, O_NONBLOCK set).
Result<int> open_file_beneath(const std::string &trusted_dir, const std::string &path);
// The same for a directory below trusted_dir (O_RDONLY | O_DIRECTORY), to list.
Result<int> open_dir_beneath(const std::string &trusted_dir, const std::string &path);

// Lexical, no file system access: `path` absolute, without a ".."
// component, with repeated '/', "." and a trailing '/' dropped ("/" stays
// "/"). InvalidArgument, saying which rule, otherwise.
Result<std::string> clean_absolute_path(std::string_view path);
// Whether the clean absolute `path` is `root` or below it ("/a/bc" is not
// below "/a/b").
bool path_within(std::string_view path, std::string_view root);

}  // namespace sk
