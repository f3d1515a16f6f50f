"""pods/log: proxies to the kubelet endpoint of the pod's Node over TLS with the
kubelet client certificate, as kube-apiserver does."""

import http.client
import ssl
import urllib.parse

from .errors import ApiError
from .kubelet import dial, go_dial_error, join_host_port, kubelet_context, node_endpoint, pick_container


class PodLogHandler:
    """Mixin of handler.Handler: the pods/log proxy."""

    # -- pods/log proxy
    def pod_log(self, pod, q):
        srv = self.server
        name = pod["metadata"]["name"]
        ns = pod["metadata"]["namespace"]
        container = pick_container(pod, self.query1(q, "container", ""))
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            self.send_bytes(200, b"", "text/plain")
            return
        host, port = node_endpoint(srv.api, node_name, srv.opts.kubelet_preferred_address_types)
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
        hostport = join_host_port(host, port)
        ctx = kubelet_context(srv, q, node_name)
        conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
        try:
            conn.sock = dial(ctx, host, port)
            conn.sock.settimeout(10)
            conn.request("GET", upath, headers={"Host": hostport})
            # getresponse() drops conn.sock when the kubelet answers
            # "Connection: close"; keep it to lift the timeout for follow.
            sock = conn.sock
            resp = conn.getresponse()
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            conn.close()
            raise ApiError(500, "", 'Get "https://%s%s": %s' % (hostport, upath, go_dial_error(e, host, port)))
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
