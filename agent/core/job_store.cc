#include "agent/core/job_store.h"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/daemons/json.h"
#include "common/strings.h"

namespace sk::agent {

Json::Value to_json(const JobRecord &r) {
    Json::Value v(Json::objectValue);
    v["job"] = proto::to_json(r.job);
    v["node_name"] = r.node_name;
    v["node_uid"] = r.node_uid;
    v["registered_at"] = Json::Int64(r.registered_at);
    v["draining"] = r.draining;
    if (r.slot >= 0) v["slot"] = r.slot;
    return v;
}

Result<JobRecord> job_record_from_json(const Json::Value &v) {
    JobRecord r;
    if (!v.isObject()) return fail(Error::Parse, "job record: not an object");
    auto job = proto::register_from_json(v["job"]);
    if (!job) return fail(Error::Parse, "job record: " + job.message());
    r.job = *job;
    auto name = json::get_string(v, "node_name", "job record");
    if (!name) return name.failure();
    r.node_name = *name;
    auto uid = json::opt_string(v, "node_uid", "job record");
    if (!uid) return uid.failure();
    r.node_uid = *uid;
    auto at = json::opt_int(v, "registered_at", "job record", 0);
    if (!at) return at.failure();
    r.registered_at = *at;
    auto dr = json::opt_bool(v, "draining", "job record", false);
    if (!dr) return dr.failure();
    r.draining = *dr;
    auto slot = json::opt_int(v, "slot", "job record", -1);
    if (!slot) return slot.failure();
    if (*slot < -1 || *slot > 1000000) return fail(Error::Parse, "job record: slot out of range");
    r.slot = static_cast<int32_t>(*slot);
    return r;
}

std::string job_key(uint32_t job_id, const std::string &slurm_node) {
    return std::to_string(job_id) + "@" + slurm_node;
}

static Failure io_error(const std::string &what, const std::string &path) {
    return fail(Error::Io, what + " " + path + ": " + strerror(errno));
}

Status JobStore::init() const {
    std::string acc;
    for (const auto &part : split(dir_, '/')) {
        if (part.empty()) continue;
        acc += "/" + part;
        if (mkdir(acc.c_str(), 0700) != 0 && errno != EEXIST)
            return io_error("cannot create state directory", acc);
    }
    return {};
}

std::string JobStore::path_of(uint32_t job_id, const std::string &slurm_node) const {
    return dir_ + "/job_" + std::to_string(job_id) + "_" + slurm_node + ".json";
}

Status JobStore::save(const JobRecord &r) const {
    std::string path = path_of(r.job.job_id, r.job.slurm_node);
    auto st = write_file_atomic(path, json::write(to_json(r)) + "\n", 0600,
                                sync_ ? Durability::Cached : Durability::Durable);
    if (st && sync_) sync_(path);
    return st;
}

Status JobStore::remove(uint32_t job_id, const std::string &slurm_node) const {
    std::string p = path_of(job_id, slurm_node);
    if (unlink(p.c_str()) != 0 && errno != ENOENT) return io_error("cannot remove", p);
    return {};
}

std::optional<proto::JobKey> parse_job_file_name(std::string_view name, std::string_view suffix) {
    if (!starts_with(name, "job_") || !ends_with(name, suffix)) return std::nullopt;
    std::string_view mid = name.substr(4, name.size() - 4 - suffix.size());
    size_t us = mid.find('_');
    if (us == std::string_view::npos || us == 0 || us > 10) return std::nullopt;
    uint64_t id = 0;
    for (char c : mid.substr(0, us)) {
        if (c < '0' || c > '9') return std::nullopt;
        id = id * 10 + static_cast<uint64_t>(c - '0');
    }
    if (id == 0 || id > UINT32_MAX) return std::nullopt;
    std::string node(mid.substr(us + 1));
    if (!proto::check_node_name(node, "job file")) return std::nullopt;
    return proto::JobKey{static_cast<uint32_t>(id), node};
}

std::vector<proto::JobKey> JobStore::record_keys() const {
    std::vector<proto::JobKey> out;
    DIR *d = opendir(dir_.c_str());
    if (!d) return out;
    while (struct dirent *e = readdir(d))
        if (auto k = parse_job_file_name(e->d_name, ".json")) out.push_back(std::move(*k));
    closedir(d);
    return out;
}

std::vector<JobRecord> JobStore::load_all(std::vector<std::string> *bad) const {
    std::vector<JobRecord> out;
    DIR *d = opendir(dir_.c_str());
    if (!d) return out;
    while (struct dirent *e = readdir(d)) {
        std::string name = e->d_name;
        if (!starts_with(name, "job_") || !ends_with(name, ".json")) continue;
        std::string path = dir_ + "/" + name;
        auto text = read_file(path, size_t{1} << 20);  // a record is a few hundred bytes
        auto v = text ? json::parse(*text) : Result<Json::Value>(text.failure());
        Result<JobRecord> r = v ? job_record_from_json(*v) : Result<JobRecord>(v.failure());
        if (!r) {
            if (bad) bad->push_back(path + ": " + r.message());
            continue;
        }
        out.push_back(std::move(*r));
    }
    closedir(d);
    return out;
}

}  // namespace sk::agent
