#!/usr/bin/env python3
"""Reward model service of the online-RL example (a stand-in for a real one).

POST /score {"items": [{"prompt": ctx, "completion": [token ids]}, ...]}
     -> {"scores": [float, ...], "model": str}
GET  /healthz -> ok (readiness probe)

The score is rlcore.score: the share of a completion's tokens the model
prefers for the prompt's context (a preference the trainer does not know and
has to learn), so runs are reproducible. Stops cleanly on SIGTERM (the pod's
grace period), logging why.
"""
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler

PORT = int(os.environ.get("PORT", "18090"))
BIND = os.environ.get("BIND_ADDRESS", "0.0.0.0")  # the pod's IP (downward API)
NAME = os.environ.get("POD_NAME", "reward")
MAX_ITEMS = 4096
LOCK = threading.Lock()
SCORED = 0

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlcore  # noqa: E402  (the example's shared module, next to this file)


def log(msg):
    print(f"[{NAME}] {msg}", flush=True)


def parse_items(body):
    items = json.loads(body)["items"]
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise ValueError(f"items: a list of at most {MAX_ITEMS}")
    out = []
    for it in items:
        ctx, toks = int(it["prompt"]), [int(t) for t in it["completion"]]
        if not 0 <= ctx < rlcore.CONTEXTS or not toks or \
                any(not 0 <= t < rlcore.VOCAB for t in toks):
            raise ValueError(f"prompt {ctx} or completion {toks} out of range")
        out.append((ctx, toks))
    return out


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def _reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/healthz":
            self._reply(200, {"status": "ok"})
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/score":
            self._reply(404, {"error": "not found"})
            return
        try:
            items = parse_items(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        except (ValueError, KeyError, TypeError) as e:
            self._reply(400, {"error": f"bad request: {e}"})
            return
        scores = [rlcore.score(ctx, toks) for ctx, toks in items]
        global SCORED
        with LOCK:
            SCORED += len(scores)
            if SCORED // 1000 != (SCORED - len(scores)) // 1000:
                log(f"scored {SCORED} completions so far")
        self._reply(200, {"scores": scores, "model": NAME})


def main():
    server = rlcore.http_server(BIND, PORT, Handler)

    def on_term(signum, _frame):
        log(f"received signal {signum}: finishing in-flight requests and stopping")
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    log(f"serving on {BIND}:{PORT}, {rlcore.gpu_note()}")
    server.serve_forever()
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
