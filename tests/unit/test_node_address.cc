// agent/core/node_address: which Hostname address a virtual node may advertise
// (one that resolves to its InternalIP and that its serving certificate
// names) and the primary address it defaults to.
#include <arpa/inet.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "agent/core/node_address.h"
#include "tests/unit/check_json.h"

using namespace sk;
using namespace sk::agent;

namespace {

// A self-signed certificate in a new directory, valid for the DNS names of
// `san` ("DNS:a,DNS:b"); returns its path.
std::string cert_for(const std::string &san) {
    std::string d = sk_test_tmpdir("/tmp/sk-naddr-XXXXXX");
    std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-subj /CN=slurm-k8s-test -days 1 -addext subjectAltName=" +
        san + " -keyout " + d + "/key.pem -out " + d + "/cert.pem >/dev/null 2>&1";
    // NOLINTNEXTLINE(cert-env33-c): a fixed command line on the test's own files
    ck_assert_int_eq(system(cmd.c_str()), 0);
    return d + "/cert.pem";
}

}  // namespace

START_TEST(primary_address_is_an_ipv4_literal) {
    std::string a = primary_ipv4();
    unsigned char raw[4];
    ck_assert_msg(inet_pton(AF_INET, a.c_str(), raw) == 1, "%s", a.c_str());
    ck_assert(!host_name().empty());
}
END_TEST

START_TEST(hostname_must_resolve_to_the_node_address) {
    // localhost is in every /etc/hosts as 127.0.0.1.
    ck_assert(hostname_usable("localhost", "127.0.0.1", "").ok());
    auto other = hostname_usable("localhost", "192.0.2.7", "");
    ck_assert(!other.ok());
    ck_assert_msg(other.message().find("resolves to 127.0.0.1") != std::string::npos &&
                      other.message().find("not to node_address 192.0.2.7") != std::string::npos,
                  "%s", other.message().c_str());
    auto none = hostname_usable("slurm-n1-42.invalid", "127.0.0.1", "");
    ck_assert(!none.ok());
    ck_assert_msg(none.message().find("'slurm-n1-42.invalid' does not resolve") == 0, "%s",
                  none.message().c_str());
    ck_assert(!hostname_usable("", "127.0.0.1", "").ok());
    auto bad = hostname_usable("localhost", "not-an-ip", "");
    ck_assert_msg(bad.message().find("is not an IP address") != std::string::npos, "%s",
                  bad.message().c_str());
}
END_TEST

START_TEST(hostname_must_be_in_the_serving_certificate) {
    ck_assert(
        hostname_usable("localhost", "127.0.0.1", cert_for("DNS:localhost,IP:127.0.0.1")).ok());
    std::string ip_only = cert_for("IP:127.0.0.1");
    auto st = hostname_usable("localhost", "127.0.0.1", ip_only);
    ck_assert(!st.ok());
    ck_assert_msg(
        st.message() == "the serving certificate " + ip_only + " is not valid for 'localhost'",
        "%s", st.message().c_str());
    auto missing = hostname_usable("localhost", "127.0.0.1", "/nonexistent/cert.pem");
    ck_assert(!missing.ok());
    ck_assert_msg(missing.message().find("serving certificate: ") == 0, "%s",
                  missing.message().c_str());
}
END_TEST

int main() {
    Suite *s = suite_create("node_address");
    TCase *tc = tcase_create("node_address");
    tcase_add_test(tc, primary_address_is_an_ipv4_literal);
    tcase_add_test(tc, hostname_must_resolve_to_the_node_address);
    tcase_add_test(tc, hostname_must_be_in_the_serving_certificate);
    suite_add_tcase(s, tc);
    return sk_run_suite(s);
}
