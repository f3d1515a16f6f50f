"""Watches: streams the store's events after a resourceVersion (410 Gone when it is older than
the history), bookmarks, timeouts, and the ends the test controls ask for (clean or abrupt)."""

import copy
import json
import queue
import select
import socket
import time

from .errors import invalid
from .objects import to_events_v1
from .store import ABORT, CLOSE, Watcher
from .tables import table_for


class WatchHandler:
    """Mixin of handler.Handler: the watch stream of a list request."""

    # -- watch
    def watch(self, res, filt, q):
        srv = self.server
        store = srv.api.store
        rvp = self.query1(q, "resourceVersion")
        tmo = self.query1(q, "timeoutSeconds")
        deadline = time.monotonic() + float(tmo) if tmo not in (None, "") and float(tmo) > 0 else None
        bookmarks = (self.query1(q, "allowWatchBookmarks") or "").lower() in ("true", "1")
        table = self.wants_table()
        w = Watcher(res.key)
        initial = []
        err = None
        with store.lock:
            if rvp in (None, ""):
                start_rv, with_rv = store.rv, False
                initial = [("ADDED", o) for k, o in sorted(store.objs[res.key].items()) if filt(o)]
            elif rvp == "0":
                start_rv, with_rv = store.rv, True
                initial = [("ADDED", o) for k, o in sorted(store.objs[res.key].items()) if filt(o)]
            else:
                try:
                    n = int(rvp)
                except ValueError:
                    raise invalid(res, "", [("resourceVersion", rvp, "must be a non-negative integer")])
                start_rv, with_rv = n, True
                h = store.hist[res.key]
                if store.evicted[res.key] > n:
                    oldest = h[0].rv if h else store.rv + 1
                    err = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                       "status": "Failure", "message": "too old resource version: %d (%d)" % (n, oldest - 1),
                                                       "reason": "Expired", "code": 410}}
                else:
                    for ev in h:
                        if ev.rv > n:
                            w.q.put(ev)
            if err is None:
                store.watchers[res.key].add(w)
        self.start_chunked("application/json")
        if err is not None:
            self.chunk((json.dumps(err) + "\n").encode())
            self.end_chunked()
            return
        with srv.watchers_lock:
            srv.watchers.add(w)
        last_sent = start_rv
        interval = srv.opts.bookmark_interval
        next_bm = time.monotonic() + interval
        pre_deadline_bm = deadline - 2 if deadline and bookmarks else None
        abrupt = False
        try:
            for etype, o in initial:
                self.chunk(self.encode(etype, o, res, table))
            while True:
                now = time.monotonic()
                if deadline and now >= deadline:
                    break
                wait = min(1.0, next_bm - now)
                if deadline:
                    wait = min(wait, deadline - now)
                if pre_deadline_bm:
                    wait = min(wait, max(0.0, pre_deadline_bm - now))
                try:
                    ev = w.q.get(timeout=max(0.0, wait))
                except queue.Empty:
                    ev = None
                if ev is CLOSE:
                    break
                if ev is ABORT:
                    abrupt = True
                    break
                if ev is not None:
                    cur_ok = ev.type != "DELETED" and filt(ev.obj)
                    prev_ok = ev.prev is not None and filt(ev.prev)
                    if cur_ok and prev_ok:
                        self.chunk(self.encode("MODIFIED", ev.obj, res, table, ev))
                    elif cur_ok:
                        self.chunk(self.encode("ADDED", ev.obj, res, table, ev))
                    elif prev_ok:
                        if ev.type == "DELETED":
                            o = ev.obj
                        else:
                            o = copy.copy(ev.prev)
                            o["metadata"] = dict(ev.prev["metadata"], resourceVersion=str(ev.rv))
                        self.chunk(self.encode("DELETED", o, res, table, ev if ev.type == "DELETED" else None))
                    last_sent = max(last_sent, ev.rv)
                    continue
                now = time.monotonic()
                due = now >= next_bm
                if pre_deadline_bm and now >= pre_deadline_bm:
                    due, pre_deadline_bm = True, None
                if due:
                    next_bm = now + interval
                    if bookmarks and with_rv:
                        with store.lock:
                            if w.q.empty() and store.latest[res.key] > start_rv:
                                brv = store.rv
                            else:
                                brv = None
                        if brv is not None:
                            bm = {"kind": res.kind, "apiVersion": res.api_version, "metadata": {"resourceVersion": str(brv)}}
                            self.chunk((json.dumps({"type": "BOOKMARK", "object": bm}, separators=(",", ":")) + "\n").encode())
                            last_sent = brv
                # detect a client that went away
                try:
                    r, _, _ = select.select([self.connection], [], [], 0)
                except (OSError, ValueError):
                    r = [1]
                if r:
                    abrupt = True
                    break
            if not abrupt:
                self.end_chunked()
        finally:
            with store.lock:
                store.watchers[res.key].discard(w)
            with srv.watchers_lock:
                srv.watchers.discard(w)
            if abrupt:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def encode(self, etype, o, res, table, ev=None):
        if ev is not None and not table and etype == ev.type:
            c = ev.cache.get(res.plural + res.group)
            if c is None:
                c = ev.cache[res.plural + res.group] = self._enc(etype, o, res, False)
            return c
        return self._enc(etype, o, res, table)

    def _enc(self, etype, o, res, table):
        if res.view_of:
            o = to_events_v1(o)
        if table:
            o = table_for(res, [o], o["metadata"].get("resourceVersion", ""))
        return (json.dumps({"type": etype, "object": o}, separators=(",", ":")) + "\n").encode()
