"""kube-controller-manager's certificate controllers for CertificateSigningRequests:

* csrapproving (pkg/controller/certificates/approver/sarapprove.go): a pending CSR for the signer
  kubernetes.io/kube-apiserver-client-kubelet that is a well-formed kubelet client request
  (ValidateKubeletClientCSR) is approved, reason AutoApproved, when a SubjectAccessReview for its
  requester (spec.username, spec.groups) allows `create certificatesigningrequests/selfnodeclient`
  (the requester is the CN: a node renewing its own certificate) or `create
  certificatesigningrequests/nodeclient`. Otherwise it stays pending without a condition and is
  looked at again every RETRY_SECONDS (the real controller retries with a back-off), so a binding
  made later approves it.
* csrsigning (pkg/controller/certificates/signer): an Approved, not Failed, not yet issued CSR of
  the signers kube-apiserver-client-kubelet, kubelet-serving or kube-apiserver-client is checked
  (a failure adds Failed, reason SignerValidationFailure, with the check's message) and signed with
  the state dir's CA: the leaf certificate alone in status.certificate, valid from 5 minutes
  before until now + min(expirationSeconds (at least 10 minutes), the signing duration); a duration
  of 8 hours or more ends 5 minutes earlier (the backdate), as PermissiveSigningPolicy does. No
  Issued condition is added. The signing duration is --cluster-signing-duration (kube-controller-
  manager's flag, default one year), changeable at run time in /_test/controllers
  (clusterSigningDuration)."""

import base64
import os
import re
import ssl
import subprocess
import threading
import time

from . import csr as csrapi
from .tls import sign_csr
from .util import log


RETRY_SECONDS = 1.0
BACKDATE = 300                       # authority.PermissiveSigningPolicy Backdate: 5 minutes
SHORT = 8 * 3600                     # ... Short: 8 hours
MIN_REQUESTED = 600                  # signer.duration: 10 minutes
DEFAULT_SIGNING_DURATION = 365 * 24 * 3600

SELF_MESSAGE = "Auto approving self kubelet client certificate after SubjectAccessReview."
NODE_MESSAGE = "Auto approving kubelet client certificate after SubjectAccessReview."


def parse_duration(v):
    """Seconds of a duration given as a number of seconds or as Go writes one (8760h, 30s, 1h30m)."""
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v).strip()
    try:
        return float(s)
    except ValueError:
        pass
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", s)
    if not parts or "".join(a + b for a, b in parts) != s:
        raise ValueError("invalid duration %r" % v)
    mult = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(a) * mult[b] for a, b in parts)


def signer_duration(ttl, expiration_seconds):
    """signer.duration: the requested duration, at least 10 minutes, at most the signing duration."""
    if expiration_seconds is None:
        return ttl
    req = float(expiration_seconds)
    if req > ttl:
        return ttl
    if req < MIN_REQUESTED:
        return MIN_REQUESTED
    return req


def validity(now, ttl, ca_not_after=None):
    """(notBefore, notAfter) of PermissiveSigningPolicy for a certificate issued at now."""
    nb = now - BACKDATE
    na = now + ttl if ttl < SHORT else now + ttl - BACKDATE
    if ca_not_after is not None and na > ca_not_after:
        na = ca_not_after
    return nb, na


class CertificateControllers(threading.Thread):
    """csrapproving and csrsigning (one thread; woken by every CSR change and every RETRY_SECONDS)."""

    def __init__(self, api, opts, state_dir):
        threading.Thread.__init__(self, daemon=True, name="csr-controllers")
        self.api, self.opts, self.d = api, opts, state_dir
        self.approving = not getattr(opts, "no_csr_approving", False)
        self.signing = not getattr(opts, "no_csr_signing", False)
        self.failed_sign = {}        # uid -> monotonic time of a signing error (retried after RETRY_SECONDS)
        # kube-controller-manager's client rate limit (--kube-api-qps, --kube-api-burst): its
        # approver sends a SubjectAccessReview and an approval per CSR, its signer a status
        # update, each taking a token; 0 = unlimited
        self.qps = float(getattr(opts, "csr_controller_qps", 0) or 0)
        self.burst = max(1, int(getattr(opts, "csr_controller_burst", 1) or 1))
        self.tokens, self.refilled = float(self.burst), time.monotonic()
        self.ca_not_after = None     # a certificate ends with its signer's at the latest
        r = subprocess.run(["openssl", "x509", "-noout", "-enddate", "-in", os.path.join(state_dir, "ca.crt")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = r.stdout.decode().strip()
        if r.returncode == 0 and out.startswith("notAfter="):
            self.ca_not_after = ssl.cert_time_to_seconds(out.split("=", 1)[1])

    def take(self):
        """Waits for one request token of the controllers' client (the rate limit above)."""
        if self.qps <= 0:
            return
        while True:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.refilled) * self.qps)
            self.refilled = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            time.sleep((1 - self.tokens) / self.qps)

    def ttl(self):
        return float(getattr(self.opts, "cluster_signing_duration", DEFAULT_SIGNING_DURATION))

    def run(self):
        while True:
            self.api.wake_csr.wait(timeout=RETRY_SECONDS)
            self.api.wake_csr.clear()
            try:
                self.pass_once()
            except Exception as e:
                log("csr controllers: %r" % e)

    def pass_once(self):
        for o in self.api.store.items("certificatesigningrequests"):
            if self.approving and csrapi.is_pending(o):
                self.approve(o)
            elif self.signing and csrapi.is_approved(o) and not csrapi.has_condition(o, csrapi.FAILED) and \
                    not (o.get("status") or {}).get("certificate"):
                self.sign(o)

    # -- csrapproving
    def approve(self, o):
        spec = o.get("spec") or {}
        if spec.get("signerName") != csrapi.KUBELET_CLIENT_SIGNER:
            return
        try:
            req = csrapi.parse_csr(csrapi.request_pem(o))
        except csrapi.CSRError:
            return
        if csrapi.validate_kubelet_client(req, spec.get("usages")) is not None:
            return
        user, groups = spec.get("username", ""), spec.get("groups") or []
        msg = None
        for sub, text, applies in (("selfnodeclient", SELF_MESSAGE, user == req["cn"]), ("nodeclient", NODE_MESSAGE, True)):
            if not applies:
                continue
            self.take()
            ra = {"group": "certificates.k8s.io", "resource": "certificatesigningrequests", "verb": "create",
                  "subresource": sub}
            if self.api.auth.review(user, groups, ra).get("allowed"):
                msg = text
                break
        if msg is None:
            return
        uid = o["metadata"]["uid"]
        self.take()

        def fn(c):
            if c["metadata"]["uid"] != uid or not csrapi.is_pending(c):
                return False
            c.setdefault("status", {}).setdefault("conditions", []).append(
                csrapi.new_condition(csrapi.APPROVED, "AutoApproved", msg))
            return True
        self.api.mutate("certificatesigningrequests", ("", o["metadata"]["name"]), fn)

    # -- csrsigning
    def sign(self, o):
        spec = o.get("spec") or {}
        signer = spec.get("signerName")
        check = csrapi.SIGNER_CHECKS.get(signer)
        if check is None:
            return
        uid = o["metadata"]["uid"]
        t = self.failed_sign.get(uid)
        if t is not None and time.monotonic() - t < RETRY_SECONDS:
            return
        pem = csrapi.request_pem(o)
        try:
            req = csrapi.parse_csr(pem)
        except csrapi.CSRError:
            return
        err = check(req, spec.get("usages"))
        key = ("", o["metadata"]["name"])
        if err is not None:
            def failed(c):
                if c["metadata"]["uid"] != uid or csrapi.has_condition(c, csrapi.FAILED):
                    return False
                c.setdefault("status", {}).setdefault("conditions", []).append(
                    csrapi.new_condition(csrapi.FAILED, "SignerValidationFailure", err))
                return True
            self.api.mutate("certificatesigningrequests", key, failed)
            return
        now = time.time()
        nb, na = validity(now, signer_duration(self.ttl(), spec.get("expirationSeconds")), self.ca_not_after)
        sans = ["DNS:" + n for n in req["dns"]] + ["IP:" + ip for ip in req["ips"]] + \
            ["email:" + e for e in req["emails"]] + ["URI:" + u for u in req["uris"]]
        try:
            cert = sign_csr(self.d, pem, spec.get("usages") or [], nb, na, sans)
        except Exception as e:
            self.failed_sign[uid] = time.monotonic()
            log("csrsigning: %s: %s" % (o["metadata"]["name"], e))
            return
        self.failed_sign.pop(uid, None)
        b64 = base64.b64encode(cert).decode()
        self.take()

        def issued(c):
            if c["metadata"]["uid"] != uid or (c.get("status") or {}).get("certificate") or not csrapi.is_approved(c):
                return False
            c.setdefault("status", {})["certificate"] = b64
            return True
        self.api.mutate("certificatesigningrequests", key, issued)
