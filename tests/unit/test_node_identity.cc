// agent/controllers/node_identity: the key and certificate signing request a virtual
// node's identity starts from (read back and verified with the openssl CLI,
// as a signer would), and the check of what a signer returns: a certificate
// of the test CA for that node and that key is taken; one for another node,
// another organization or another key is refused.
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/controllers/node_identity.h"
#include "common/k8s_names.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

namespace {

std::string tmpdir() {
    return sk_test_tmpdir("/tmp/sk-nid-XXXXXX");
}

void write(const std::string &path, const std::string &text) {
    std::ofstream(path) << text;
}

std::string slurp(const std::string &path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

int sh(const std::string &cmd) {
    // NOLINTNEXTLINE(cert-env33-c): fixed command lines on the test's own files
    return system(cmd.c_str());
}

// A CA in d (ca.key, ca.crt); signs d/NAME.csr into d/NAME.crt.
void make_ca(const std::string &d) {
    ck_assert_int_eq(sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                        "-nodes -subj /CN=test-ca -days 1 -keyout " +
                        d + "/ca.key -out " + d + "/ca.crt >/dev/null 2>&1"),
                     0);
}
std::string sign(const std::string &d, const std::string &csr_pem, const std::string &name,
                 const std::string &ext = "extendedKeyUsage=clientAuth\n") {
    write(d + "/" + name + ".csr", csr_pem);
    write(d + "/" + name + ".ext",
          "basicConstraints=critical,CA:FALSE\n"
          "keyUsage=critical,digitalSignature\n" +
              ext);
    ck_assert_int_eq(sh("openssl x509 -req -in " + d + "/" + name + ".csr -CA " + d +
                        "/ca.crt -CAkey " + d + "/ca.key -CAcreateserial -days 1 -extfile " + d +
                        "/" + name + ".ext -out " + d + "/" + name + ".crt >/dev/null 2>&1"),
                     0);
    return slurp(d + "/" + name + ".crt");
}

}  // namespace

START_TEST(request_names_the_node_and_is_signed_by_its_key) {
    auto r = make_node_client_request("slurm-n1-42");
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    ck_assert(r->key_pem.find("-----BEGIN PRIVATE KEY-----") == 0);
    // The PEM type the API server's validation takes (not "NEW CERTIFICATE REQUEST").
    ck_assert_msg(r->csr_pem.find("-----BEGIN CERTIFICATE REQUEST-----\n") == 0, "%s",
                  r->csr_pem.c_str());
    std::string d = tmpdir();
    write(d + "/r.csr", r->csr_pem);
    write(d + "/r.key", r->key_pem);
    // The signature verifies, the subject is the node's user in system:nodes,
    // the key is EC P-256 and no extension (no SAN) is asked for.
    ck_assert_int_eq(sh("openssl req -in " + d + "/r.csr -noout -verify >/dev/null 2>&1"), 0);
    ck_assert_int_eq(
        sh("openssl req -in " + d + "/r.csr -noout -subject -nameopt RFC2253 > " + d + "/subj"), 0);
    std::string subj = slurp(d + "/subj");
    ck_assert_msg(subj == "subject=CN=system:node:slurm-n1-42,O=system:nodes\n", "%s",
                  subj.c_str());
    ck_assert_int_eq(sh("openssl req -in " + d + "/r.csr -noout -text > " + d + "/text"), 0);
    std::string text = slurp(d + "/text");
    ck_assert_msg(text.find("prime256v1") != std::string::npos, "%s", text.c_str());
    ck_assert_msg(text.find("Subject Alternative Name") == std::string::npos, "%s", text.c_str());
    // The key is the request's.
    ck_assert_int_eq(sh("openssl pkey -in " + d + "/r.key -pubout > " + d + "/k.pub && " +
                        "openssl req -in " + d + "/r.csr -noout -pubkey > " + d + "/r.pub && " +
                        "cmp -s " + d + "/k.pub " + d + "/r.pub"),
                     0);
    // Two requests, two keys.
    auto again = make_node_client_request("slurm-n1-42");
    ck_assert(again.ok() && again->key_pem != r->key_pem);
}
END_TEST

START_TEST(issued_certificate_checked_against_node_and_key) {
    std::string d = tmpdir();
    make_ca(d);
    auto r = make_node_client_request("slurm-n1-42");
    ck_assert(r.ok());
    int64_t before = time(nullptr);
    std::string cert = sign(d, r->csr_pem, "good");
    auto c = check_node_certificate(cert, r->key_pem, "slurm-n1-42");
    ck_assert_msg(c.ok(), "%s", c.ok() ? "" : c.message().c_str());
    ck_assert_str_eq(c->common_name.c_str(), "system:node:slurm-n1-42");
    ck_assert(c->not_before <= before + 1 && c->not_after >= before + 86400 - 5);
    int64_t r7 = renewal_time(*c, 0.7), r9 = renewal_time(*c, 0.9);
    int64_t span = c->not_after - c->not_before;
    ck_assert(r7 == c->not_before + span * 7 / 10 || r7 == c->not_before + span * 7 / 10 - 1);
    ck_assert(r9 > r7 && r9 < c->not_after);
    ck_assert(renewal_time(*c, 0.1) == r7 && renewal_time(*c, 1.0) == r9);  // kept in 70-90 %
    // A new certificate counts from its arrival (not_before may be backdated).
    int64_t mid = c->not_before + span / 2;
    ck_assert(renewal_time(*c, 0.8, mid) == mid + static_cast<int64_t>((c->not_after - mid) * 0.8));
    ck_assert(renewal_time(*c, 0.8, c->not_before - 100) == renewal_time(*c, 0.8));

    // For another node: refused, naming both.
    auto other = check_node_certificate(cert, r->key_pem, "slurm-n2-42");
    ck_assert(!other.ok());
    ck_assert_msg(other.message() ==
                      "the certificate is for CN=system:node:slurm-n1-42, "
                      "O=system:nodes, not for system:node:slurm-n2-42 in "
                      "system:nodes",
                  "%s", other.message().c_str());
    // Of another key (the signer answered another request): refused.
    auto r2 = make_node_client_request("slurm-n1-42");
    ck_assert(r2.ok());
    auto wrong_key = check_node_certificate(cert, r2->key_pem, "slurm-n1-42");
    ck_assert(!wrong_key.ok());
    ck_assert_str_eq(wrong_key.message().c_str(), "the certificate is not for this node's key");
    // Another organization: refused.
    write(d + "/k2.key", r2->key_pem);
    ck_assert_int_eq(sh("openssl req -new -key " + d +
                        "/k2.key -subj "
                        "'/O=system:masters/CN=system:node:slurm-n1-42' -out " +
                        d + "/org.csr"),
                     0);
    std::string org = sign(d, slurp(d + "/org.csr"), "org");
    auto bad_org = check_node_certificate(org, r2->key_pem, "slurm-n1-42");
    ck_assert(!bad_org.ok());
    ck_assert_msg(bad_org.message().find("O=system:masters") != std::string::npos, "%s",
                  bad_org.message().c_str());
    // Not a certificate at all.
    auto junk = check_node_certificate("junk", r->key_pem, "slurm-n1-42");
    ck_assert(!junk.ok() && junk.error() == Error::InvalidArgument);
}
END_TEST

// A kubelet-serving request: the node's subject and the names asked for
// (what the signer copies into the certificate); the check of a kept or
// issued certificate against the names the node is dialled at.
START_TEST(serving_request_names_and_covers) {
    SubjectAltNames sans;
    sans.dns = {"gpu1.example.org"};
    sans.ips = {"10.1.2.3", "fd00::5"};
    auto r = make_node_serving_request("n1", sans);
    ck_assert_msg(r.ok(), "%s", r.ok() ? "" : r.message().c_str());
    std::string d = tmpdir();
    write(d + "/s.csr", r->csr_pem);
    ck_assert_int_eq(sh("openssl req -in " + d + "/s.csr -noout -verify >/dev/null 2>&1"), 0);
    ck_assert_int_eq(sh("openssl req -in " + d + "/s.csr -noout -text > " + d + "/text"), 0);
    std::string text = slurp(d + "/text");
    ck_assert_msg(text.find("O = system:nodes, CN = system:node:n1") != std::string::npos, "%s",
                  text.c_str());
    ck_assert_msg(text.find("DNS:gpu1.example.org, IP Address:10.1.2.3, "
                            "IP Address:FD00:0:0:0:0:0:0:5") != std::string::npos,
                  "%s", text.c_str());
    // No name, or an address that is none: refused before anything is sent.
    auto none = make_node_serving_request("n1", SubjectAltNames{});
    ck_assert(!none.ok() && none.message().find("needs a DNS name or an IP") != std::string::npos);
    SubjectAltNames bad;
    bad.ips = {"10.1.2"};
    auto not_ip = make_node_serving_request("n1", bad);
    ck_assert(!not_ip.ok() && not_ip.message() == "'10.1.2' is not an IP address");

    make_ca(d);
    std::string cert = sign(d, r->csr_pem, "serving",
                            "extendedKeyUsage=serverAuth\n"
                            "subjectAltName=DNS:gpu1.example.org,IP:10.1.2.3,IP:fd00::5\n");
    auto c = check_node_certificate(cert, r->key_pem, "n1", &sans);
    ck_assert_msg(c.ok(), "%s", c.ok() ? "" : c.message().c_str());
    SubjectAltNames moved;
    moved.ips = {"10.1.2.4"};
    auto other_ip = check_node_certificate(cert, r->key_pem, "n1", &moved);
    ck_assert(!other_ip.ok());
    ck_assert_str_eq(other_ip.message().c_str(), "the certificate is not valid for 10.1.2.4");
    SubjectAltNames renamed;
    renamed.dns = {"gpu2.example.org"};
    auto other_name = check_node_certificate(cert, r->key_pem, "n1", &renamed);
    ck_assert(!other_name.ok());
    ck_assert_str_eq(other_name.message().c_str(),
                     "the certificate is not valid for gpu2.example.org");
}
END_TEST

// NodeRestriction's label rules as kube-apiserver 1.28 applies them to a
// node identity creating its Node (the reference facts' table).
START_TEST(labels_a_node_may_set) {
    for (const char *ok :
         {"kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
          "beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
          "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone",
          "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
          "failure-domain.beta.kubernetes.io/region", "kubelet.kubernetes.io/any",
          "node.kubernetes.io/any", "example.com/bar", "team", "slurm-k8s/job-id",
          "x.node.kubernetes.io/y"})
        ck_assert_msg(k8s::node_may_set_label(ok), "%s refused", ok);
    for (const char *no : {"node-restriction.kubernetes.io/foo", "node-role.kubernetes.io/worker",
                           "kubernetes.io/foo", "k8s.io/foo", "foo.kubernetes.io/x", "foo.k8s.io/z",
                           "kubernetes.io/role"})
        ck_assert_msg(!k8s::node_may_set_label(no), "%s allowed", no);
}
END_TEST

int main() {
    Suite *s = suite_create("node_identity");
    TCase *tc = tcase_create("node_identity");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, request_names_the_node_and_is_signed_by_its_key);
    tcase_add_test(tc, issued_certificate_checked_against_node_and_key);
    tcase_add_test(tc, serving_request_names_and_covers);
    tcase_add_test(tc, labels_a_node_may_set);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
