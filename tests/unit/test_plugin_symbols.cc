// Loads the built spank_k8s.so the way Slurm does and checks its ABI: the
// plugin_* symbols are present with the right values, the hooks resolve, and
// nothing else is exported (the version script).
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstring>
#include <set>
#include <string>

#include "tests/unit/check_main.h"
#include "tests/unit/fake_spank.h"

static void *load() {
    void *h = dlopen(SPANK_K8S_SO, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != nullptr, "dlopen %s: %s", SPANK_K8S_SO, dlerror());
    return h;
}

START_TEST(identity_symbols) {
    void *h = load();
    auto *name = static_cast<const char *>(dlsym(h, "plugin_name"));
    auto *type = static_cast<const char *>(dlsym(h, "plugin_type"));
    auto *version = static_cast<const unsigned *>(dlsym(h, "plugin_version"));
    ck_assert_ptr_nonnull(name);
    ck_assert_ptr_nonnull(type);
    ck_assert_ptr_nonnull(version);
    ck_assert_str_eq(name, "spank_k8s");
    ck_assert_str_eq(type, "spank");
    ck_assert_uint_eq(*version, SLURM_VERSION_NUMBER);
    dlclose(h);
}
END_TEST

static const char *const kHooks[] = {
    "slurm_spank_init",       "slurm_spank_init_post_opt", "slurm_spank_job_prolog",
    "slurm_spank_user_init",  "slurm_spank_task_init",     "slurm_spank_task_post_fork",
    "slurm_spank_job_epilog", "slurm_spank_exit",
};

START_TEST(hooks_resolve) {
    void *h = load();
    ck_assert_msg(dlsym(h, kHooks[_i]) != nullptr, "%s missing", kHooks[_i]);
    dlclose(h);
}
END_TEST

// Walks the plugin's dynamic symbol table: every defined global symbol must
// be one of the plugin_* identity symbols or a slurm_spank_* hook.
START_TEST(exports_only_the_abi) {
    void *h = load();
    struct link_map *lm = nullptr;
    ck_assert_int_eq(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
    const ElfW(Sym) *symtab = nullptr;
    const char *strtab = nullptr;
    const ElfW(Word) *hash = nullptr;
    const uint32_t *gnu_hash = nullptr;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym) *>(d->d_un.d_ptr);
        if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char *>(d->d_un.d_ptr);
        if (d->d_tag == DT_HASH) hash = reinterpret_cast<const ElfW(Word) *>(d->d_un.d_ptr);
        if (d->d_tag == DT_GNU_HASH) gnu_hash = reinterpret_cast<const uint32_t *>(d->d_un.d_ptr);
    }
    ck_assert_ptr_nonnull(symtab);
    ck_assert_ptr_nonnull(strtab);
    // Number of dynamic symbols: from DT_HASH, or by walking DT_GNU_HASH chains.
    size_t nsyms = 0;
    if (hash) {
        nsyms = hash[1];
    } else {
        ck_assert_ptr_nonnull(gnu_hash);
        uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom_size = gnu_hash[2];
        const uint32_t *buckets =
            gnu_hash + 4 + bloom_size * (sizeof(ElfW(Addr)) / sizeof(uint32_t));
        const uint32_t *chain = buckets + nbuckets;
        uint32_t last = 0;
        for (uint32_t b = 0; b < nbuckets; b++)
            if (buckets[b] > last) last = buckets[b];
        if (last >= symoffset)
            while (!(chain[last - symoffset] & 1))
                last++;
        nsyms = last + 1;
    }
    std::set<std::string> allowed = {"plugin_name", "plugin_type", "plugin_version",
                                     "spank_plugin_version"};
    int exported = 0;
    for (size_t i = 1; i < nsyms; i++) {
        const ElfW(Sym) &s = symtab[i];
        if (s.st_shndx == SHN_UNDEF) continue;
        int bind = ELF64_ST_BIND(s.st_info);
        if (bind != STB_GLOBAL && bind != STB_WEAK) continue;
        std::string n = strtab + s.st_name;
        bool ok = allowed.count(n) || n.rfind("slurm_spank_", 0) == 0;
        ck_assert_msg(ok, "unexpected exported symbol %s", n.c_str());
        exported++;
    }
    ck_assert_int_eq(exported, 4 + TABLE_SIZE(kHooks));
    dlclose(h);
}
END_TEST

// The options register through the fake layer, as sbatch would see them.
START_TEST(init_registers_options) {
    fake_spank::reset();
    void *h = load();
    auto init = reinterpret_cast<int (*)(spank_t, int, char **)>(dlsym(h, "slurm_spank_init"));
    ck_assert_int_eq(init(fake_spank::handle(), 0, nullptr), 0);
    std::set<std::string> names;
    for (const auto &o : fake_spank::state().registered)
        names.insert(o.name);
    for (const char *want : {"k8s-gpus", "k8s-nodes", "k8s-cpus", "k8s-mem", "k8s-labels",
                             "k8s-taints", "k8s-namespace", "k8s-wait", "k8s-drain-before"})
        ck_assert_msg(names.count(want), "--%s not registered", want);
    dlclose(h);
}
END_TEST

int main() {
    Suite *s = suite_create("plugin_symbols");
    TCase *tc = tcase_create("abi");
    tcase_add_test(tc, identity_symbols);
    tcase_add_loop_test(tc, hooks_resolve, 0, TABLE_SIZE(kHooks));
    tcase_add_test(tc, exports_only_the_abi);
    tcase_add_test(tc, init_registers_options);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
