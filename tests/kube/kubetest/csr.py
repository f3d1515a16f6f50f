"""The certificates.k8s.io/v1 CertificateSigningRequest API as kube-apiserver 1.28 serves it: the
decoding of spec.request (base64 of a PEM CERTIFICATE REQUEST) and a small DER reader for the
fields the API and the controllers look at (subject CN and O, subjectAltNames), the create strategy
(spec.username/uid/groups/extra from the requester, status reset), the update strategies of the
main resource, /status and /approval (what each may change, condition timestamps), the validation
with kube-apiserver's field errors (422), and the checks of the kubelet signers
(pkg/apis/certificates ValidateKubeletClientCSR / ValidateKubeletServingCSR) that the approver and
the signer controllers (kubetest/certificates.py) apply."""

import base64
import binascii
import copy
import ipaddress
import json
import re
import subprocess

from .errors import ApiError, bad_request
from .util import ts


KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving"
APISERVER_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
LEGACY_UNKNOWN_SIGNER = "kubernetes.io/legacy-unknown"

APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"

# pkg/apis/certificates/validation allValidUsages, sorted as sets.String.List() sorts them.
VALID_USAGES = sorted([
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth",
    "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel",
    "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"])

KUBELET_CLIENT_USAGES = ({"digital signature", "key encipherment", "client auth"}, {"digital signature", "client auth"})
KUBELET_SERVING_USAGES = ({"digital signature", "key encipherment", "server auth"}, {"digital signature", "server auth"})

CSR_GK = "CertificateSigningRequest.certificates.k8s.io"


class CSRError(Exception):
    """A request that does not parse, worded as Go's crypto/x509 and pkg/apis/certificates word it."""


# -- DER
def _tlv(data, i):
    """(tag, start of contents, end of contents) of the DER element at data[i]."""
    if i + 2 > len(data):
        raise CSRError("asn1: syntax error: data truncated")
    tag, n = data[i], data[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or i + k > len(data):
            raise CSRError("asn1: syntax error: invalid length")
        n = int.from_bytes(data[i:i + k], "big")
        i += k
    if i + n > len(data):
        raise CSRError("asn1: syntax error: data truncated")
    return tag, i, i + n


def _children(data, start, end):
    out = []
    while start < end:
        tag, s, e = _tlv(data, start)
        out.append((tag, s, e))
        start = e
    return out


def _oid(b):
    first = b[0]
    parts = [first // 40 if first < 80 else 2, first % 40 if first < 80 else first - 80]
    v = 0
    for c in b[1:]:
        v = (v << 7) | (c & 0x7F)
        if not c & 0x80:
            parts.append(v)
            v = 0
    return ".".join(str(p) for p in parts)


OID_CN, OID_O = "2.5.4.3", "2.5.4.10"
OID_EXTENSION_REQUEST, OID_SAN = "1.2.840.113549.1.9.14", "2.5.29.17"
OID_EC, OID_RSA = "1.2.840.10045.2.1", "1.2.840.113549.1.1.1"


def pem_blocks(data):
    """[(type, der bytes)] of the PEM blocks in data, as Go's pem.Decode finds them one after another."""
    out = []
    for m in re.finditer(rb"-----BEGIN ([^\r\n-]*)-----\r?\n(.*?)\r?\n?-----END \1-----", data, re.S):
        body = m.group(2)
        if b":" in body:                       # PEM headers ("Proc-Type: ..."): base64 has no colon
            out.append((m.group(1).decode("latin-1"), None))
            continue
        try:
            der = base64.b64decode(re.sub(rb"\s+", b"", body), validate=True)
        except (binascii.Error, ValueError):
            continue
        out.append((m.group(1).decode("latin-1"), der))
    return out


def parse_csr(pem):
    """The fields of a PEM CERTIFICATE REQUEST: {"cn", "orgs", "dns", "ips", "emails", "uris", "keyAlg",
    "der"}. Raises CSRError with pkg/apis/certificates' words for a first block of another type."""
    blocks = pem_blocks(pem or b"")
    if not blocks or blocks[0][0] != "CERTIFICATE REQUEST" or blocks[0][1] is None:
        raise CSRError("PEM block type must be CERTIFICATE REQUEST")
    der = blocks[0][1]
    try:
        tag, s, e = _tlv(der, 0)
        if tag != 0x30 or e != len(der):
            raise CSRError("x509: malformed certificate request")
        info = _children(der, s, e)[0]
        fields = _children(der, info[1], info[2])
        subject, spki = fields[1], fields[2]
        out = {"cn": "", "orgs": [], "dns": [], "ips": [], "emails": [], "uris": [], "keyAlg": "", "der": der}
        for rdn in _children(der, subject[1], subject[2]):
            for atv in _children(der, rdn[1], rdn[2]):
                oid_t, val = _children(der, atv[1], atv[2])[:2]
                oid = _oid(der[oid_t[1]:oid_t[2]])
                value = der[val[1]:val[2]].decode("utf-8", "replace")
                if oid == OID_CN:
                    out["cn"] = value                 # pkix.Name keeps the last CN
                elif oid == OID_O:
                    out["orgs"].append(value)
        alg = _children(der, spki[1], spki[2])[0]
        alg_oid = _children(der, alg[1], alg[2])[0]
        out["keyAlg"] = {OID_EC: "ECDSA", OID_RSA: "RSA"}.get(_oid(der[alg_oid[1]:alg_oid[2]]), "other")
        for f in fields[3:]:
            if f[0] != 0xA0:
                continue
            for attr in _children(der, f[1], f[2]):
                a_oid, a_set = _children(der, attr[1], attr[2])[:2]
                if _oid(der[a_oid[1]:a_oid[2]]) != OID_EXTENSION_REQUEST:
                    continue
                for exts in _children(der, a_set[1], a_set[2]):
                    for ext in _children(der, exts[1], exts[2]):
                        parts = _children(der, ext[1], ext[2])
                        if _oid(der[parts[0][1]:parts[0][2]]) != OID_SAN:
                            continue
                        val = parts[-1]
                        names = _children(der, val[1], val[2])[0]
                        for t, s2, e2 in _children(der, names[1], names[2]):
                            raw = der[s2:e2]
                            if t == 0x82:
                                out["dns"].append(raw.decode("latin-1"))
                            elif t == 0x81:
                                out["emails"].append(raw.decode("latin-1"))
                            elif t == 0x86:
                                out["uris"].append(raw.decode("latin-1"))
                            elif t == 0x87:
                                out["ips"].append(str(ipaddress.ip_address(raw)))
        return out
    except CSRError:
        raise
    except (IndexError, ValueError):
        raise CSRError("x509: malformed certificate request")


def check_signature(pem, key_alg):
    """csr.CheckSignature(): the request's self-signature (openssl req -verify)."""
    r = subprocess.run(["openssl", "req", "-verify", "-noout"], input=pem, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise CSRError({"ECDSA": "x509: ECDSA verification failure",
                        "RSA": "crypto/rsa: verification error"}.get(key_alg, "x509: signature verification failure"))


def request_pem(csr_obj):
    """The PEM bytes of spec.request (base64 in JSON), or b"" when absent."""
    r = ((csr_obj.get("spec") or {}).get("request")) or ""
    try:
        return base64.b64decode(r, validate=True)
    except (binascii.Error, ValueError):
        return b""


# -- kubelet signers (pkg/apis/certificates/helpers.go)
def _usages_list(usages):
    return "[" + " ".join(sorted(usages)) + "]"


def validate_kubelet_client(req, usages):
    """None, or the error ValidateKubeletClientCSR returns (the signer's Failed message)."""
    usages = set(usages or [])
    if req["orgs"] != ["system:nodes"]:
        return "subject organization is not system:nodes"
    if req["dns"]:
        return "DNS subjectAltNames are not allowed"
    if req["emails"]:
        return "Email subjectAltNames are not allowed"
    if req["ips"]:
        return "IP subjectAltNames are not allowed"
    if req["uris"]:
        return "URI subjectAltNames are not allowed"
    if not req["cn"].startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    if usages not in KUBELET_CLIENT_USAGES:
        return "usages did not match " + _usages_list(KUBELET_CLIENT_USAGES[0])
    return None


def validate_kubelet_serving(req, usages):
    usages = set(usages or [])
    if req["orgs"] != ["system:nodes"]:
        return "subject organization is not system:nodes"
    if not req["dns"] and not req["ips"]:
        return "DNS or IP subjectAltName is required"
    if req["emails"]:
        return "Email subjectAltNames are not allowed"
    if req["uris"]:
        return "URI subjectAltNames are not allowed"
    if usages not in KUBELET_SERVING_USAGES:
        return "usages did not match " + _usages_list(KUBELET_SERVING_USAGES[0])
    if not req["cn"].startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    return None


def validate_apiserver_client(req, usages):
    """The kube-apiserver-client signer's usage check (signer.go validAPIServerClientUsages)."""
    has_client = False
    for u in usages or []:
        if u in ("digital signature", "key encipherment"):
            continue
        if u == "client auth":
            has_client = True
            continue
        return "invalid usage for client certificate: %s" % u
    if not has_client:
        return "missing required usage for client certificate: client auth"
    return None


SIGNER_CHECKS = {KUBELET_CLIENT_SIGNER: validate_kubelet_client, KUBELET_SERVING_SIGNER: validate_kubelet_serving,
                 APISERVER_CLIENT_SIGNER: validate_apiserver_client}


# -- conditions
def conditions(csr_obj):
    return ((csr_obj.get("status") or {}).get("conditions")) or []


def has_condition(csr_obj, ctype):
    return any(c.get("type") == ctype and c.get("status", "True") == "True" for c in conditions(csr_obj))


def is_approved(csr_obj):
    """certificates.GetCertApprovalCondition: approved and not denied."""
    types = [c.get("type") for c in conditions(csr_obj)]
    return APPROVED in types and DENIED not in types


def is_pending(csr_obj):
    types = [c.get("type") for c in conditions(csr_obj)]
    return APPROVED not in types and DENIED not in types and not (csr_obj.get("status") or {}).get("certificate")


def condition_row(csr_obj):
    """kubectl's CONDITION column (printers extractCSRStatus)."""
    types = set(c.get("type") for c in conditions(csr_obj))
    s = "Denied" if DENIED in types else "Approved" if APPROVED in types else "Pending"
    if FAILED in types:
        s += ",Failed"
    if (csr_obj.get("status") or {}).get("certificate"):
        s += ",Issued"
    return s


def new_condition(ctype, reason, message):
    now = ts()
    return {"type": ctype, "status": "True", "reason": reason, "message": message, "lastUpdateTime": now,
            "lastTransitionTime": now}


# -- field errors as k8s.io/apimachinery/pkg/util/validation/field writes them
class GoBytes(bytes):
    """A []byte value printed with %#v."""


def _go_value(v):
    if v is None:
        return "null"
    if isinstance(v, GoBytes):
        return "[]byte(nil)" if not v else "[]byte{" + ", ".join("0x%x" % b for b in v) + "}"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(v) if isinstance(v, str) else json.dumps(json.dumps(v, separators=(",", ":")))


def required(field, detail=""):
    return ("FieldValueRequired", field, "Required value" + (": " + detail if detail else ""))


def invalid_value(field, value, detail):
    return ("FieldValueInvalid", field, "Invalid value: %s: %s" % (_go_value(value), detail))


def not_supported(field, value, valid):
    return ("FieldValueNotSupported", field, "Unsupported value: %s: supported values: %s" % (
        _go_value(value), ", ".join(json.dumps(v) for v in valid)))


def duplicate(field, value):
    return ("FieldValueDuplicate", field, "Duplicate value: %s" % _go_value(value))


def forbidden_field(field, detail):
    return ("FieldValueForbidden", field, "Forbidden: " + detail)


def invalid_error(name, errs):
    """apierrors.NewInvalid(CertificateSigningRequest.certificates.k8s.io, name, errs)."""
    causes, msgs = [], []
    for reason, field, body in errs:
        causes.append({"reason": reason, "message": body, "field": field})
        m = "%s: %s" % (field, body)
        if m not in msgs:
            msgs.append(m)
    text = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    d = {"name": name, "group": "certificates.k8s.io", "kind": "CertificateSigningRequest", "causes": causes}
    if not name:
        del d["name"]
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (CSR_GK, name, text), d)


def _decode_error(msg):
    return bad_request('CertificateSigningRequest in version "v1" cannot be handled as a CertificateSigningRequest: '
                       '%s' % msg)


def _b64_error(s):
    """The offset Go's base64.CorruptInputError reports for a string that is not standard base64
    with padding: the first byte outside the alphabet, else where the last quantum falls short."""
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    for i, ch in enumerate(s):
        if ch not in alphabet and not (ch == "=" and i >= len(s) - 2):
            return i
    return len(s) - len(s) % 4


def decode_spec(obj):
    """The type checks of decoding (400): spec.request base64, expirationSeconds int32, usages strings,
    and status.certificate base64."""
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    if not isinstance(spec, dict):
        raise _decode_error("json: cannot unmarshal %s into Go struct field CertificateSigningRequest.spec of type "
                            "v1.CertificateSigningRequestSpec" % _json_kind(spec))
    r = spec.get("request")
    if r is not None:
        if not isinstance(r, str):
            raise _decode_error("json: cannot unmarshal %s into Go struct field CertificateSigningRequestSpec.spec."
                                "request of type []uint8" % _json_kind(r))
        try:
            base64.b64decode(r, validate=True)
        except (binascii.Error, ValueError):
            raise _decode_error("illegal base64 data at input byte %d" % _b64_error(r))
    e = spec.get("expirationSeconds")
    if e is not None and (isinstance(e, bool) or not isinstance(e, int) or not -2 ** 31 <= e < 2 ** 31):
        raise _decode_error("json: cannot unmarshal %s into Go struct field CertificateSigningRequestSpec.spec."
                            "expirationSeconds of type int32" % (_json_kind(e) if not isinstance(e, int) else
                                                                 "number %d" % e))
    u = spec.get("usages")
    if u is not None and not (isinstance(u, list) and all(isinstance(x, str) for x in u)):
        raise _decode_error("json: cannot unmarshal %s into Go struct field CertificateSigningRequestSpec.spec.usages "
                            "of type v1.KeyUsage" % _json_kind(u))
    for f in ("signerName", "username", "uid"):
        if spec.get(f) is not None and not isinstance(spec[f], str):
            raise _decode_error("json: cannot unmarshal %s into Go struct field CertificateSigningRequestSpec.spec.%s "
                                "of type string" % (_json_kind(spec[f]), f))
    st = obj.get("status")
    if isinstance(st, dict) and st.get("certificate") is not None:
        c = st["certificate"]
        if not isinstance(c, str):
            raise _decode_error("json: cannot unmarshal %s into Go struct field CertificateSigningRequestStatus.status."
                                "certificate of type []uint8" % _json_kind(c))
        try:
            base64.b64decode(c, validate=True)
        except (binascii.Error, ValueError):
            raise _decode_error("illegal base64 data at input byte %d" % _b64_error(c))


def _json_kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _spec_in_go_order(spec):
    out = {}
    for k in ("request", "signerName", "expirationSeconds", "usages", "username", "uid", "groups", "extra"):
        if spec.get(k) not in (None, "", [], {}) or (k in ("request", "signerName", "username") and k in spec):
            out[k] = spec[k]
    return out


def prepare_for_create(obj, user):
    """csrStrategy.PrepareForCreate: the requester's identity into the spec, the status cleared.
    user: (name, uid, groups, extra) of the authenticated requester, or None (internal)."""
    spec = obj["spec"]
    for k in ("username", "uid", "groups", "extra"):
        spec.pop(k, None)
    if user is not None:
        name, uid, groups, extra = user
        spec["username"] = name
        if uid:
            spec["uid"] = uid
        if groups:
            spec["groups"] = list(groups)
        if extra:
            spec["extra"] = {k: list(v) for k, v in extra.items()}
    spec.setdefault("request", "")
    spec.setdefault("signerName", "")
    obj["spec"] = _spec_in_go_order(spec)
    obj["status"] = {}


def validate_signer_name(signer):
    """ValidateCertificateSigningRequestSignerName (the common rules)."""
    f = "spec.signerName"
    if not signer:
        return [required(f, "signerName must be provided")]
    segs = signer.split("/")
    if len(segs) != 2:
        return [invalid_value(f, signer, "must be a fully qualified domain and path of the form "
                                         "'example.com/signer-name'")]
    errs = []
    domain, path = segs
    if len(domain) > 253:
        errs.append(("FieldValueTooLong", f, "Too long: must have at most 253 bytes"))
    labels = domain.split(".")
    for lbl in labels:
        if not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", lbl) or len(lbl) > 63:
            errs.append(invalid_value(f, domain, 'validating label "%s": a lowercase RFC 1123 label must consist of '
                                      "lower case alphanumeric characters or '-', and must start and end with an "
                                      "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                                      "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')" % lbl))
            break
    if len(labels) < 2:
        errs.append(invalid_value(f, domain, "should be a domain with at least two segments separated by dots"))
    for lbl in path.split("."):
        if not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", lbl) or len(lbl) > 253:
            errs.append(invalid_value(f, path, 'validating label "%s": a lowercase RFC 1123 subdomain must consist '
                                      "of lower case alphanumeric characters, '-' or '.', and must start and end with "
                                      "an alphanumeric character (e.g. 'example.com', regex used for validation is "
                                      "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')" % lbl))
            break
    if len(signer) > 253 + 253 + 63 + 1 + 1:
        errs.append(("FieldValueTooLong", f, "Too long: must have at most 571 bytes"))
    return errs


def validate_create(obj):
    """validateCertificateSigningRequest for a create (strict options). Returns the parsed request."""
    md, spec = obj["metadata"], obj["spec"]
    errs = []
    if not md.get("name"):
        errs.append(required("metadata.name", "name or generateName is required"))
    pem = request_pem(obj)
    parsed = None
    try:
        parsed = parse_csr(pem)
        check_signature(pem, parsed["keyAlg"])
    except CSRError as e:
        parsed = None
        errs.append(invalid_value("spec.request", GoBytes(pem), str(e)))
    usages = spec.get("usages") or []
    if not usages:
        errs.append(required("spec.usages", "usages must be provided"))
    for i, u in enumerate(usages):
        if u not in VALID_USAGES:
            errs.append(not_supported("spec.usages[%d]" % i, u, VALID_USAGES))
    seen = set()
    for i, u in enumerate(usages):
        if u in seen:
            errs.append(duplicate("spec.usages[%d]" % i, u))
        seen.add(u)
    signer = spec.get("signerName") or ""
    if signer == LEGACY_UNKNOWN_SIGNER:
        errs.append(invalid_value("spec.signerName", signer, "the legacy signerName is not allowed via this API version"))
    else:
        errs += validate_signer_name(signer)
    exp = spec.get("expirationSeconds")
    if exp is not None and exp < 600:
        errs.append(invalid_value("spec.expirationSeconds", exp, "may not specify a duration less than 600 seconds "
                                                                 "(10 minutes)"))
    if errs:
        raise invalid_error(md.get("name") or "", errs)
    return parsed


def _validate_certificate(b64):
    """validateCertificate: one or more PEM CERTIFICATE blocks, nothing else."""
    if not b64:
        return None
    data = base64.b64decode(b64)
    blocks = pem_blocks(data)
    for typ, der in blocks:
        if typ != "CERTIFICATE":
            return 'only CERTIFICATE PEM blocks are allowed, found "%s"' % typ
        if der is None:
            return "no PEM block headers are permitted"
        r = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout"], input=der, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if r.returncode != 0:
            return "x509: malformed certificate"
    if not blocks:
        return "must contain at least one CERTIFICATE PEM block"
    return None


def _populate_timestamps(new, old):
    now = ts()
    for c in conditions(new):
        if not c.get("lastUpdateTime"):
            c["lastUpdateTime"] = now
        if not c.get("lastTransitionTime"):
            last = now
            for oc in conditions(old):
                if oc.get("type") == c.get("type") and oc.get("status") == c.get("status") and oc.get("lastTransitionTime"):
                    last = oc["lastTransitionTime"]
                    break
            c["lastTransitionTime"] = last


def _condition_in_go_order(c):
    if not isinstance(c, dict):
        return c
    out = {}
    for k in ("type", "status", "reason", "message", "lastUpdateTime", "lastTransitionTime"):
        if c.get(k) not in (None, "") or k in ("type", "status"):
            out[k] = c.get(k, "")
    return out


def prepare_for_update(sub, old, new):
    """The object a PUT/PATCH of the main resource (metadata only), /status (status, Approved and
    Denied kept as they were) or /approval (the conditions only) stores, validated as
    ValidateCertificateSigningRequest{,Status,Approval}Update (422). new has the stored metadata
    already merged (api._finish_update)."""
    out = copy.deepcopy(new)
    out["spec"] = copy.deepcopy(old.get("spec") or {})
    ost = old.get("status") or {}
    nst = new.get("status") if isinstance(new.get("status"), dict) else {}
    if sub is None:
        out["status"] = copy.deepcopy(ost)
        return out
    conds = [_condition_in_go_order(c) for c in (nst.get("conditions") or []) if isinstance(c, dict)]
    if sub == "status":
        st = {}
        for t in (APPROVED, DENIED):           # preserveConditionInstances
            oi = [i for i, c in enumerate(ost.get("conditions") or []) if c.get("type") == t]
            ni = [i for i, c in enumerate(conds) if c.get("type") == t]
            if len(oi) == len(ni):
                for a, b in zip(oi, ni):
                    conds[b] = copy.deepcopy(ost["conditions"][a])
        if conds:
            st["conditions"] = conds
        if nst.get("certificate"):
            st["certificate"] = nst["certificate"]
    else:                                      # approval: only the conditions
        st = {}
        if conds:
            st["conditions"] = conds
        if ost.get("certificate"):
            st["certificate"] = ost["certificate"]
    out["status"] = st
    _populate_timestamps(out, old)
    errs = []
    has_a = has_d = False
    seen = set()
    for i, c in enumerate(conds):
        t, s = c.get("type") or "", c.get("status") or ""
        p = "status.conditions[%d]" % i
        if not t:
            errs.append(required(p + ".type"))
        allowed = ["True"] if t in (APPROVED, DENIED, FAILED) else ["False", "True", "Unknown"]
        if not s:
            errs.append(required(p + ".status"))
        elif s not in allowed:
            errs.append(not_supported(p + ".status", s, allowed))
        if t == APPROVED:
            has_a = True
            if has_d:
                errs.append(invalid_value(p + ".type", t, "Approved and Denied conditions are mutually exclusive"))
        elif t == DENIED:
            has_d = True
            if has_a:
                errs.append(invalid_value(p + ".type", t, "Approved and Denied conditions are mutually exclusive"))
        if t in seen:
            errs.append(duplicate(p + ".type", t))
        seen.add(t)
    bad = _validate_certificate(st.get("certificate"))
    if bad:
        errs.append(invalid_value("status.certificate", "<certificate data>", bad))
    for t in (APPROVED, DENIED, FAILED):
        if len([c for c in conds if c.get("type") == t]) < len([c for c in ost.get("conditions") or [] if c.get("type") == t]):
            errs.append(forbidden_field("status.conditions", 'updates may not remove a condition of type "%s"' % t))
    if sub == "status":
        for t in (APPROVED, DENIED):
            if len([c for c in conds if c.get("type") == t]) > len([c for c in ost.get("conditions") or [] if c.get("type") == t]):
                errs.append(forbidden_field("status.conditions", 'updates may not add a condition of type "%s"' % t))
        if st.get("certificate", "") != ost.get("certificate", "") and ost.get("certificate"):
            errs.append(forbidden_field("status.certificate", "updates may not modify existing certificate content"))
    if errs:
        raise invalid_error(old["metadata"]["name"], errs)
    return out
