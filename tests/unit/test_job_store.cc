// agent/core/job_store: the job state files: save, overwrite, torn files skipped,
// background sync, idempotent remove.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "agent/core/job_store.h"
#include "tests/unit/check_main.h"

using namespace sk;
using namespace sk::agent;

START_TEST(job_store_round_trip) {
    char tmpl[] = "/tmp/sk-agent-test-XXXXXX";
    ck_assert(mkdtemp(tmpl) != nullptr);
    JobStore store(tmpl);
    ck_assert(store.init().ok());
    JobRecord r;
    r.job.job_id = 42;
    r.job.slurm_node = "n1";
    r.job.user = "alice";
    r.job.uid = 1000;
    r.job.gpus = {1};
    r.node_name = "slurm-n1-42";
    r.node_uid = "u";
    ck_assert(store.save(r).ok());
    r.draining = true;
    ck_assert(store.save(r).ok());  // overwrite
    // A torn or foreign file is skipped and reported, not fatal.
    FILE *f = fopen((std::string(tmpl) + "/jobs/job_7_n1.json").c_str(), "w");
    fputs("{\"job\":", f);
    fclose(f);
    std::vector<std::string> bad;
    auto all = store.load_all(&bad);
    ck_assert_int_eq(all.size(), 1);
    ck_assert_int_eq(bad.size(), 1);
    ck_assert_sstr_eq(all[0].node_name, "slurm-n1-42");
    ck_assert(all[0].draining);
    ck_assert_int_eq(all[0].slot, -1);  // a name per job
    ck_assert_int_eq(all[0].job.gpus[0], 1);
    ck_assert(access((std::string(tmpl) + "/jobs/job_42_n1.json.tmp").c_str(), F_OK) != 0);
    // With a background sync, a save is readable at once and hands the
    // fsync of exactly that file to the syncer.
    std::vector<std::string> synced;
    store.set_background_sync([&](const std::string &p) { synced.push_back(p); });
    r.draining = false;
    r.slot = 2;
    ck_assert(store.save(r).ok());
    ck_assert_int_eq(synced.size(), 1);
    ck_assert_sstr_eq(synced[0], store.path_of(42, "n1"));
    sync_to_disk(synced[0]);
    sync_to_disk(std::string(tmpl) + "/jobs/nonexistent.json");  // gone meanwhile: no error
    bad.clear();
    all = store.load_all(&bad);
    ck_assert_int_eq(all.size(), 1);
    ck_assert(!all[0].draining);
    ck_assert_int_eq(all[0].slot, 2);
    ck_assert(store.remove(42, "n1").ok());
    ck_assert(store.remove(42, "n1").ok());  // idempotent
    unlink((std::string(tmpl) + "/jobs/job_7_n1.json").c_str());
    rmdir((std::string(tmpl) + "/jobs").c_str());
    ck_assert_int_eq(rmdir(tmpl), 0);
}

// The names the garbage collection reads back (agent/agent.cc: gc_files).
START_TEST(job_file_names) {
    auto k = parse_job_file_name("job_42_n1.json", ".json");
    ck_assert(k && k->job_id == 42 && k->slurm_node == "n1");
    auto d = parse_job_file_name("job_7_node_a-1.b", "");
    ck_assert(d && d->job_id == 7 && d->slurm_node == "node_a-1.b");
    for (const char *bad : {"job_42_n1.json.tmp.1.0", "job__n1.json", "job_x_n1.json",
                            "job_0_n1.json", "job_4294967296_n1.json", "job_42_.json",
                            "job_42_n/1.json", "jobs_42_n1.json", "job_42.json"})
        ck_assert_msg(!parse_job_file_name(bad, ".json"), "accepted %s", bad);
    ck_assert(!parse_job_file_name("job_42_n 1", ""));
}
END_TEST

int main() {
    Suite *s = suite_create("job_store");
    TCase *tc = tcase_create("job_store");
    tcase_add_test(tc, job_store_round_trip);
    tcase_add_test(tc, job_file_names);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
