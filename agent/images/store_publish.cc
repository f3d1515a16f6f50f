#include "agent/images/store_publish.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/daemons/json.h"
#include "common/fs.h"
#include "common/rfc3339.h"

namespace sk::agent {

namespace {

// c/storage's metadata files: far below this on any real node.
constexpr size_t kMaxMetadataBytes = size_t{64} << 20;

bool is_store_id(const std::string &s) {
    if (s.size() != 64) return false;
    for (char ch : s)
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    return true;
}

Status io_fail(const std::string &what, const std::string &path) {
    return fail(Error::Io, what + " " + path + ": " + strerror(errno));
}

// A read lock on one of c/storage's lock files, as its readers take it
// (fcntl on the whole file), held while this object lives; none when the
// file does not exist yet (an empty store).
class StorageReadLock {
  public:
    explicit StorageReadLock(const std::string &path) {
        fd_ = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd_ < 0) return;
        struct flock lk = {};
        lk.l_type = F_RDLCK;
        lk.l_whence = SEEK_SET;
        while (fcntl(fd_, F_SETLKW, &lk) != 0 && errno == EINTR) {
        }
    }
    ~StorageReadLock() {
        if (fd_ >= 0) close(fd_);  // releases the lock
    }
    StorageReadLock(const StorageReadLock &) = delete;
    StorageReadLock &operator=(const StorageReadLock &) = delete;

  private:
    int fd_ = -1;
};

// chmod of `name` in `dir` to `mode`, never through a symlink; a missing
// one is fine. Only a directory or a regular file is changed.
Status chmod_in(int dir, const std::string &path, const std::string &name, mode_t mode) {
    int fd = openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT || errno == ELOOP) return {};
        return io_fail("open", path + "/" + name);
    }
    struct stat st;
    Status out;
    if (fstat(fd, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) &&
        (st.st_mode & 07777) != mode && fchmod(fd, mode) != 0)
        out = io_fail("chmod", path + "/" + name);
    close(fd);
    return out;
}

int open_dir(const std::string &path) {
    return open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Every regular file directly in `path` 0644 (an image's manifest, config
// and signatures).
Status files_readable(const std::string &path) {
    int fd = open_dir(path);
    if (fd < 0) return errno == ENOENT ? Status() : io_fail("open", path);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return io_fail("read", path);
    }
    Status out;
    while (struct dirent *e = readdir(d)) {
        if (e->d_type != DT_REG) continue;
        if (auto st = chmod_in(dirfd(d), path, e->d_name, 0644); !st) out = st;
    }
    closedir(d);
    return out;
}

// What the view points at, readable by the jobs' users: the directories on
// the way with search permission only (0711: nobody lists the store), the
// layers' and images' own directories and metadata.
Status make_readable(const std::string &storage, const Json::Value &images,
                     const Json::Value &layers) {
    struct Step {
        std::string dir, name;
        mode_t mode;
    };
    std::vector<Step> steps = {{storage, ".", 0711},
                               {storage, "overlay", 0711},
                               {storage + "/overlay", "l", 0755},
                               {storage, "overlay-images", 0711},
                               {storage, "overlay-layers", 0711}};
    for (const auto &l : layers) {
        std::string id = l.isObject() ? l["id"].asString() : "";
        if (!is_store_id(id)) continue;
        steps.push_back({storage + "/overlay", id, 0711});
        steps.push_back({storage + "/overlay/" + id, "link", 0644});
        steps.push_back({storage + "/overlay/" + id, "lower", 0644});
    }
    for (const auto &i : images) {
        std::string id = i.isObject() ? i["id"].asString() : "";
        if (is_store_id(id)) steps.push_back({storage + "/overlay-images", id, 0755});
    }
    for (const auto &s : steps) {
        int fd = open_dir(s.dir);
        if (fd < 0) {
            if (errno == ENOENT) continue;
            return io_fail("open", s.dir);
        }
        Status st = chmod_in(fd, s.dir, s.name, s.mode);
        close(fd);
        if (!st) return st;
    }
    for (const auto &i : images) {
        std::string id = i.isObject() ? i["id"].asString() : "";
        if (!is_store_id(id)) continue;
        if (auto st = files_readable(storage + "/overlay-images/" + id); !st) return st;
    }
    return {};
}

Status make_dir(const std::string &path, mode_t mode) {
    if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return io_fail("mkdir", path);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) return io_fail("lstat", path);
    if (!S_ISDIR(st.st_mode)) return fail(Error::Refused, path + " is not a directory: remove it");
    if ((st.st_mode & 07777) != mode && chmod(path.c_str(), mode) != 0)
        return io_fail("chmod", path);
    return {};
}

// `link` -> `target`, replaced when it points elsewhere.
Status make_link(const std::string &target, const std::string &link) {
    char buf[4096];
    ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
    if (n >= 0 && std::string(buf, static_cast<size_t>(n)) == target) return {};
    if (n >= 0 || errno == EINVAL) unlink(link.c_str());
    if (symlink(target.c_str(), link.c_str()) != 0) return io_fail("symlink", link);
    return {};
}

Status make_lock_file(const std::string &path) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return io_fail("create", path);
    fchmod(fd, 0644);
    close(fd);
    return {};
}

// The view's image links not in `keep` removed (after the new images.json).
void remove_stale_links(const std::string &dir, const std::set<std::string> &keep) {
    int fd = open_dir(dir);
    if (fd < 0) return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    std::vector<std::string> stale;
    while (struct dirent *e = readdir(d))
        if (e->d_type == DT_LNK && is_store_id(e->d_name) && !keep.count(e->d_name))
            stale.emplace_back(e->d_name);
    for (const auto &name : stale)
        unlinkat(dirfd(d), name.c_str(), 0);
    closedir(d);
}

uint64_t g_bytes = 0;
int add_usage(const char *, const struct stat *st, int, struct FTW *) {
    g_bytes += static_cast<uint64_t>(st->st_blocks) * 512;
    return 0;
}

// Disk usage of the tree (du): its blocks, never following a symlink nor
// leaving the file system.
uint64_t disk_usage(const std::string &dir) {
    g_bytes = 0;
    nftw(dir.c_str(), add_usage, 32, FTW_PHYS | FTW_MOUNT);
    return g_bytes;
}

Result<Json::Value> read_array(const std::string &path) {
    auto text = read_file(path, kMaxMetadataBytes);
    if (!text) {
        if (text.error() == Error::NotFound) return Json::Value(Json::arrayValue);
        return text.failure();
    }
    auto v = json::parse(*text);
    if (!v || !v->isArray()) return fail(Error::Parse, path + " is not a JSON array");
    return *v;
}

std::vector<std::string> strings_of(const Json::Value &v) {
    std::vector<std::string> out;
    if (v.isArray())
        for (const auto &s : v)
            if (s.isString()) out.push_back(s.asString());
    return out;
}

}  // namespace

Json::Value to_json(const StoreListing &l) {
    Json::Value v(Json::objectValue);
    v["bytes"] = Json::UInt64(l.bytes);
    v["images"] = Json::Value(Json::arrayValue);
    for (const auto &i : l.images) {
        Json::Value o(Json::objectValue);
        o["id"] = i.id;
        o["names"] = json::from_strings(i.names);
        o["digests"] = json::from_strings(i.digests);
        o["created"] = Json::Int64(i.created_s);
        v["images"].append(o);
    }
    return v;
}

Result<StoreListing> store_listing_from_json(const Json::Value &v) {
    constexpr std::string_view ctx = "image store listing";
    if (!v.isObject()) return fail(Error::Parse, "the image store listing is not an object");
    StoreListing l;
    SK_TRY_ASSIGN(l.bytes, json::get_uint(v, "bytes", ctx));
    if (!v["images"].isArray()) return fail(Error::Parse, "image store listing: no images");
    for (const auto &o : v["images"]) {
        StoredImage i;
        SK_TRY_ASSIGN(i.id, json::get_string(o, "id", ctx));
        if (!is_store_id(i.id)) return fail(Error::Parse, "image store listing: bad image id");
        SK_TRY_ASSIGN(i.names, json::opt_string_list(o, "names", ctx));
        SK_TRY_ASSIGN(i.digests, json::opt_string_list(o, "digests", ctx));
        SK_TRY_ASSIGN(i.created_s, json::opt_int(o, "created", ctx, 0));
        l.images.push_back(std::move(i));
    }
    return l;
}

Result<StoreListing> publish_store_view(const std::string &store,
                                        const std::set<std::string> &exclude) {
    const std::string storage = store + "/storage", view = store + "/view";
    Json::Value images, layers;
    {
        StorageReadLock il(storage + "/overlay-images/images.lock");
        StorageReadLock ll(storage + "/overlay-layers/layers.lock");
        auto i = read_array(storage + "/overlay-images/images.json");
        if (!i) return i.failure();
        auto l = read_array(storage + "/overlay-layers/layers.json");
        if (!l) return l.failure();
        images = std::move(*i);
        layers = std::move(*l);
        if (auto st = make_readable(storage, images, layers); !st) return st.failure();
    }
    for (const char *sub : {"", "/overlay-images", "/overlay-layers"})
        if (auto st = make_dir(view + sub, 0755); !st) return st.failure();
    if (auto st = make_link("../storage/overlay", view + "/overlay"); !st) return st.failure();
    for (const char *lock : {"/overlay-images/images.lock", "/overlay-layers/layers.lock"})
        if (auto st = make_lock_file(view + lock); !st) return st.failure();
    StoreListing out;
    Json::Value shown(Json::arrayValue);
    std::set<std::string> keep;
    for (const auto &i : images) {
        std::string id = i.isObject() ? i["id"].asString() : "";
        if (!is_store_id(id) || exclude.count(id)) continue;
        auto st = make_link("../../storage/overlay-images/" + id, view + "/overlay-images/" + id);
        if (!st) return st.failure();
        keep.insert(id);
        shown.append(i);
        StoredImage s;
        s.id = id;
        s.names = strings_of(i["names"]);
        s.digests = strings_of(i["digests"]);
        if (s.digests.empty() && i["digest"].isString())
            s.digests.push_back(i["digest"].asString());
        s.created_s = i["created"].isString() ? parse_rfc3339(i["created"].asString()) : 0;
        out.images.push_back(std::move(s));
    }
    if (auto st =
            write_file_atomic(view + "/overlay-layers/layers.json", json::write(layers), 0644);
        !st)
        return st.failure();
    if (auto st = write_file_atomic(view + "/overlay-images/images.json", json::write(shown), 0644);
        !st)
        return st.failure();
    remove_stale_links(view + "/overlay-images", keep);
    out.bytes = disk_usage(storage);
    return out;
}

int image_store_publish_main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s %s STORE [IMAGE-ID...]\n", argv[0], kImageStorePublish);
        return 2;
    }
    umask(022);
    std::set<std::string> exclude;
    for (int i = 3; i < argc; i++)
        exclude.insert(argv[i]);
    auto l = publish_store_view(argv[2], exclude);
    if (!l) {
        fprintf(stderr, "%s\n", l.message().c_str());
        return 1;
    }
    printf("%s\n", json::write(to_json(*l)).c_str());
    return fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace sk::agent
