#include "agent/core/shared_mount.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "common/fs.h"
#include "common/procfs.h"

namespace sk::agent {

bool is_mount_point(const std::string &dir) {
    char real[PATH_MAX];
    if (!realpath(dir.c_str(), real)) return false;
    auto text = read_file("/proc/self/mountinfo", size_t{16} << 20);
    if (!text) return false;
    for (const auto &m : parse_mountinfo(*text))
        if (m.mount_point == real) return true;
    return false;
}

Status share_dir(const std::string &dir) {
    // The type is ignored for a bind and a propagation change; "none", not
    // null (valgrind checks it as a string).
    if (!is_mount_point(dir) && mount(dir.c_str(), dir.c_str(), "none", MS_BIND, nullptr) != 0)
        return fail(Error::Io, "bind mount of " + dir + ": " + strerror(errno));
    if (mount("none", dir.c_str(), "none", MS_SHARED, nullptr) != 0)
        return fail(Error::Io, "shared propagation of " + dir + ": " + strerror(errno));
    return {};
}

}  // namespace sk::agent
