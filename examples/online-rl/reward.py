#!/usr/bin/env python3
"""Reward model service of the online-RL example (a stand-in for a real one).

POST /score {"prompt": str, "completion": str} -> {"score": float, "model": str}
GET  /healthz -> ok (readiness probe)

Scores are a deterministic function of the text, so runs are reproducible.
Stops cleanly on SIGTERM (the pod's grace period), logging why.
"""
import hashlib
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PORT", "18090"))
NAME = os.environ.get("POD_NAME", "reward")


def log(msg):
    print(f"[{NAME}] {msg}", flush=True)


def score(prompt, completion):
    digest = hashlib.sha256((prompt + "\0" + completion).encode()).digest()
    # Longer, more varied completions score higher; the hash breaks ties.
    variety = len(set(completion.split())) / max(1, len(completion.split()))
    return round(0.5 * variety + 0.5 * digest[0] / 255.0, 4)


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
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            s = score(str(req["prompt"]), str(req["completion"]))
        except (ValueError, KeyError) as e:
            self._reply(400, {"error": f"bad request: {e}"})
            return
        log(f"scored prompt={req['prompt'][:24]!r} score={s}")
        self._reply(200, {"score": s, "model": NAME})


def main():
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)

    def on_term(signum, _frame):
        log(f"received signal {signum}: finishing in-flight requests and stopping")
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    log(f"serving on port {PORT}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}")
    server.serve_forever()
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
