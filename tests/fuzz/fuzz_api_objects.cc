// The agent's decoders of objects that come from the API server: Status
// bodies (agent/kube/kube_client.h), Nodes and Leases (agent/controllers/node_builder.h), Pods
// and pod lists (agent/controllers/pod_status_patch.h, agent/kube/api_object.h), ConfigMaps and
// Secrets (agent/controllers/env_resolver.h). Input: byte 0 picks the HTTP status code,
// byte 1 option bits, then up to three documents, one per line: A (a Status
// body, Node, Lease, Pod or list), B (a PodStatus from the runtime, or the
// ConfigMap/Secret every reference of A resolves to), C (an older PodStatus).
// A document that is not JSON is still a Status body (raw text) and null
// elsewhere. Every decoder runs on every input. Properties:
// - nothing throws (the agent runs these inside curl callbacks);
// - a non-2xx answer is a failure whose message names the call, "HTTP <code>"
//   and the Status message when there is one, classified as the table says;
// - a 2xx answer decodes exactly when the body is empty or JSON;
// - patches and objects built from A are objects of the right shape and
//   survive json::write + json::parse unchanged;
// - a status PATCH is null once the API shows the desired status
//   (no-op suppression), and equal statuses imply no Events;
// - resolve_pod either fails with a message or gives a pod without valueFrom
//   and files that are strings.
#include <string>
#include <vector>

#include "agent/controllers/env_resolver.h"
#include "agent/controllers/node_builder.h"
#include "agent/controllers/pod_status_patch.h"
#include "agent/kube/api_object.h"
#include "agent/kube/http_client.h"
#include "agent/kube/kube_client.h"
#include "common/daemons/json.h"
#include "common/daemons/shim_protocol.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

namespace api = sk::agent::api;
using sk::Error;

const long kCodes[] = {200, 201, 204, 0,   400, 401, 403, 404, 409,
                       410, 415, 422, 429, 500, 503, 302, 418, 299};

bool has(const std::string &s, const std::string &part) {
    return s.find(part) != std::string::npos;
}

// Written, it is valid strict JSON that reads back to the same text
// (jsoncpp's == tells a uint 40 from an int 40, so compare the text).
void check_round_trip(const Json::Value &v) {
    std::string text = sk::json::write(v);
    auto back = sk::json::parse(text);
    FUZZ_CHECK(back);
    FUZZ_CHECK(sk::json::write(*back) == text);
}

void check_status_body(long code, const std::string &raw, const Json::Value &doc) {
    const std::string what = "GET /api/v1/nodes/n";
    sk::Failure f = sk::agent::classify_http(code, raw, what);
    FUZZ_CHECK(f.message.compare(0, what.size(), what) == 0);
    FUZZ_CHECK(has(f.message, "HTTP " + std::to_string(code)));
    const std::string msg = api::text(api::field(doc, "message"));
    if (doc.isObject() && !msg.empty()) FUZZ_CHECK(has(f.message, msg));
    switch (code) {
        case 404:
            FUZZ_CHECK(f.code == Error::NotFound);
            break;
        case 409:
            FUZZ_CHECK(f.code == (api::text(api::field(doc, "reason")) == "AlreadyExists"
                                      ? Error::AlreadyExists
                                      : Error::Conflict));
            break;
        case 410:
            FUZZ_CHECK(f.code == Error::Gone);
            break;
        case 401:
            FUZZ_CHECK(f.code == Error::Unauthorized);
            break;
        case 403:
            FUZZ_CHECK(f.code == Error::Forbidden);
            break;
        case 0:
        case 429:
        case 500:
        case 503:
            FUZZ_CHECK(f.code == Error::Transient);
            break;
        default:
            FUZZ_CHECK(f.code == Error::Invalid);
    }
    sk::agent::HttpResponse resp{code, raw};
    auto r = sk::agent::decode_response(sk::Result<sk::agent::HttpResponse>(resp), what);
    if (code >= 200 && code < 300) {
        FUZZ_CHECK(static_cast<bool>(r) == (raw.empty() || sk::json::parse(raw)));
        if (!r) FUZZ_CHECK(has(r.message(), what));
    } else {
        FUZZ_CHECK(!r);
        FUZZ_CHECK(r.error() == f.code && r.message() == f.message);
    }
}

void check_node(const Json::Value &node, uint8_t flags) {
    const Json::Value &labels = api::field(api::field(node, "metadata"), "labels");
    std::string cluster = api::text(api::field(labels, "slurm-k8s/cluster"));
    std::string slurm_node = api::text(api::field(labels, "slurm-k8s/slurm-node"));
    if (flags & 1) slurm_node += "x";
    if (sk::agent::node_is_ours(node, cluster, slurm_node)) {
        FUZZ_CHECK(labels.isObject() && labels.isMember("slurm-k8s/job-id"));
        FUZZ_CHECK(!(flags & 1) || api::text(labels["slurm-k8s/slurm-node"]) + "x" == slurm_node);
    }
    sk::k8s::Taint extra{sk::agent::kEndingTaintKey, "", "NoSchedule"};
    if (flags & 2) extra.effect = "NoExecute";
    Json::Value p = sk::agent::build_cordon_patch(node, extra);
    FUZZ_CHECK(p.isObject());
    FUZZ_CHECK(p["spec"]["unschedulable"] == Json::Value(true));
    FUZZ_CHECK(p["spec"]["taints"].isArray());
    int same = 0;
    for (const auto &t : p["spec"]["taints"])
        same += api::text(api::field(t, "key")) == extra.key &&
                api::text(api::field(t, "effect")) == extra.effect;
    FUZZ_CHECK(same >= 1);
    const Json::Value &rv = api::field(api::field(node, "metadata"), "resourceVersion");
    FUZZ_CHECK(p["metadata"]["resourceVersion"] == rv);
    check_round_trip(p);
}

void check_lease(const Json::Value &lease) {
    Json::Value l = sk::agent::renew_lease(lease, "slurm-n1-42", "uid-1", 40, 1767225600123456);
    FUZZ_CHECK(l.isObject());
    FUZZ_CHECK(l["spec"]["holderIdentity"] == "slurm-n1-42");
    FUZZ_CHECK(l["spec"]["renewTime"] == "2026-01-01T00:00:00.123456Z");
    FUZZ_CHECK(l["metadata"]["ownerReferences"][0]["uid"] == "uid-1");
    const Json::Value &md = api::field(lease, "metadata");
    FUZZ_CHECK(l["metadata"]["resourceVersion"] == api::field(md, "resourceVersion"));
    check_round_trip(l);
}

void check_events(const std::vector<sk::agent::EventSpec> &events) {
    for (const auto &e : events) {
        FUZZ_CHECK(e.type == "Normal" || e.type == "Warning");
        FUZZ_CHECK(e.field_path.empty() || e.field_path.compare(0, 5, "spec.") == 0);
    }
}

void check_pod(const Json::Value &pod, const Json::Value &rt, const Json::Value &older,
               uint8_t flags) {
    const std::string ip = "192.0.2.7";
    api::ObjectMeta m = api::object_meta(pod);
    const Json::Value &md = api::field(pod, "metadata");
    if (pod.isObject() && md.isObject() && md["uid"].isString())
        FUZZ_CHECK(m.uid == md["uid"].asString());
    (void)sk::agent::pod_is_terminal(pod);
    (void)sk::agent::pod_is_terminal(rt);
    bool rt_terminal = sk::agent::is_terminal_phase(api::text(api::field(rt, "phase")));

    Json::Value desired = sk::agent::desired_pod_status(rt, pod, ip);
    FUZZ_CHECK(desired.isObject());
    FUZZ_CHECK(desired["hostIP"] == ip && desired["podIP"] == ip);
    FUZZ_CHECK(desired["conditions"].isArray());
    bool scheduled = false;
    for (const auto &c : desired["conditions"])
        scheduled |= api::text(api::field(c, "type")) == "PodScheduled";
    FUZZ_CHECK(scheduled);
    check_round_trip(desired);

    Json::Value patch = sk::agent::pod_status_patch(pod, desired);
    FUZZ_CHECK(patch.isNull() ||
               (patch.isObject() && patch["status"].isObject() && !patch["status"].empty()));
    if (!patch.isNull()) check_round_trip(patch);
    if (pod.isObject()) {  // the API now shows `desired`: nothing to write
        Json::Value after = pod;
        after["status"] = desired;
        FUZZ_CHECK(sk::agent::pod_status_patch(after, desired).isNull());
    }

    bool bo = flags & 4;
    check_events(sk::agent::status_events(pod, older, rt, bo));
    FUZZ_CHECK(sk::agent::status_events(pod, rt, rt, bo).empty());
    auto refused = sk::agent::refused_pod_status(pod, "Refused", "no", ip, 1767225600);
    FUZZ_CHECK(refused["phase"] == "Failed" && refused["reason"] == "Refused");
    if (rt.isObject() || rt.isNull()) {  // the runtime's statuses are objects
        Json::Value end = sk::agent::job_end_status(rt, "", 42);
        // (pod_is_terminal reads a "status" member as a Pod's: not a PodStatus.)
        FUZZ_CHECK(sk::agent::is_terminal_phase(api::text(end["phase"])));
        if (!end.isMember("status")) FUZZ_CHECK(sk::agent::pod_is_terminal(end));
        FUZZ_CHECK(end["reason"] == "JobEnded" && has(end["message"].asString(), "42"));
        if (rt_terminal) FUZZ_CHECK(end["phase"] == api::field(rt, "phase"));
    }
    sk::agent::EventSpec spec{"Warning", "Failed", "Error: x", "spec.containers{c}"};
    Json::Value ev = sk::agent::build_pod_event(pod, spec, "slurm-n1-42", 1767225600000000);
    FUZZ_CHECK(ev["involvedObject"]["kind"] == "Pod" && ev["reason"] == "Failed");
    FUZZ_CHECK(has(ev["metadata"]["name"].asString(), m.name + "."));
    check_round_trip(ev);
}

// Every ConfigMap/Secret the pod references resolves to `obj` (or is absent).
void check_resolve(const Json::Value &pod, const Json::Value &obj, uint8_t flags) {
    sk::agent::FetchedObjects fetched;
    for (const auto &ref : sk::agent::referenced_objects(pod)) {
        FUZZ_CHECK(ref.first == "configmaps" || ref.first == "secrets");
        if (!(flags & 8)) fetched[ref] = obj;
    }
    sk::agent::NodeFacts facts{"slurm-n1-42", "192.0.2.7", 4, 16384};
    auto r = sk::agent::resolve_pod(pod, fetched, facts);
    if (!r) {
        FUZZ_CHECK(!r.message().empty());
        return;
    }
    FUZZ_CHECK(r->pod.isObject() && !r->uid.empty());
    for (const char *list : {"containers", "initContainers"})
        for (const auto &c : api::items(api::field(api::field(r->pod, "spec"), list)))
            for (const auto &e : api::items(api::field(c, "env"))) {
                FUZZ_CHECK(!api::field(e, "valueFrom").isObject());
            }
    // What the agent sends is what the shim takes: the pod_run message
    // decodes to the same run (files, ids, credentials).
    auto back = sk::proto::pod_run_from_json(sk::proto::to_json(*r));
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->uid == r->uid && back->ns == r->ns && back->name == r->name);
    FUZZ_CHECK(back->files == r->files && back->pull_auth == r->pull_auth);
    check_round_trip(r->pod);
}

// A LIST reply as the pod controller walks it.
void check_list(const Json::Value &list) {
    (void)api::object_meta(list);
    for (const auto &item : api::items(api::field(list, "items"))) {
        api::ObjectMeta m = api::object_meta(item);
        (void)m;
    }
}

}  // namespace

SK_FUZZ_TARGET(api_objects) {
    sk::fuzz::Input in(data, size);
    long code = kCodes[in.byte() % (sizeof kCodes / sizeof kCodes[0])];
    uint8_t flags = in.byte();
    std::string_view rest = in.rest();
    std::vector<std::string> raw;
    while (raw.size() < 2) {
        size_t nl = rest.find('\n');
        if (nl == std::string_view::npos) break;
        raw.emplace_back(rest.substr(0, nl));
        rest.remove_prefix(nl + 1);
    }
    raw.emplace_back(rest);
    std::vector<Json::Value> doc;
    for (const auto &r : raw) {
        auto v = sk::json::parse(r);
        doc.push_back(v ? *v : Json::Value());
    }
    while (doc.size() < 3)
        doc.emplace_back();
    const Json::Value &a = doc[0];
    check_status_body(code, raw[0], a);
    check_node(a, flags);
    check_lease(a);
    check_pod(a, doc[1], doc[2], flags);
    check_resolve(a, doc[1], flags);
    check_list(a);
    return 0;
}
