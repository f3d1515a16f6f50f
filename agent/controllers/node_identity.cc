#include "agent/controllers/node_identity.h"

#include <arpa/inet.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace sk::agent {

namespace {

// Owners of the GnuTLS handles: deinit on every path.
struct Privkey {
    gnutls_x509_privkey_t k = nullptr;
    ~Privkey() {
        if (k) gnutls_x509_privkey_deinit(k);
    }
};
struct Crq {
    gnutls_x509_crq_t q = nullptr;
    ~Crq() {
        if (q) gnutls_x509_crq_deinit(q);
    }
};
struct Crt {
    gnutls_x509_crt_t c = nullptr;
    ~Crt() {
        if (c) gnutls_x509_crt_deinit(c);
    }
};
struct Datum {
    gnutls_datum_t d{nullptr, 0};
    ~Datum() { gnutls_free(d.data); }
    std::string str() const { return std::string(reinterpret_cast<const char *>(d.data), d.size); }
};

Failure tls_fail(const char *what, int rc) {
    return fail(Error::Internal, std::string(what) + ": " + gnutls_strerror(rc));
}

gnutls_datum_t datum_of(const std::string &s) {
    return gnutls_datum_t{reinterpret_cast<unsigned char *>(const_cast<char *>(s.data())),
                          static_cast<unsigned>(s.size())};
}

// The key id (SHA-256 of the public key) of a certificate or a key.
Result<std::string> key_id_of_key(const std::string &key_pem) {
    Privkey key;
    if (int rc = gnutls_x509_privkey_init(&key.k); rc < 0) return tls_fail("key init", rc);
    gnutls_datum_t d = datum_of(key_pem);
    if (int rc = gnutls_x509_privkey_import(key.k, &d, GNUTLS_X509_FMT_PEM); rc < 0)
        return fail(Error::InvalidArgument,
                    std::string("not a PEM private key: ") + gnutls_strerror(rc));
    unsigned char id[64];
    size_t n = sizeof id;
    if (int rc = gnutls_x509_privkey_get_key_id(key.k, GNUTLS_KEYID_USE_SHA256, id, &n); rc < 0)
        return tls_fail("key id", rc);
    return std::string(reinterpret_cast<char *>(id), n);
}

}  // namespace

std::string node_user(const std::string &node_name) {
    return "system:node:" + node_name;
}

namespace {

// A textual v4 or v6 address in network byte order; false when it is neither.
bool parse_ip(const std::string &text, std::string *bytes) {
    unsigned char buf[16];
    if (inet_pton(AF_INET, text.c_str(), buf) == 1) {
        bytes->assign(reinterpret_cast<char *>(buf), 4);
        return true;
    }
    if (inet_pton(AF_INET6, text.c_str(), buf) == 1) {
        bytes->assign(reinterpret_cast<char *>(buf), 16);
        return true;
    }
    return false;
}

Result<NodeKeyRequest> make_node_request(const std::string &node_name,
                                         const SubjectAltNames &sans) {
    Privkey key;
    if (int rc = gnutls_x509_privkey_init(&key.k); rc < 0) return tls_fail("key init", rc);
    if (int rc = gnutls_x509_privkey_generate(key.k, GNUTLS_PK_EC,
                                              GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
        rc < 0)
        return tls_fail("EC P-256 key generation", rc);
    Crq req;
    if (int rc = gnutls_x509_crq_init(&req.q); rc < 0) return tls_fail("request init", rc);
    const std::string cn = node_user(node_name);
    if (int rc = gnutls_x509_crq_set_dn_by_oid(req.q, GNUTLS_OID_X520_ORGANIZATION_NAME, 0,
                                               kNodesGroup, strlen(kNodesGroup));
        rc < 0)
        return tls_fail("request organization", rc);
    if (int rc = gnutls_x509_crq_set_dn_by_oid(req.q, GNUTLS_OID_X520_COMMON_NAME, 0, cn.data(),
                                               static_cast<unsigned>(cn.size()));
        rc < 0)
        return tls_fail("request common name", rc);
    if (int rc = gnutls_x509_crq_set_version(req.q, 1); rc < 0)
        return tls_fail("request version", rc);
    for (const auto &name : sans.dns)
        if (int rc = gnutls_x509_crq_set_subject_alt_name(req.q, GNUTLS_SAN_DNSNAME, name.data(),
                                                          static_cast<unsigned>(name.size()),
                                                          GNUTLS_FSAN_APPEND);
            rc < 0)
            return tls_fail("request DNS name", rc);
    for (const auto &ip : sans.ips) {
        std::string bytes;
        if (!parse_ip(ip, &bytes))
            return fail(Error::InvalidArgument, "'" + ip + "' is not an IP address");
        if (int rc = gnutls_x509_crq_set_subject_alt_name(req.q, GNUTLS_SAN_IPADDRESS, bytes.data(),
                                                          static_cast<unsigned>(bytes.size()),
                                                          GNUTLS_FSAN_APPEND);
            rc < 0)
            return tls_fail("request IP address", rc);
    }
    if (int rc = gnutls_x509_crq_set_key(req.q, key.k); rc < 0) return tls_fail("request key", rc);
    if (int rc = gnutls_x509_crq_sign2(req.q, key.k, GNUTLS_DIG_SHA256, 0); rc < 0)
        return tls_fail("request signature", rc);
    NodeKeyRequest out;
    Datum kd;
    if (int rc = gnutls_x509_privkey_export2_pkcs8(key.k, GNUTLS_X509_FMT_PEM, nullptr,
                                                   GNUTLS_PKCS_PLAIN, &kd.d);
        rc < 0)
        return tls_fail("key export", rc);
    out.key_pem = kd.str();
    // PEM type "CERTIFICATE REQUEST": GnuTLS's own PEM says "NEW CERTIFICATE
    // REQUEST", which the API server's validation refuses.
    Datum der;
    if (int rc = gnutls_x509_crq_export2(req.q, GNUTLS_X509_FMT_DER, &der.d); rc < 0)
        return tls_fail("request export", rc);
    Datum qd;
    if (int rc = gnutls_pem_base64_encode2("CERTIFICATE REQUEST", &der.d, &qd.d); rc < 0)
        return tls_fail("request PEM", rc);
    out.csr_pem = qd.str();
    return out;
}

}  // namespace

Result<NodeKeyRequest> make_node_client_request(const std::string &node_name) {
    return make_node_request(node_name, SubjectAltNames{});
}

Result<NodeKeyRequest> make_node_serving_request(const std::string &node_name,
                                                 const SubjectAltNames &sans) {
    if (sans.empty())
        return fail(Error::InvalidArgument,
                    "a serving certificate needs a DNS name or an IP address to be valid for");
    return make_node_request(node_name, sans);
}

Result<IssuedCertificate> check_node_certificate(const std::string &cert_pem,
                                                 const std::string &key_pem,
                                                 const std::string &node_name,
                                                 const SubjectAltNames *covers) {
    Crt crt;
    if (int rc = gnutls_x509_crt_init(&crt.c); rc < 0) return tls_fail("certificate init", rc);
    gnutls_datum_t d = datum_of(cert_pem);
    if (int rc = gnutls_x509_crt_import(crt.c, &d, GNUTLS_X509_FMT_PEM); rc < 0)
        return fail(Error::InvalidArgument,
                    std::string("not a PEM certificate: ") + gnutls_strerror(rc));
    IssuedCertificate c;
    char buf[512];
    size_t n = sizeof buf;
    if (gnutls_x509_crt_get_dn_by_oid(crt.c, GNUTLS_OID_X520_COMMON_NAME, 0, 0, buf, &n) == 0)
        c.common_name.assign(buf, n);
    n = sizeof buf;
    std::string org;
    if (gnutls_x509_crt_get_dn_by_oid(crt.c, GNUTLS_OID_X520_ORGANIZATION_NAME, 0, 0, buf, &n) == 0)
        org.assign(buf, n);
    if (c.common_name != node_user(node_name) || org != kNodesGroup)
        return fail(Error::InvalidArgument, "the certificate is for CN=" + c.common_name +
                                                ", O=" + org + ", not for " + node_user(node_name) +
                                                " in " + kNodesGroup);
    c.not_before = gnutls_x509_crt_get_activation_time(crt.c);
    c.not_after = gnutls_x509_crt_get_expiration_time(crt.c);
    if (c.not_before < 0 || c.not_after <= c.not_before)
        return fail(Error::InvalidArgument, "the certificate has no usable validity period");
    unsigned char id[64];
    n = sizeof id;
    if (int rc = gnutls_x509_crt_get_key_id(crt.c, GNUTLS_KEYID_USE_SHA256, id, &n); rc < 0)
        return tls_fail("certificate key id", rc);
    auto kid = key_id_of_key(key_pem);
    if (!kid) return kid.failure();
    if (*kid != std::string(reinterpret_cast<char *>(id), n))
        return fail(Error::InvalidArgument, "the certificate is not for this node's key");
    if (covers) {
        for (const auto &name : covers->dns)
            if (!gnutls_x509_crt_check_hostname2(crt.c, name.c_str(), 0))
                return fail(Error::InvalidArgument, "the certificate is not valid for " + name);
        for (const auto &ip : covers->ips) {
            std::string bytes;
            if (!parse_ip(ip, &bytes) ||
                !gnutls_x509_crt_check_ip(crt.c,
                                          reinterpret_cast<const unsigned char *>(bytes.data()),
                                          static_cast<unsigned>(bytes.size()), 0))
                return fail(Error::InvalidArgument, "the certificate is not valid for " + ip);
        }
    }
    return c;
}

int64_t renewal_time(const IssuedCertificate &c, double fraction, int64_t from) {
    if (fraction < 0.7) fraction = 0.7;
    if (fraction > 0.9) fraction = 0.9;
    int64_t start = std::max(c.not_before, std::min(from, c.not_after));
    return start + static_cast<int64_t>(static_cast<double>(c.not_after - start) * fraction);
}

}  // namespace sk::agent
