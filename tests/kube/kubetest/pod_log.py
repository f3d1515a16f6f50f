"""pods/log: proxies to the kubelet endpoint of the pod's Node over TLS with the
kubelet client certificate, as kube-apiserver does."""

import http.client
import json
import ssl
import urllib.parse

from .errors import ApiError, bad_request, not_found
from .resources import RESOURCES
from .util import log


class PodLogHandler:
    """Mixin of handler.Handler: the pods/log proxy."""

    # -- pods/log proxy
    def pod_log(self, pod, q):
        srv = self.server
        api = srv.api
        name = pod["metadata"]["name"]
        ns = pod["metadata"]["namespace"]
        sp = pod.get("spec") or {}
        main = [c["name"] for c in sp.get("containers") or []]
        init = [c["name"] for c in sp.get("initContainers") or []]
        eph = [c["name"] for c in sp.get("ephemeralContainers") or []]
        container = self.query1(q, "container", "")
        if not container:
            if len(main) == 1:
                container = main[0]
            else:
                m = "a container name must be specified for pod %s, choose one of: [%s]" % (name, " ".join(main))
                if init:
                    m += " or one of the init containers: [%s]" % " ".join(init)
                raise bad_request(m)
        if container not in main + init + eph:
            raise bad_request("container %s is not valid for pod %s" % (container, name))
        node_name = sp.get("nodeName")
        if not node_name:
            self.send_bytes(200, b"", "text/plain")
            return
        node = api.store.get("nodes", ("", node_name))
        if node is None:
            raise not_found(RESOURCES[("", "nodes")], node_name)
        addrs = (node.get("status") or {}).get("addresses") or []
        host = None
        for t in ("InternalIP", "ExternalIP", "Hostname", "InternalDNS", "ExternalDNS"):
            host = next((a.get("address") for a in addrs if a.get("type") == t and a.get("address")), None)
            if host:
                break
        if not host:
            raise ApiError(500, "InternalError", "no preferred addresses found; known addresses: %s" % json.dumps(addrs))
        port = int((((node.get("status") or {}).get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 10250)
        params = []
        follow = (self.query1(q, "follow") or "").lower() in ("true", "1")
        for k in ("follow", "previous", "timestamps"):
            if (self.query1(q, k) or "").lower() in ("true", "1"):
                params.append((k, "true"))
        for k in ("tailLines", "sinceSeconds", "sinceTime", "limitBytes"):
            v = self.query1(q, k)
            if v not in (None, ""):
                params.append((k, v))
        upath = "/containerLogs/%s/%s/%s" % (ns, name, container)
        if params:
            upath += "?" + urllib.parse.urlencode(params)
        insecure = srv.opts.kubelet_insecure or (self.query1(q, "insecureSkipTLSVerifyBackend") or "").lower() == "true"
        ctx = srv.kubelet_ctx_insecure if insecure else srv.kubelet_ctx
        if insecure:
            log("WARNING: not verifying the kubelet serving certificate of node %s" % node_name)
        hostport = "[%s]" % host if ":" in host else host
        try:
            conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
            conn.request("GET", upath, headers={"Host": "%s:%d" % (hostport, port)})
            # getresponse() drops conn.sock when the kubelet answers
            # "Connection: close"; keep it to lift the timeout for follow.
            sock = conn.sock
            resp = conn.getresponse()
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            raise ApiError(500, "InternalError", 'Get "https://%s:%d%s": %s' % (hostport, port, upath, e))
        try:
            if resp.status != 200:
                text = resp.read(16384).decode("utf-8", "replace").strip()
                reason = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound"}.get(resp.status, "InternalError")
                raise ApiError(resp.status, reason, text or "the server could not find the requested resource ( pods/log %s)" % name)
            if follow and sock is not None:
                sock.settimeout(None)
            self.start_chunked("text/plain")
            while True:
                try:
                    data = resp.read1(65536)
                except (OSError, http.client.HTTPException):
                    break
                if not data:
                    break
                self.chunk(data)
            self.end_chunked()
        finally:
            conn.close()
