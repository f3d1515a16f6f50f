"""The object store: one resourceVersion sequence over all types, per-type watch history
(a resume point older than the history answers 410 Gone) and the watchers' event queues."""

import collections
import copy
import queue
import threading

from .errors import Retry
from .resources import STORE_RES


class Event(object):
    __slots__ = ("type", "rv", "obj", "prev", "res", "cache")

    def __init__(self, etype, rv, obj, prev, res):
        self.type, self.rv, self.obj, self.prev, self.res, self.cache = etype, rv, obj, prev, res, {}


class Watcher(object):
    def __init__(self, res_key):
        self.res_key = res_key
        self.q = queue.SimpleQueue()


CLOSE = object()


ABORT = object()


class Store(object):
    def __init__(self, history):
        self.lock = threading.RLock()
        self.rv = 1
        self.history_size = history
        self.objs = {k: {} for k in STORE_RES}
        self.hist = {k: collections.deque() for k in STORE_RES}
        self.evicted = {k: 0 for k in STORE_RES}
        self.latest = {k: 0 for k in STORE_RES}
        self.watchers = {k: set() for k in STORE_RES}
        self.listeners = []       # callables(res_key, event) run under the lock (must be cheap)

    def get(self, key, k):
        return self.objs[key].get(k)

    def write(self, key, k, old, new, etype=None):
        """Commit new (None = delete) if the stored object is still `old` (identity)."""
        with self.lock:
            cur = self.objs[key].get(k)
            if cur is not old:
                raise Retry()
            self.rv += 1
            rv = self.rv
            if new is None:
                del self.objs[key][k]
                new_obj = copy.copy(old)
                new_obj["metadata"] = dict(old["metadata"], resourceVersion=str(rv))
                ev = Event("DELETED", rv, new_obj, old, key)
                stored = new_obj
            else:
                new["metadata"]["resourceVersion"] = str(rv)
                self.objs[key][k] = new
                ev = Event(etype or ("ADDED" if old is None else "MODIFIED"), rv, new, old, key)
                stored = new
            self._emit(key, ev)
            return stored

    def _emit(self, key, ev):
        self.latest[key] = ev.rv
        h = self.hist[key]
        h.append(ev)
        while len(h) > self.history_size:
            self.evicted[key] = h.popleft().rv
        for w in self.watchers[key]:
            w.q.put(ev)
        for l in self.listeners:
            l(key, ev)

    def set_history(self, n):
        with self.lock:
            self.history_size = max(0, n)
            for key, h in self.hist.items():
                while len(h) > self.history_size:
                    self.evicted[key] = h.popleft().rv

    def items(self, key):
        return list(self.objs[key].values())
