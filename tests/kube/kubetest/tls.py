"""Certificates of the state dir (one CA; the server's, the kubelet client's and a kubelet
serving certificate), made with openssl once and reused."""

import os
import ssl
import subprocess


def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (" ".join(args), r.stderr.decode()))


def make_certs(d):
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
    san = "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost"
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
    return ctx


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
