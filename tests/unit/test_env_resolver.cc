// agent/controllers/env_resolver: every env source a pod can name, missing references,
// and resource quantities.
#include <map>
#include <string>

#include "agent/controllers/env_resolver.h"
#include "common/daemons/base64.h"
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
    for (const auto &e : r->pod["spec"]["containers"][0]["env"]) {
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
    ck_assert_sstr_eq(r->files["conf"]["k"], "cmval");
    // The pod's addresses ride along: the shim's probes dial status.podIP.
    const Json::Value &st = r->pod["status"];
    ck_assert_sstr_eq(st["podIP"].asString(), "10.0.0.9");
    ck_assert_sstr_eq(st["hostIP"].asString(), "10.0.0.9");
    ck_assert_sstr_eq(st["podIPs"][0]["ip"].asString(), "10.0.0.9");
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
// The volume the ServiceAccount admission adds to every pod
// (kube-api-access-*, as kube-apiserver 1.28 writes it), a downwardAPI volume
// and a projected one of every source kind: the files a kubelet writes.
static Json::Value volumes_pod() {
    return J(R"({"metadata":{"name":"p","namespace":"ns","uid":"u1",
        "labels":{"app":"x","tier":"a\"b"},"annotations":{"note":"line1\nline2"}},
      "spec":{"serviceAccountName":"trainer",
        "containers":[{"name":"main","resources":{"limits":{"cpu":"500m"}},
          "env":[{"name":"KUBERNETES_SERVICE_PORT","value":"8443"}]}],
        "volumes":[
          {"name":"kube-api-access-j7mdw","projected":{"defaultMode":420,"sources":[
            {"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},
            {"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},
            {"downwardAPI":{"items":[{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"},
                                      "path":"namespace"}]}}]}},
          {"name":"info","downwardAPI":{"items":[
            {"path":"labels","fieldRef":{"fieldPath":"metadata.labels"}},
            {"path":"annotations","fieldRef":{"fieldPath":"metadata.annotations"}},
            {"path":"name","fieldRef":{"fieldPath":"metadata.name"}},
            {"path":"cpu","resourceFieldRef":{"containerName":"main","resource":"limits.cpu","divisor":"1m"}}]}},
          {"name":"mixed","projected":{"sources":[
            {"secret":{"name":"s","items":[{"key":"pw","path":"db/pw"}]}},
            {"serviceAccountToken":{"audience":"vault","expirationSeconds":600,"path":"vault-token"}}]}}]}})");
}

static std::string file_of(const proto::PodRun &run, const char *vol, const char *path) {
    auto v = run.files.find(vol);
    if (v == run.files.end()) return "<no volume>";
    auto f = v->second.find(path);
    return f == v->second.end() ? "<no file>" : f->second;
}

START_TEST(projected_and_downward_volumes) {
    Json::Value pod = volumes_pod();
    auto refs = referenced_objects(pod);
    ck_assert(refs.count({"configmaps", "kube-root-ca.crt"}) && refs.count({"secrets", "s"}));
    auto needs = token_requests(pod);
    ck_assert_int_eq(needs.size(), 2);
    ck_assert(needs[0].ref == token_ref("kube-api-access-j7mdw", "token"));
    ck_assert_sstr_eq(needs[0].service_account, "trainer");
    ck_assert_sstr_eq(needs[0].audience, "");
    ck_assert_int_eq(needs[0].expiration_s, 3607);
    ck_assert_sstr_eq(needs[1].audience, "vault");
    Json::Value b = token_request_body(pod, needs[1]);
    ck_assert_sstr_eq(b["kind"].asString(), "TokenRequest");
    ck_assert_sstr_eq(b["spec"]["audiences"][0].asString(), "vault");
    ck_assert_int_eq(b["spec"]["expirationSeconds"].asInt(), 600);
    ck_assert_sstr_eq(b["spec"]["boundObjectRef"]["kind"].asString(), "Pod");
    ck_assert_sstr_eq(b["spec"]["boundObjectRef"]["name"].asString(), "p");
    ck_assert_sstr_eq(b["spec"]["boundObjectRef"]["uid"].asString(), "u1");
    ck_assert(!token_request_body(pod, needs[0])["spec"].isMember("audiences"));
    ck_assert_sstr_eq(*token_request_path("ns", needs[0]),
                      "/api/v1/namespaces/ns/serviceaccounts/trainer/token");
    TokenNeed odd = needs[0];
    odd.service_account = "../secrets/x";
    ck_assert(!token_request_path("ns", odd).ok());
    ck_assert(!token_request_path("a/b", needs[0]).ok());

    FetchedObjects objs;
    objs[{"configmaps", "kube-root-ca.crt"}] =
        J(R"({"data":{"ca.crt":"-----BEGIN CERTIFICATE-----\n"}})");
    objs[{"secrets", "s"}] = J(R"({"data":{"pw":"c2VjcmV0"}})");
    objs[needs[0].ref] =
        J(R"({"status":{"token":"eyJ.a.b","expirationTimestamp":"2026-12-04T06:00:00Z"}})");
    objs[needs[1].ref] = J(R"({"status":{"token":"eyJ.v.t"}})");
    NodeFacts node{"slurm-n1-42", "10.0.0.9", 4, 2048};
    node.api_host = "10.0.0.1";
    node.api_port = "6443";
    auto r = resolve_pod(pod, objs, node);
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert_sstr_eq(file_of(*r, "kube-api-access-j7mdw", "token"), "eyJ.a.b");
    ck_assert_sstr_eq(file_of(*r, "kube-api-access-j7mdw", "ca.crt"),
                      "-----BEGIN CERTIFICATE-----\n");
    ck_assert_sstr_eq(file_of(*r, "kube-api-access-j7mdw", "namespace"), "ns");
    ck_assert_int_eq(r->files["kube-api-access-j7mdw"].size(), 3);
    // As the kubelet writes them: key="value" lines, sorted, %q-quoted.
    ck_assert_sstr_eq(file_of(*r, "info", "labels"), "app=\"x\"\ntier=\"a\\\"b\"");
    ck_assert_sstr_eq(file_of(*r, "info", "annotations"), "note=\"line1\\nline2\"");
    ck_assert_sstr_eq(file_of(*r, "info", "name"), "p");
    ck_assert_sstr_eq(file_of(*r, "info", "cpu"), "500");
    ck_assert_sstr_eq(file_of(*r, "mixed", "db/pw"), "secret");
    ck_assert_sstr_eq(file_of(*r, "mixed", "vault-token"), "eyJ.v.t");
    // KUBERNETES_SERVICE_*: first, so the pod's own entry wins (the shim keeps the last).
    const Json::Value &env = r->pod["spec"]["containers"][0]["env"];
    ck_assert_sstr_eq(env[0]["name"].asString(), "KUBERNETES_SERVICE_HOST");
    ck_assert_sstr_eq(env[0]["value"].asString(), "10.0.0.1");
    ck_assert_sstr_eq(env[1]["name"].asString(), "KUBERNETES_SERVICE_PORT");
    ck_assert_sstr_eq(env[1]["value"].asString(), "6443");
    ck_assert_sstr_eq(env[2]["name"].asString(), "KUBERNETES_SERVICE_PORT_HTTPS");
    ck_assert_sstr_eq(env[3]["name"].asString(), "KUBERNETES_SERVICE_PORT");
    ck_assert_sstr_eq(env[3]["value"].asString(), "8443");

    // No token (the TokenRequest was refused): the pod cannot start.
    objs.erase(needs[0].ref);
    auto missing = resolve_pod(pod, objs, node);
    ck_assert(!missing.ok());
    ck_assert_sstr_eq(
        missing.message(),
        "volume kube-api-access-j7mdw: no token for token (the TokenRequest gave none)");
    // No CA ConfigMap: as the kubelet, 'configmap "kube-root-ca.crt" not found'.
    objs[needs[0].ref] = J(R"({"status":{"token":"eyJ.a.b"}})");
    objs.erase({"configmaps", "kube-root-ca.crt"});
    auto noca = resolve_pod(pod, objs, node);
    ck_assert(!noca.ok());
    ck_assert_sstr_eq(noca.message(), "configmap \"kube-root-ca.crt\" not found");
}
END_TEST

struct EndpointCase {
    const char *url, *host, *port;  // host "" = refused
};
static const EndpointCase kEndpoints[] = {
    {"https://10.0.0.1:6443", "10.0.0.1", "6443"},
    {"https://api.example.org", "api.example.org", "443"},
    {"https://api.example.org:8443/prefix/", "api.example.org", "8443"},
    {"https://[fd00::1]:6443", "fd00::1", "6443"},
    {"https://[fd00::1]", "fd00::1", "443"},
    {"http://127.0.0.1:8080", "127.0.0.1", "8080"},
    {"10.0.0.1:6443", "", ""},
    {"https://:6443", "", ""},
    {"https://host:port", "", ""},
    {"https://[fd00::1", "", ""},
};
// imagePullSecrets: fetched with the pod's other references, merged into one
// containers-auth.json document (first secret per registry wins), both
// secret types, username/password turned into auth; absent or unreadable
// ones named for the kubelet's warning.
START_TEST(pull_secrets_merged) {
    Json::Value pod = J(R"({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "imagePullSecrets":[{"name":"a"},{"name":"b"},{"name":"gone"},{"name":"junk"}],
      "containers":[{"name":"c","image":"reg:5000/x:1"}]}})");
    auto refs = referenced_objects(pod);
    ck_assert(refs.count({"secrets", "a"}) && refs.count({"secrets", "gone"}));
    FetchedObjects objs;
    auto Js = [](const std::string &t) { return J(t.c_str()); };
    objs[{"secrets", "a"}] = Js(std::string(R"({"type":"kubernetes.io/dockerconfigjson","data":{
      ".dockerconfigjson":")") + base64_encode(R"({"auths":{"reg:5000":{"auth":"YTph"}}})") +
                                R"("}})");
    objs[{"secrets", "b"}] = Js(std::string(R"({"type":"kubernetes.io/dockercfg","data":{
      ".dockercfg":")") + base64_encode(R"({"reg:5000":{"auth":"Yjpi"},
        "other.io":{"username":"u","password":"p"}})") +
                                R"("}})");
    objs[{"secrets", "junk"}] = J(R"({"type":"Opaque","data":{"x":"eA=="}})");
    std::vector<std::string> missing;
    auto auth = Js(pull_auth(pod, objs, &missing));
    ck_assert_sstr_eq(auth["auths"]["reg:5000"]["auth"].asString(), "YTph");  // a's, first
    ck_assert_sstr_eq(auth["auths"]["other.io"]["auth"].asString(), base64_encode("u:p"));
    ck_assert_uint_eq(auth["auths"].size(), 2);
    ck_assert(missing == std::vector<std::string>({"gone", "junk"}));
    auto body = resolve_pod(pod, objs, {});
    ck_assert(body.ok() && Js(body->pull_auth) == auth);
    // None named, or none there: no credentials at all.
    objs.clear();
    missing.clear();
    ck_assert_sstr_eq(pull_auth(pod, objs, &missing), "");
    ck_assert_uint_eq(missing.size(), 4);
    body = resolve_pod(pod, objs, {});
    ck_assert(body.ok() && body->pull_auth.empty());
}
END_TEST

// The refresh of a running pod's volumes: the files of its configMap and
// secret volumes (and projected sources of those kinds) from the objects as
// they are now, as resolve_pod writes them; token and downwardAPI files left
// out; a volume whose object or key is gone left out (its files stay).
START_TEST(object_volume_files_for_refresh) {
    Json::Value pod = J(R"({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "containers":[{"name":"c","image":"i","env":[{"name":"E","valueFrom":
        {"configMapKeyRef":{"name":"envcm","key":"k"}}}]}],
      "imagePullSecrets":[{"name":"pull"}],
      "volumes":[
        {"name":"cfg","configMap":{"name":"cm"}},
        {"name":"key","secret":{"secretName":"sec","items":[{"key":"k2","path":"k2.txt"},
                                                            {"key":"k","path":"k.txt"}]}},
        {"name":"gone","configMap":{"name":"absent"}},
        {"name":"proj","projected":{"sources":[
          {"configMap":{"name":"cm","items":[{"key":"a","path":"a"}]}},
          {"serviceAccountToken":{"path":"token"}},
          {"downwardAPI":{"items":[{"path":"ns","fieldRef":{"fieldPath":"metadata.namespace"}}]}}]}},
        {"name":"down","downwardAPI":{"items":[{"path":"n","fieldRef":{"fieldPath":"metadata.name"}}]}},
        {"name":"scratch","emptyDir":{}}]}})");
    auto refs = volume_objects(pod);
    ck_assert(refs == std::set<ObjectRef>(
                          {{"configmaps", "cm"}, {"secrets", "sec"}, {"configmaps", "absent"}}));
    FetchedObjects objs;
    objs[{"configmaps", "cm"}] = J(R"({"data":{"a":"one","b":"two"}})");
    objs[{"secrets", "sec"}] = J(R"({"data":{"k":"c2VjcmV0","k2":"eHg="}})");
    proto::PodFiles files = object_volume_files(pod, objs);
    ck_assert_uint_eq(files.size(), 3);  // cfg, key, proj
    ck_assert_sstr_eq(files["cfg"]["a"], "one");
    ck_assert_sstr_eq(files["cfg"]["b"], "two");
    ck_assert_sstr_eq(files["key"]["k.txt"], "secret");  // the Secret's base64 decoded
    ck_assert_uint_eq(files["proj"].size(), 1);          // no token, no downwardAPI file
    ck_assert_sstr_eq(files["proj"]["a"], "one");
    ck_assert(!files.count("gone") && !files.count("down") && !files.count("scratch"));
    // The same bytes as the pod's start wrote for these volumes.
    objs[token_ref("proj", "token")] = J(R"({"status":{"token":"t"}})");
    objs[{"configmaps", "absent"}] = J(R"({"data":{"x":"y"}})");
    objs[{"configmaps", "envcm"}] = J(R"({"data":{"k":"v"}})");
    auto body = resolve_pod(pod, objs, {});
    ck_assert_msg(body.ok(), "%s", body.message().c_str());
    for (const char *v : {"cfg", "key"})
        ck_assert(body->files[v] == files[v]);
    ck_assert(body->files["proj"]["a"] == files["proj"]["a"]);
    // A key gone from the secret (after one still there): that volume is left out.
    objs[{"secrets", "sec"}] = J(R"({"data":{"k2":"eHg="}})");
    files = object_volume_files(pod, objs);
    ck_assert(!files.count("key") && files.count("cfg"));
}
END_TEST

// What the shim would refuse is refused here, before anything is sent: a
// Secret's value that is not base64 (the API server's own form), a pod with
// no uid.
START_TEST(resolve_refuses_what_the_shim_would) {
    Json::Value pod = J(R"({"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{
      "containers":[{"name":"c","image":"i"}],
      "volumes":[{"name":"key","secret":{"secretName":"sec"}}]}})");
    FetchedObjects objs;
    objs[{"secrets", "sec"}] = J(R"({"data":{"k":"not base64!"}})");
    auto r = resolve_pod(pod, objs, {});
    ck_assert(!r.ok() && r.error() == Error::Invalid);
    ck_assert_msg(
        r.message().find("key k of secret \"sec\" is not valid base64") != std::string::npos, "%s",
        r.message().c_str());
    objs[{"secrets", "sec"}] = J(R"({"data":{"k":"c2VjcmV0"}})");
    r = resolve_pod(pod, objs, {});
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert_sstr_eq(r->files["key"]["k"], "secret");
    pod["metadata"].removeMember("uid");
    r = resolve_pod(pod, objs, {});
    ck_assert(!r.ok() && r.message() == "pod_run: pod has no valid metadata.uid");
}
END_TEST

START_TEST(api_endpoints) {
    const EndpointCase &c = kEndpoints[_i];
    auto e = api_endpoint(c.url);
    if (!*c.host) {
        ck_assert_msg(!e, "%s: accepted", c.url);
        return;
    }
    ck_assert_msg(e.has_value(), "%s: refused", c.url);
    ck_assert_sstr_eq(e->first, c.host);
    ck_assert_sstr_eq(e->second, c.port);
}
END_TEST

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
    tcase_add_test(tc, projected_and_downward_volumes);
    tcase_add_test(tc, pull_secrets_merged);
    tcase_add_test(tc, object_volume_files_for_refresh);
    tcase_add_test(tc, resolve_refuses_what_the_shim_would);
    tcase_add_loop_test(tc, api_endpoints, 0, TABLE_SIZE(kEndpoints));
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
