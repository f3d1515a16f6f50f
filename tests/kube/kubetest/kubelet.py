"""The API server's side of a node's kubelet endpoint, shared by the pods/log, streaming and
nodes/proxy proxies: the container a request names (or the default one), the node's address
and port, the TLS dial with the kubelet client certificate, and dial errors worded as Go
words them (kube-apiserver is a Go program; kubectl prints its messages)."""

import ipaddress
import json
import socket
import ssl

from .errors import ApiError, bad_request, not_found
from .resources import RESOURCES
from .util import log


def pick_container(pod, container):
    """The container a pods/log, exec or attach request is for: the one named (a container, an init
    or an ephemeral container of the pod), or the only container; 400 BadRequest otherwise
    (kube-apiserver's streamLocation / validateContainer)."""
    name = pod["metadata"]["name"]
    sp = pod.get("spec") or {}
    main = [c["name"] for c in sp.get("containers") or []]
    init = [c["name"] for c in sp.get("initContainers") or []]
    eph = [c["name"] for c in sp.get("ephemeralContainers") or []]
    if not container:
        if len(main) == 1:
            return main[0]
        if not main:
            raise bad_request("a container name must be specified for pod %s" % name)
        m = "a container name must be specified for pod %s, choose one of: [%s]" % (name, " ".join(main))
        if init:
            m += " or one of the init containers: [%s]" % " ".join(init)
        raise bad_request(m)
    if container not in main + init + eph:
        raise bad_request("container %s is not valid for pod %s" % (container, name))
    return container


# kube-apiserver's --kubelet-preferred-address-types default (v1.28): a
# Hostname address wins over an InternalIP one, wherever it stands in the list.
PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")


def node_endpoint(api, node_name, preferred=PREFERRED_ADDRESS_TYPES):
    """(host, port) of a node's kubelet endpoint: the first address of the first type in
    preferred (kube-apiserver's --kubelet-preferred-address-types) and
    status.daemonEndpoints.kubeletEndpoint.Port (10250 when unset). 404 for an unknown node,
    500 when it has no address of those types."""
    node = api.store.get("nodes", ("", node_name))
    if node is None:
        raise not_found(RESOURCES[("", "nodes")], node_name)
    st = node.get("status") or {}
    addrs = st.get("addresses") or []
    for t in preferred:
        host = next((a.get("address") for a in addrs if a.get("type") == t and a.get("address")), None)
        if host:
            break
    else:
        raise ApiError(500, "", "no preferred addresses found; known addresses: %s" % json.dumps(addrs))
    port = int(((st.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 10250)
    return host, port


def join_host_port(host, port):
    return "%s:%d" % ("[%s]" % host if ":" in host else host, port)


def _resolver():
    try:
        with open("/etc/resolv.conf") as f:
            for line in f:
                w = line.split()
                if len(w) >= 2 and w[0] == "nameserver":
                    return join_host_port(w[1], 53)
    except OSError:
        pass
    return None


def go_dial_error(e, host, port):
    """A dial or TLS handshake failure as Go's net and crypto/tls packages word it, e.g.
    'dial tcp 127.0.0.1:1: connect: connection refused'."""
    hp = join_host_port(host, port)
    if isinstance(e, socket.gaierror):
        r = _resolver()
        return "dial tcp: lookup %s%s: no such host" % (host, " on " + r if r else "")
    if isinstance(e, ssl.SSLCertVerificationError):
        if e.verify_code in (18, 19, 20, 21):
            return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        if e.verify_code == 62:
            return "tls: failed to verify certificate: x509: certificate is not valid for %s" % host
        return "tls: failed to verify certificate: x509: %s" % e.verify_message
    if isinstance(e, ssl.SSLError):
        return "remote error: tls: %s" % (e.reason or str(e)).lower().replace("_", " ")
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "dial tcp %s: i/o timeout" % hp
    if isinstance(e, OSError) and e.strerror:
        return "dial tcp %s: connect: %s" % (hp, e.strerror.lower())
    return "dial tcp %s: %s" % (hp, e)


def kubelet_context(srv, q, node_name):
    """The TLS client context towards a node's kubelet: verifying (--kubelet-ca), or not
    (--kubelet-insecure, or the request's insecureSkipTLSVerifyBackend=true)."""
    insecure = srv.opts.kubelet_insecure or ((q.get("insecureSkipTLSVerifyBackend") or [""])[0].lower() == "true")
    if insecure:
        log("WARNING: not verifying the kubelet serving certificate of node %s" % node_name)
        return srv.kubelet_ctx_insecure
    return srv.kubelet_ctx


def dial(ctx, host, port, timeout=10):
    """A TLS connection to host:port with the kubelet client certificate (ctx from
    kubelet_context), blocking with no timeout once connected. Raises OSError / ssl.SSLError
    (go_dial_error words them)."""
    raw = socket.create_connection((host, port), timeout=timeout)
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s = ctx.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise
    s.settimeout(None)
    return s


def proxyable(host):
    """None when nodes/proxy may dial host, else the reason kube-apiserver's node strategy gives
    (every address of host must be global unicast: no loopback, link-local, multicast)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        return "lookup %s: %s" % (host, e.strerror)
    if not infos:
        return "no addresses for hostname"
    for info in infos:
        ip = ipaddress.ip_address(info[4][0].split("%")[0])
        if ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified or \
                ip == ipaddress.ip_address("255.255.255.255"):
            return "address not allowed"
    return None
