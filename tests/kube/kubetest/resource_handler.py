"""Resource requests: the verbs on one resource path, with dry runs, tables, subresources
(status, approval, binding, eviction, log, exec, attach, portforward, proxy, token) and
deletecollection. The verbs pass the requester (self.user_info) to api.Api for admission."""

import base64
import json

from .errors import ApiError, bad_request, conflict, invalid
from .objects import set_condition, to_events_v1
from .selectors import Filter, parse_field_selector, parse_label_selector
from .tables import table_for
from .tokens import TOKEN_REQUEST
from .util import ts


class ResourceHandler:
    """Mixin of handler.Handler: the resource verbs."""

    def query1(self, q, k, default=None):
        v = q.get(k)
        return v[0] if v else default

    def parse_json(self, body, res):
        ct = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        if ct not in ("application/json", "", "*/*", "application/yaml"):
            raise ApiError(415, "UnsupportedMediaType",
                           'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml')
        try:
            return json.loads(body.decode("utf-8"))
        except Exception as e:
            raise bad_request('%s in version "%s" cannot be handled as a %s: %s' % (
                res.kind if res else "object", res.version if res else "v1", res.kind if res else "object", e))

    def wants_table(self):
        a = self.headers.get("Accept") or ""
        return "as=Table" in a

    def resource(self, method, verb, res, ns, name, sub, q, body):
        api = self.server.api
        dry = bool(q.get("dryRun"))
        if name is not None and sub is None and method == "GET":
            o = api.get(res, ns, name)
            if res.view_of:
                o = to_events_v1(o)
            if self.wants_table():
                self.send_obj(200, table_for(res, [o], o["metadata"]["resourceVersion"]))
            else:
                self.send_obj(200, o)
            return
        if name is None and method == "GET":
            lsel = parse_label_selector(self.query1(q, "labelSelector", ""))
            fsel = parse_field_selector(self.query1(q, "fieldSelector", ""), res)
            filt = Filter(res, ns, lsel, fsel)
            if verb == "watch":
                self.watch(res, filt, q)
                return
            items, rv = api.list(res, ns, filt)
            cont = self.query1(q, "continue")
            if cont:
                try:
                    start = tuple(json.loads(base64.b64decode(cont)))
                except Exception:
                    raise bad_request("continue key is not valid")
                items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start]
            lim = int(self.query1(q, "limit", "0") or 0)
            lmd = {"resourceVersion": rv}
            if lim > 0 and len(items) > lim:
                last = items[lim - 1]["metadata"]
                lmd["continue"] = base64.b64encode(json.dumps([last.get("namespace", ""), last["name"]]).encode()).decode()
                lmd["remainingItemCount"] = len(items) - lim
                items = items[:lim]
            if res.view_of:
                items = [to_events_v1(o) for o in items]
            if self.wants_table():
                self.send_obj(200, table_for(res, items, rv))
                return
            self.send_obj(200, {"kind": res.kind + "List", "apiVersion": res.api_version, "metadata": lmd, "items": items})
            return
        if sub == "log":
            self.pod_log(api.get(res, ns, name), q)
            return
        if sub in ("status", "approval") and method == "GET":
            self.send_obj(200, api.get(res, ns, name))
            return
        if method == "POST" and sub == "binding":
            b = self.parse_json(body, None)
            target = ((b or {}).get("target") or {}).get("name")
            if not target:
                raise invalid(res, name, [("target.name", None, "Required value")])
            old = api.get(res, ns, name)
            if (old.get("spec") or {}).get("nodeName"):
                raise conflict(res, name, "pod %s is already assigned to node \"%s\"" % (name, old["spec"]["nodeName"]))
            api.admit(self.user_info, "CREATE", res, "binding", ns, name, b, None)

            def fn(o):
                if (o.get("spec") or {}).get("nodeName"):
                    return False
                o["spec"]["nodeName"] = target
                set_condition(o, {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": ts()})
                return True
            api.mutate("pods", (ns, name), fn)
            self.send_obj(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
            return
        if sub in ("exec", "attach", "portforward"):
            self.pod_stream(method, api.get(res, ns, name), sub, q, body)
            return
        if sub == "proxy":
            self.node_proxy(method, name, body)
            return
        if sub == "token":
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            tr = self.parse_json(body, TOKEN_REQUEST)
            api.admit(self.user_info, "CREATE", res, "token", ns, name, tr, None)
            self.send_obj(201, api.tokens.request(ns, name, tr))
            return
        if sub == "eviction" and method == "POST":
            self.send_obj(201, api.evict(ns, name, self.parse_json(body, None), user=self.user_info))
            return
        if sub == "eviction" or sub == "finalize":
            raise ApiError(405, "MethodNotAllowed", "this test double does not implement %s/%s" % (res.plural, sub))
        if method == "POST":
            obj = self.parse_json(body, res)
            self.send_obj(201, api.create(res, ns, obj, dry=dry, user=self.user_info))
            return
        if method == "PUT":
            obj = self.parse_json(body, res)
            out = api.update(res, ns, name, obj, sub, dry=dry, user=self.user_info)
            if isinstance(out, tuple):  # created on update
                self.send_obj(201, out[0])
            else:
                self.send_obj(200, out)
            return
        if method == "PATCH":
            o, code = api.patch(res, ns, name, self.headers.get("Content-Type"), body, sub, dry=dry, user=self.user_info)
            self.send_obj(code, o)
            return
        if method == "DELETE":
            opts = {}
            if body.strip():
                opts = self.parse_json(body, None) or {}
            g = self.query1(q, "gracePeriodSeconds")
            if g not in (None, ""):
                opts["gracePeriodSeconds"] = int(g)
            if name is None:
                lsel = parse_label_selector(self.query1(q, "labelSelector", ""))
                fsel = parse_field_selector(self.query1(q, "fieldSelector", ""), res)
                items, rv = api.list(res, ns, Filter(res, ns, lsel, fsel))
                out = []
                for o in items:
                    try:
                        c, b = api.delete(res, o["metadata"].get("namespace"), o["metadata"]["name"], opts, dry,
                                          user=self.user_info)
                        out.append(b if b.get("kind") != "Status" else o)
                    except ApiError:
                        pass
                self.send_obj(200, {"kind": res.kind + "List", "apiVersion": res.api_version,
                                    "metadata": {"resourceVersion": str(api.store.rv)}, "items": out})
                return
            code, b = api.delete(res, ns, name, opts, dry, user=self.user_info)
            self.send_obj(code, b)
            return
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
