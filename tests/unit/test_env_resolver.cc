// agent/env_resolver: every env source a pod can name, missing references,
// and resource quantities.
#include <map>
#include <string>

#include "agent/env_resolver.h"
#include "common/base64.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

static Json::Value env_pod() {
    return J(R"({"metadata":{"name":"p","namespace":"ns","uid":"u1","labels":{"app":"x"}},
      "spec":{"containers":[{"name":"main","resources":{"limits":{"cpu":"500m","memory":"1Gi"}},
        "env":[{"name":"PLAIN","value":"v"},
          {"name":"CM","valueFrom":{"configMapKeyRef":{"name":"cfg","key":"k"}}},
          {"name":"SEC","valueFrom":{"secretKeyRef":{"name":"s","key":"pw"}}},
          {"name":"OPT","valueFrom":{"secretKeyRef":{"name":"s","key":"none","optional":true}}},
          {"name":"NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},
          {"name":"APP","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['app']"}}},
          {"name":"IP","valueFrom":{"fieldRef":{"fieldPath":"status.podIP"}}},
          {"name":"CPU","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu"}}},
          {"name":"MEM","valueFrom":{"resourceFieldRef":{"resource":"limits.memory","divisor":"1Mi"}}}]}],
        "volumes":[{"name":"conf","configMap":{"name":"cfg"}}]}})");
}

START_TEST(env_resolves_every_kind) {
    Json::Value pod = env_pod();
    auto refs = referenced_objects(pod);
    ck_assert_int_eq(refs.size(), 2);
    FetchedObjects objs;
    objs[{"configmaps", "cfg"}] = J(R"({"data":{"k":"cmval"}})");
    objs[{"secrets", "s"}] = J(R"({"data":{"pw":"c2VjcmV0"}})");
    auto r = resolve_pod(pod, objs, {"slurm-n1-42", "10.0.0.9", 4, 2048});
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    std::map<std::string, std::string> env;
    for (const auto &e : (*r)["pod"]["spec"]["containers"][0]["env"]) {
        ck_assert(!e.isMember("valueFrom"));
        env[e["name"].asString()] = e["value"].asString();
    }
    ck_assert_sstr_eq(env["PLAIN"], "v");
    ck_assert_sstr_eq(env["CM"], "cmval");
    ck_assert_sstr_eq(env["SEC"], "secret");
    ck_assert(env.count("OPT") == 0);
    ck_assert_sstr_eq(env["NAME"], "p");
    ck_assert_sstr_eq(env["APP"], "x");
    ck_assert_sstr_eq(env["IP"], "10.0.0.9");
    ck_assert_sstr_eq(env["CPU"], "1");  // 500m rounded up to whole cores
    ck_assert_sstr_eq(env["MEM"], "1024");
    ck_assert_sstr_eq((*r)["files"]["conf"]["k"].asString(), base64_encode("cmval"));
}
END_TEST

struct EnvFail {
    const char *drop;  // which object is missing
    const char *message_has;
};
static const EnvFail kEnvFails[] = {
    {"configmaps", "configmap \"cfg\" not found"},
    {"secrets", "secret \"s\" not found"},
    {"key", "couldn't find key pw in Secret ns/s"},
};
START_TEST(env_missing_refs_fail) {
    FetchedObjects objs;
    objs[{"configmaps", "cfg"}] = J(R"({"data":{"k":"cmval"}})");
    objs[{"secrets", "s"}] = J(R"({"data":{"pw":"c2VjcmV0"}})");
    std::string drop = kEnvFails[_i].drop;
    if (drop == "key")
        objs[{"secrets", "s"}] = J(R"({"data":{}})");
    else
        objs.erase({drop, drop == "secrets" ? "s" : "cfg"});
    auto r = resolve_pod(env_pod(), objs, {"n", "1.2.3.4", 1, 1});
    ck_assert(!r.ok());
    ck_assert_msg(r.message().find(kEnvFails[_i].message_has) != std::string::npos, "%s",
                  r.message().c_str());
}
END_TEST

struct Quantity {
    const char *text;
    int64_t milli;  // -1 = invalid
};
static const Quantity kQuantities[] = {
    {"500m", 500}, {"2", 2000},      {"1Ki", 1024000}, {"1Gi", 1073741824000LL},
    {"1.5", 1500}, {"1e3", 1000000}, {"", -1},         {"abc", -1},
    {"1Xi", -1},   {"1.2.3", -1},
};
START_TEST(quantities) {
    auto r = parse_quantity_milli(kQuantities[_i].text);
    if (kQuantities[_i].milli < 0) {
        ck_assert_msg(!r.ok(), "accepted '%s'", kQuantities[_i].text);
    } else {
        ck_assert_msg(r.ok(), "'%s'", kQuantities[_i].text);
        ck_assert_int_eq(*r, kQuantities[_i].milli);
    }
}
END_TEST

int main() {
    Suite *s = suite_create("env_resolver");
    TCase *tc = tcase_create("env_resolver");
    tcase_add_test(tc, env_resolves_every_kind);
    tcase_add_loop_test(tc, env_missing_refs_fail, 0, TABLE_SIZE(kEnvFails));
    tcase_add_loop_test(tc, quantities, 0, TABLE_SIZE(kQuantities));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
