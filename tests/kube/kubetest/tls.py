"""Certificates of the state dir (one CA; the server's, the kubelet client's and a kubelet
serving certificate), made with openssl once and reused; the signing of CSRs with that CA (what
kube-controller-manager's --cluster-signing-cert-file/-key-file signers do)."""

import os
import shutil
import ssl
import subprocess
import tempfile
import time


def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (" ".join(args), r.stderr.decode()))


def make_certs(d, extra_ips=()):
    """extra_ips: more IP subjectAltNames of the server's and the kubelet serving certificate (a
    server and nodes on addresses other than loopback: tests/slurm/hosts.sh)."""
    def p(n):
        return os.path.join(d, n)
    if not (os.path.exists(p("ca.crt")) and os.path.exists(p("ca.key"))):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", "3650", "-subj", "/CN=kube-test-double-ca",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def leaf(name, subj, ext):
        if os.path.exists(p(name + ".crt")) and os.path.exists(p(name + ".key")):
            return
        with open(p(name + ".ext"), "w") as f:
            f.write(ext)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", p(name + ".key"), "-out", p(name + ".csr"), "-subj", subj)
        openssl("x509", "-req", "-in", p(name + ".csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-out", p(name + ".crt"), "-days", "3650", "-extfile", p(name + ".ext"))
        os.unlink(p(name + ".csr"))
        os.unlink(p(name + ".ext"))
    san = "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost" + "".join(",IP:" + ip for ip in extra_ips)
    leaf("server", "/CN=kube-apiserver", "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
         "extendedKeyUsage=serverAuth\n" + san + "\n")
    leaf("kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client",
         "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n")
    # Also 127.0.1.1-127.0.1.16: a virtual node may have a loopback address of its own as its
    # InternalIP (the e2e harness gives Slurm node nN 127.0.1.N), and the API server verifies
    # the kubelet's certificate against the address it dials.
    leaf("kubelet-serving", "/O=system:nodes/CN=system:node:localhost",
         "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n" + san +
         "".join(",IP:127.0.1.%d" % i for i in range(1, 17)) + "\n")


def server_context(d):
    """The API server's TLS context: its certificate, client certificates optional (verified
    against the CA of the state dir d: they authenticate as CN, groups O)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.crt"), os.path.join(d, "server.key"))
    ctx.load_verify_locations(os.path.join(d, "ca.crt"))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    # kube-apiserver requests a client certificate without verifying it in the handshake; its x509
    # authenticator then refuses an expired one with 401. OpenSSL would abort the handshake instead,
    # so the time check is left to the handler (X509_V_FLAG_NO_CHECK_TIME).
    ctx.verify_flags |= 0x200000
    return ctx


# CertificateSigningRequest usages -> openssl extension words (authority.keyUsagesFromStrings).
KEY_USAGES = {"signing": "digitalSignature", "digital signature": "digitalSignature",
              "content commitment": "nonRepudiation", "key encipherment": "keyEncipherment",
              "key agreement": "keyAgreement", "data encipherment": "dataEncipherment", "cert sign": "keyCertSign",
              "crl sign": "cRLSign", "encipher only": "encipherOnly", "decipher only": "decipherOnly"}
EXT_KEY_USAGES = {"any": "anyExtendedKeyUsage", "server auth": "serverAuth", "client auth": "clientAuth",
                  "code signing": "codeSigning", "email protection": "emailProtection", "s/mime": "emailProtection",
                  "ipsec end system": "1.3.6.1.5.5.7.3.5", "ipsec tunnel": "1.3.6.1.5.5.7.3.6",
                  "ipsec user": "1.3.6.1.5.5.7.3.7", "timestamping": "timeStamping", "ocsp signing": "OCSPSigning",
                  "microsoft sgc": "msSGC", "netscape sgc": "nsSGC"}


def _asn1_time(epoch):
    return time.strftime("%Y%m%d%H%M%SZ", time.gmtime(epoch))


def sign_csr(d, csr_pem, usages, not_before, not_after, sans=None):
    """A leaf certificate (PEM bytes) for the PEM CSR, signed by the CA of the state dir d, as
    kube-controller-manager's signer makes it (authority.PermissiveSigningPolicy): the requested
    subject, basicConstraints critical CA:FALSE, the authority key identifier, keyUsage critical =
    exactly the requested key usages, the extended key usages requested, the SANs given (DNS:x,
    IP:y, ...), no subject key identifier; validity not_before..not_after (epoch seconds)."""
    ku = sorted(set(KEY_USAGES[u] for u in usages if u in KEY_USAGES))
    eku = []
    for u in usages:
        if u in EXT_KEY_USAGES and EXT_KEY_USAGES[u] not in eku:
            eku.append(EXT_KEY_USAGES[u])
    ext = ["basicConstraints = critical,CA:FALSE", "authorityKeyIdentifier = keyid", "subjectKeyIdentifier = none"]
    if ku:
        ext.append("keyUsage = critical," + ",".join(ku))
    if eku:
        ext.append("extendedKeyUsage = " + ",".join(eku))
    if sans:
        ext.append("subjectAltName = " + ",".join(sans))
    tmp = tempfile.mkdtemp(prefix="kubetest-sign-")
    try:
        def p(n):
            return os.path.join(tmp, n)
        with open(p("index.txt"), "w"):
            pass
        with open(p("serial"), "w") as f:
            f.write("01\n")
        with open(p("ca.cnf"), "w") as f:
            f.write("[ca]\ndefault_ca = signer\n[signer]\ndatabase = %s\nnew_certs_dir = %s\nserial = %s\n"
                    "default_md = sha256\npolicy = any\nunique_subject = no\nemail_in_dn = yes\n"
                    "[any]\ncommonName = optional\norganizationName = optional\n" % (p("index.txt"), tmp, p("serial")))
        with open(p("ext.cnf"), "w") as f:
            f.write("\n".join(ext) + "\n")
        with open(p("req.csr"), "wb") as f:
            f.write(csr_pem)
        openssl("ca", "-config", p("ca.cnf"), "-batch", "-notext", "-preserveDN", "-rand_serial",
                "-cert", os.path.join(d, "ca.crt"), "-keyfile", os.path.join(d, "ca.key"), "-in", p("req.csr"),
                "-out", p("out.crt"), "-startdate", _asn1_time(not_before), "-enddate", _asn1_time(not_after),
                "-extfile", p("ext.cnf"))
        with open(p("out.crt"), "rb") as f:
            return f.read()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def kubelet_client_contexts(d, kubelet_ca=None):
    """(verifying, insecure) TLS contexts towards kubelet endpoints with the kubelet client
    certificate; the verifying one trusts kubelet_ca (default: the CA of the state dir d)."""
    cert, key = os.path.join(d, "kubelet-client.crt"), os.path.join(d, "kubelet-client.key")
    kctx = ssl.create_default_context(cafile=kubelet_ca or os.path.join(d, "ca.crt"))
    kctx.load_cert_chain(cert, key)
    ictx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ictx.check_hostname = False
    ictx.verify_mode = ssl.CERT_NONE
    ictx.load_cert_chain(cert, key)
    for c in (kctx, ictx):
        c.set_alpn_protocols(["http/1.1"])     # what kube-apiserver offers a kubelet
    return kctx, ictx
