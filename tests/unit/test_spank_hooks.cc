// The hook adapters through the fake spank layer: option registration (and
// the flag table it is derived from, spank/options.h), the allocator's refusal of bad flags, the
// prolog with an absent agent (warn vs fail), and a batch step publishing SLURM_K8S_* and hiding
// the lent GPUs.
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

extern "C" {
#include <slurm/slurm.h>
}

#include "spank/hooks.h"
#include "spank/runfile.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fake_spank.h"

using namespace sk::spank;

static std::string g_dir;

static void setup() {
    fake_spank::reset();
    g_dir = sk_test_tmpdir("/tmp/sk-hooks-XXXXXX");
    std::ofstream(g_dir + "/slurm.conf") << "PrologFlags=Alloc,Contain\n";
    setenv("SLURM_CONF", (g_dir + "/slurm.conf").c_str(), 1);
    setenv("SLURMD_NODENAME", "n1", 1);
    setenv("SLURM_JOB_GPUS", "0,1,2,3", 1);
    setenv("SLURM_JOB_USER", "u", 1);
    setenv("SLURM_JOB_NODELIST", "n[1-2]", 1);
    unsetenv("SLURM_JOB_ID");
}

static int call(int (*hook)(spank_t, int, char **), std::vector<std::string> args) {
    std::vector<char *> av;
    av.reserve(args.size());
    for (auto &a : args)
        av.push_back(&a[0]);
    return hook(fake_spank::handle(), static_cast<int>(av.size()), av.data());
}

static std::vector<std::string> plug_args(const char *extra = nullptr) {
    std::vector<std::string> a = {"socket=" + g_dir + "/absent.sock", "rundir=" + g_dir + "/run",
                                  "timeout=1"};
    if (extra) a.push_back(extra);
    return a;
}

static bool log_has(const std::string &text) {
    for (const auto &l : fake_spank::state().log)
        if (l.find(text) != std::string::npos) return true;
    return false;
}

START_TEST(init_registers_options) {
    fake_spank::reset();
    ck_assert_int_eq(call(hook_init, {}), 0);
    const auto &reg = fake_spank::state().registered;
    ck_assert_uint_eq(reg.size(), 9);
    std::string names;
    for (const auto &o : reg)
        names += std::string(o.name) + " ";
    ck_assert_sstr_eq(names,
                      "k8s-gpus k8s-nodes k8s-cpus k8s-mem k8s-labels k8s-taints k8s-namespace "
                      "k8s-wait k8s-drain-before ");
}
END_TEST

// The allocator: the callbacks record, init_post_opt decides.
struct AllocCase {
    const char *option, *value;
    int rc;
    const char *in_log;
};
static const AllocCase kAlloc[] = {
    {"k8s-gpus", "abc", -1, "--k8s-gpus=abc"},
    {"k8s-gpus", "2", -1, "requests none"},  // this test program passes no --gres
    {"k8s-namespace", "Bad", -1, "--k8s-namespace=Bad"},
    {"k8s-cpus", "4", 0, ""},
};
START_TEST(allocator_table) {
    const auto &c = kAlloc[_i];
    setup();
    ck_assert_int_eq(call(hook_init, {}), 0);
    for (const auto &o : fake_spank::state().registered)
        if (std::string(o.name) == c.option) ck_assert_int_eq(o.cb(o.val, c.value, 0), 0);
    fake_spank::state().context = S_CTX_ALLOCATOR;
    ck_assert_int_eq(call(hook_init_post_opt, plug_args()), c.rc);
    if (c.rc) ck_assert_msg(log_has(c.in_log), "log lacks '%s'", c.in_log);
}
END_TEST

START_TEST(allocator_bad_plugstack) {
    setup();
    call(hook_init, {});
    for (const auto &o : fake_spank::state().registered)
        if (std::string(o.name) == "k8s-cpus") o.cb(o.val, "1", 0);
    fake_spank::state().context = S_CTX_ALLOCATOR;
    ck_assert_int_eq(call(hook_init_post_opt, {"colour=blue"}), -1);
    ck_assert(log_has("colour"));
}
END_TEST

// One row of flag_table() per run: no other row has its name, RawOptions
// field or parse; Slurm gets it registered exactly once, with the row's
// spank_option fields and a val no other option has; its callback records the
// value into the row's field only, the value reaches the row's own parse (the
// allocator's message names the row's flag), and the prolog's getopt reads it
// into the same field.
static void assert_only(const RawOptions &raw, size_t row, const char *value) {
    const FlagTable flags = flag_table();
    for (size_t j = 0; j < flags.size; j++) {
        const auto &v = raw.*flags[j].raw;
        if (j == row)
            ck_assert_msg(v && *v == value, "--%s not recorded", flags[j].name);
        else
            ck_assert_msg(!v, "--%s recorded a value of --%s", flags[j].name, flags[row].name);
    }
}
START_TEST(flag_table_rows) {
    const FlagTable flags = flag_table();
    const size_t row = static_cast<size_t>(_i);
    const Flag &f = flags[row];
    for (size_t j = 0; j < flags.size; j++) {
        if (j == row) continue;
        ck_assert_msg(std::string(flags[j].name) != f.name, "two rows named --%s", f.name);
        ck_assert_msg(flags[j].raw != f.raw, "--%s and --%s share a field", flags[j].name, f.name);
        ck_assert_msg(flags[j].parse != f.parse, "--%s and --%s share a parse", flags[j].name,
                      f.name);
    }

    setup();
    ck_assert_int_eq(call(hook_init, {}), 0);
    const auto &reg = fake_spank::state().registered;
    ck_assert_uint_eq(reg.size(), flags.size);
    const struct spank_option *mine = nullptr;
    int times = 0;
    for (const auto &o : reg)
        if (std::string(o.name) == f.name) {
            mine = &o;
            times++;
        }
    ck_assert_int_eq(times, 1);
    ck_assert_str_eq(mine->arginfo, f.arginfo);
    ck_assert_str_eq(mine->usage, f.usage);
    ck_assert_int_eq(mine->has_arg, f.has_arg);
    for (const auto &o : reg)
        if (&o != mine) ck_assert_int_ne(o.val, mine->val);

    recorded_options() = RawOptions();
    ck_assert_int_eq(mine->cb(mine->val, "!", 0), 0);
    assert_only(recorded_options(), row, "!");
    fake_spank::state().context = S_CTX_ALLOCATOR;
    ck_assert_int_eq(call(hook_init_post_opt, plug_args()), -1);
    const std::string msg = std::string("--") + f.name + "=!: ";
    ck_assert_msg(log_has(msg), "log lacks '%s'", msg.c_str());
    recorded_options() = RawOptions();

    fake_spank::state().getopt[f.name] = "v";
    assert_only(options_from_getopt(fake_spank::handle()), row, "v");
}
END_TEST

// The prolog with no agent: warn (default) keeps the node, fail drains it.
struct PrologCase {
    const char *extra;
    int rc;
};
static const PrologCase kProlog[] = {
    {nullptr, 0}, {"on_agent_error=warn", 0}, {"on_agent_error=fail", -1}};
START_TEST(prolog_absent_agent) {
    setup();
    auto &st = fake_spank::state();
    st.context = S_CTX_JOB_SCRIPT;
    st.job_id = 9;
    st.uid = 2001;
    st.getopt["k8s-gpus"] = "2";
    ck_assert_int_eq(call(hook_job_prolog, plug_args(kProlog[_i].extra)), kProlog[_i].rc);
    ck_assert(log_has("register failed"));
    auto rf = read_run_file(g_dir + "/run", 9, "n1");
    ck_assert(rf.ok());
    ck_assert(!rf->registered);
    ck_assert(rf->error.find("did not register") != std::string::npos);
    ck_assert_int_eq(call(hook_job_epilog, plug_args()), 0);
    ck_assert(read_run_file(g_dir + "/run", 9, "n1").error() == sk::Error::NotFound);
}
END_TEST

START_TEST(prolog_user_errors_do_not_drain) {
    setup();
    auto &st = fake_spank::state();
    st.context = S_CTX_JOB_SCRIPT;
    st.job_id = 10;
    st.getopt["k8s-gpus"] = "6";  // the node has 4
    ck_assert_int_eq(call(hook_job_prolog, plug_args("on_agent_error=fail")), 0);
    auto rf = read_run_file(g_dir + "/run", 10, "n1");
    ck_assert(rf.ok());
    ck_assert(rf->error.find("only 4 GPUs") != std::string::npos);
    // Contain off: reported, not registered, not drained.
    std::ofstream(g_dir + "/slurm.conf") << "PrologFlags=Alloc\n";
    st.getopt["k8s-gpus"] = "1";
    st.job_id = 11;
    ck_assert_int_eq(call(hook_job_prolog, plug_args("on_agent_error=fail")), 0);
    rf = read_run_file(g_dir + "/run", 11, "n1");
    ck_assert(rf.ok() && rf->error.find("PrologFlags=Contain") != std::string::npos);
}
END_TEST

START_TEST(no_options_no_trace) {
    setup();
    fake_spank::state().context = S_CTX_JOB_SCRIPT;
    fake_spank::state().job_id = 12;
    ck_assert_int_eq(call(hook_job_prolog, plug_args("on_agent_error=fail")), 0);
    ck_assert(read_run_file(g_dir + "/run", 12, "n1").error() == sk::Error::NotFound);
    // Only the hook's own timing line, at debug level (bench/bench_slurm_start.py).
    const auto &log = fake_spank::state().log;
    ck_assert_int_eq(log.size(), 1);
    ck_assert_msg(log[0].rfind("debug: spank_k8s: hook prolog (job_script, pid ", 0) == 0 &&
                      log[0].find(" ms") != std::string::npos,
                  "%s", log[0].c_str());
}
END_TEST

// A batch step on a lent node: SLURM_K8S_* published, lent GPUs hidden.
START_TEST(step_env) {
    setup();
    RunFile rf;
    rf.job_id = 13;
    rf.slurm_node = "n1";
    rf.gpus = {6, 7};
    rf.namespaces = {"rl"};
    rf.node_name = "slurm-n1-13";
    rf.registered = true;
    ck_assert(write_run_file(g_dir + "/run", rf).ok());
    auto &st = fake_spank::state();
    st.context = S_CTX_REMOTE;
    st.remote = true;
    st.job_id = 13;
    st.step_id = SLURM_BATCH_SCRIPT;
    st.env = {{"CUDA_VISIBLE_DEVICES", "0,1,2,3"},  // ConstrainDevices renumbering
              {"SLURM_JOB_GPUS", "4,5,6,7"},
              {"GPU_DEVICE_ORDINAL", "0,1,2,3"},
              {"SLURM_GPUS_ON_NODE", "4"}};
    ck_assert_int_eq(call(hook_init_post_opt, plug_args()), 0);
    ck_assert_int_eq(call(hook_user_init, plug_args()), 0);
    ck_assert_int_eq(call(hook_task_init, plug_args()), 0);
    ck_assert_sstr_eq(st.env["SLURM_K8S_NODE"], "slurm-n1-13");
    ck_assert_sstr_eq(st.env["SLURM_K8S_GPUS"], "6,7");
    ck_assert_sstr_eq(st.env["SLURM_K8S_NAMESPACES"], "rl");
    ck_assert_sstr_eq(st.env["CUDA_VISIBLE_DEVICES"], "0,1");
    ck_assert_sstr_eq(st.env["GPU_DEVICE_ORDINAL"], "0,1");
    ck_assert_sstr_eq(st.env["SLURM_JOB_GPUS"], "4,5");
    ck_assert_sstr_eq(st.env["SLURM_GPUS_ON_NODE"], "2");
    ck_assert(!st.env.count("SLURM_K8S_ERROR"));
}
END_TEST

int main() {
    Suite *s = suite_create("spank_hooks");
    TCase *tc = tcase_create("hooks");
    tcase_add_test(tc, init_registers_options);
    tcase_add_loop_test(tc, flag_table_rows, 0, static_cast<int>(flag_table().size));
    tcase_add_loop_test(tc, allocator_table, 0, TABLE_SIZE(kAlloc));
    tcase_add_test(tc, allocator_bad_plugstack);
    tcase_add_loop_test(tc, prolog_absent_agent, 0, TABLE_SIZE(kProlog));
    tcase_add_test(tc, prolog_user_errors_do_not_drain);
    tcase_add_test(tc, no_options_no_trace);
    tcase_add_test(tc, step_env);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
