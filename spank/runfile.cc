#include "spank/runfile.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/jsonc.h"

namespace sk::spank {

std::string run_file_path(const std::string &rundir, uint32_t job_id, const std::string &node) {
    return rundir + "/job_" + std::to_string(job_id) + "_" + node + ".json";
}

std::string encode_run_file(const RunFile &r) {
    jsonc::Value v = jsonc::object();
    jsonc::set(v, "job_id", jsonc::of_uint(r.job_id));
    jsonc::set(v, "slurm_node", jsonc::of_string(r.slurm_node));
    jsonc::set(v, "uid", jsonc::of_uint(r.uid));
    jsonc::set(v, "gid", jsonc::of_uint(r.gid));
    jsonc::set(v, "user", jsonc::of_string(r.user));
    jsonc::set(v, "gpus", jsonc::from_ints(r.gpus));
    jsonc::set(v, "job_gpus", jsonc::from_ints(r.job_gpus));
    jsonc::set(v, "namespaces", jsonc::from_strings(r.namespaces));
    jsonc::set(v, "node_name", jsonc::of_string(r.node_name));
    jsonc::set(v, "registered", jsonc::of_bool(r.registered));
    jsonc::set(v, "error", jsonc::of_string(r.error));
    if (!r.note.empty()) jsonc::set(v, "note", jsonc::of_string(r.note));
    jsonc::set(v, "wait_s", jsonc::of_uint(r.wait_s));
    return jsonc::write(v) + "\n";
}

Result<RunFile> decode_run_file(const std::string &text) {
    auto v = jsonc::parse(text);
    if (!v) return v.failure();
    const char *ctx = "run file";
    RunFile r;
    auto job = jsonc::get_uint(*v, "job_id", ctx, UINT32_MAX);
    auto node = jsonc::get_string(*v, "slurm_node", ctx);
    auto uid = jsonc::get_uint(*v, "uid", ctx, UINT32_MAX);
    auto gid = jsonc::get_uint(*v, "gid", ctx, UINT32_MAX);
    auto user = jsonc::opt_string(*v, "user", ctx);
    auto gpus = jsonc::opt_int_list(*v, "gpus", ctx, 1023);
    auto job_gpus = jsonc::opt_int_list(*v, "job_gpus", ctx, 1023);
    auto ns = jsonc::opt_string_list(*v, "namespaces", ctx);
    auto name = jsonc::opt_string(*v, "node_name", ctx);
    auto reg = jsonc::opt_bool(*v, "registered", ctx, false);
    auto err = jsonc::opt_string(*v, "error", ctx);
    auto note = jsonc::opt_string(*v, "note", ctx);
    auto wait = jsonc::opt_uint(*v, "wait_s", ctx, 0, 86400);
    for (const Failure *f :
         {job.ok() ? nullptr : &job.failure(), node.ok() ? nullptr : &node.failure(),
          uid.ok() ? nullptr : &uid.failure(), gid.ok() ? nullptr : &gid.failure(),
          user.ok() ? nullptr : &user.failure(), gpus.ok() ? nullptr : &gpus.failure(),
          job_gpus.ok() ? nullptr : &job_gpus.failure(), ns.ok() ? nullptr : &ns.failure(),
          name.ok() ? nullptr : &name.failure(), reg.ok() ? nullptr : &reg.failure(),
          err.ok() ? nullptr : &err.failure(), note.ok() ? nullptr : &note.failure(),
          wait.ok() ? nullptr : &wait.failure()})
        if (f) return *f;
    r.job_id = static_cast<uint32_t>(*job);
    r.slurm_node = *node;
    r.uid = static_cast<uint32_t>(*uid);
    r.gid = static_cast<uint32_t>(*gid);
    r.user = *user;
    r.gpus = *gpus;
    r.job_gpus = *job_gpus;
    r.namespaces = *ns;
    r.node_name = *name;
    r.registered = *reg;
    r.error = *err;
    r.note = *note;
    r.wait_s = *wait;
    return r;
}

Status write_run_file(const std::string &rundir, const RunFile &r) {
    if (mkdir(rundir.c_str(), 0700) != 0 && errno != EEXIST)
        return fail(Error::Io, "mkdir " + rundir + ": " + strerror(errno));
    // No fsync: the file lives as long as the job on this node, and a crash
    // of the node ends the job (a sync would cost every job start).
    return write_file_atomic(run_file_path(rundir, r.job_id, r.slurm_node), encode_run_file(r),
                             0600, Durability::Cached);
}

Result<RunFile> read_run_file(const std::string &rundir, uint32_t job_id, const std::string &node) {
    std::string path = run_file_path(rundir, job_id, node);
    auto text = read_file(path, size_t{1} << 20);
    if (!text) return text.failure();
    auto r = decode_run_file(*text);
    if (!r) return fail(Error::Parse, path + ": " + r.message());
    return r;
}

void remove_run_file(const std::string &rundir, uint32_t job_id, const std::string &node) {
    unlink(run_file_path(rundir, job_id, node).c_str());
}

}  // namespace sk::spank
