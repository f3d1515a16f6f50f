"""Shared helpers of the test double: its log line, the Kubernetes version it claims, the
time formats of the API (Time, MicroTime, kubectl's ages) and resource quantities."""

import datetime
import json
import re
import select
import ssl
import sys
import time
from fractions import Fraction


K8S_VERSION = {
    "major": "1", "minor": "28", "gitVersion": "v1.28.15",
    "gitCommit": "841856557ef0f6a399096c42635d114d6f2cf7f4", "gitTreeState": "clean",
    "buildDate": "2024-10-22T20:26:27Z", "goVersion": "go1.22.8", "compiler": "gc",
    "platform": "linux/amd64",
}


def log(msg):
    sys.stderr.write("%s kube-test-server: %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


class Backoff:
    """Per key retry times after failures, as a controller's rate-limited queue holds them: the
    first failure waits `first` s, each next one twice the last, at most `cap` s; a success
    (clear) starts over."""

    def __init__(self, first, cap):
        self.first, self.cap = first, cap
        self.keys = {}      # key -> (monotonic time of the next try, delay)

    def due(self, key):
        b = self.keys.get(key)
        return b is None or time.monotonic() >= b[0]

    def failed(self, key):
        delay = min(self.cap, self.keys[key][1] * 2) if key in self.keys else self.first
        self.keys[key] = (time.monotonic() + delay, delay)

    def clear(self, key):
        self.keys.pop(key, None)

    def keep_only(self, live):
        for key in [k for k in self.keys if k not in live]:
            del self.keys[key]


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def ts(dt=None):
    return (dt or now_utc()).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_ts(dt=None):
    return (dt or now_utc()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(s):
    try:
        s = s.replace("Z", "+00:00")
        return datetime.datetime.fromisoformat(s)
    except Exception:
        return None


MICRO_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{6})(Z|[+-]\d\d:\d\d)$")


MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"


def check_microtime(v):
    """Returns (normalized, None) or (None, error message) like Go's time.Parse."""
    if not isinstance(v, str):
        return None, "parsing time %s as \"%s\": cannot parse %s as \"2006\"" % (json.dumps(v), MICRO_LAYOUT, json.dumps(v))
    m = MICRO_RE.match(v)
    if not m:
        m2 = re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", v)
        if not m2:
            return None, 'parsing time "%s" as "%s": cannot parse "%s" as "2006"' % (v, MICRO_LAYOUT, v)
        rest = v[m2.end():]
        m3 = re.match(r"^\.\d{6}", rest)
        if not m3:
            return None, 'parsing time "%s" as "%s": cannot parse "%s" as ".000000"' % (v, MICRO_LAYOUT, rest)
        return None, 'parsing time "%s" as "%s": cannot parse "%s" as "Z07:00"' % (v, MICRO_LAYOUT, rest[7:])
    if m.group(3) == "Z":
        return v, None
    dt = datetime.datetime.fromisoformat(v)
    return micro_ts(dt.astimezone(datetime.timezone.utc)), None


def human_duration(secs):
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    s = int(secs)
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = s // 3600
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    if h < 24 * 8:
        return "%dd%dh" % (h // 24, h % 24) if h % 24 else "%dd" % (h // 24)
    if h < 24 * 365 * 2:
        return "%dd" % (h // 24)
    y = h // (24 * 365)
    if y < 8:
        return "%dy%dd" % (y, (h // 24) % 365)
    return "%dy" % y


def age_of(t):
    d = parse_ts(t) if t else None
    if not d:
        return "<unknown>"
    return human_duration((now_utc() - d).total_seconds())


_SUFFIX = {"": Fraction(1), "n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000),
           "k": Fraction(10 ** 3), "M": Fraction(10 ** 6), "G": Fraction(10 ** 9), "T": Fraction(10 ** 12),
           "P": Fraction(10 ** 15), "E": Fraction(10 ** 18), "Ki": Fraction(2 ** 10), "Mi": Fraction(2 ** 20),
           "Gi": Fraction(2 ** 30), "Ti": Fraction(2 ** 40), "Pi": Fraction(2 ** 50), "Ei": Fraction(2 ** 60)}


_QRE = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$")


QUANTITY_ERR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def parse_q(v):
    if isinstance(v, bool):
        raise ValueError(QUANTITY_ERR)
    if isinstance(v, (int, float)):
        return Fraction(v)
    if not isinstance(v, str):
        raise ValueError(QUANTITY_ERR)
    m = _QRE.match(v.strip())
    if not m:
        raise ValueError(QUANTITY_ERR)
    n = Fraction(m.group(1))
    if m.group(3):
        n *= Fraction(10) ** int(m.group(3))
    else:
        n *= _SUFFIX[m.group(2) or ""]
    return n


def is_extended(name):
    return "/" in name and not name.startswith("kubernetes.io/") and not name.startswith("requests.")


def q_str(v):
    return v if isinstance(v, str) else json.dumps(v)


def send_all(s, data, wait_s=60):
    """sendall on a non-blocking (TLS) socket: waits up to wait_s for each chance to write."""
    view = memoryview(data)
    while view:
        try:
            n = s.send(view)
        except (ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            select.select([], [s], [], wait_s)
            continue
        except ssl.SSLWantReadError:
            select.select([s], [], [], wait_s)
            continue
        view = view[n:]
