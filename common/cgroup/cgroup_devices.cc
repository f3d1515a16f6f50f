#include "common/cgroup/cgroup_devices.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>

namespace sk {

Result<std::vector<CharDevice>> gpu_char_devices(const std::string &pattern,
                                                 const std::vector<int> &indices) {
    size_t at = pattern.find("{index}");
    if (at == std::string::npos || pattern.find("{index}", at + 1) != std::string::npos)
        return fail(
            Error::InvalidArgument,
            "gpu_device '" + pattern + "' must hold {index} once (e.g. /dev/nvidia{index})");
    std::vector<CharDevice> out;
    for (int i : indices) {
        CharDevice d;
        d.index = i;
        d.path = pattern.substr(0, at) + std::to_string(i) + pattern.substr(at + 7);
        struct stat st;
        if (lstat(d.path.c_str(), &st) != 0)
            return fail(Error::NotFound, "GPU " + std::to_string(i) + ": " + d.path + ": " +
                                             strerror(errno) +
                                             " (gpu_device names each GPU's device node as "
                                             "gres.conf's File= does)");
        if (!S_ISCHR(st.st_mode))
            return fail(Error::InvalidArgument,
                        "GPU " + std::to_string(i) + ": " + d.path +
                            " is not a character device (a symlink is not followed)");
        d.major = major(st.st_rdev);
        d.minor = minor(st.st_rdev);
        out.push_back(std::move(d));
    }
    return out;
}

Status deny_devices_at(int dir_fd, const std::string &dir, const std::vector<CharDevice> &devices) {
    if (devices.empty()) return {};
    int fd = openat(dir_fd, "devices.deny", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail(Error::Io, dir + "/devices.deny: " + strerror(errno));
    Status st;
    for (const auto &d : devices) {
        std::string rule = "c " + std::to_string(d.major) + ":" + std::to_string(d.minor) + " rwm";
        if (write(fd, rule.data(), rule.size()) != static_cast<ssize_t>(rule.size())) {
            st = fail(Error::Io,
                      dir + "/devices.deny: '" + rule + "' (" + d.path + "): " + strerror(errno));
            break;
        }
    }
    close(fd);
    return st;
}

Status deny_devices(const std::string &dir, const std::vector<CharDevice> &devices) {
    if (devices.empty()) return {};
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return fail(Error::Io, dir + ": " + strerror(errno));
    Status st = deny_devices_at(dfd, dir, devices);
    close(dfd);
    return st;
}

std::vector<int> indices_without(const std::vector<int> &all, const std::vector<int> &keep) {
    std::vector<int> out;
    for (int i : all)
        if (std::find(keep.begin(), keep.end(), i) == keep.end()) out.push_back(i);
    return out;
}

}  // namespace sk
