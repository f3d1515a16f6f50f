#!/usr/bin/env python3
"""Rollout generator service of the online-RL example (a stand-in for vLLM).

POST /generate {"prompt": str, "step": int} -> {"completion", "reward", "pod", "gpus"}
GET  /healthz -> ok (readiness probe)

Each completion is scored by the reward service (REWARD_URL), so every
response the trainer gets went through two real HTTP hops. Stops cleanly on
SIGTERM within the pod's grace period.
"""
import json
import os
import signal
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PORT", "18080"))
NAME = os.environ.get("POD_NAME", "rollout")
REWARD_URL = os.environ.get("REWARD_URL", "http://127.0.0.1:18090")
GPUS = os.environ.get("CUDA_VISIBLE_DEVICES", "")
WORDS = "policy gradient value advantage reward token sample rollout batch update".split()


def log(msg):
    print(f"[{NAME}] {msg}", flush=True)


def generate(prompt, step):
    seed = sum(map(ord, prompt)) + 7 * step
    return " ".join(WORDS[(seed + i * i) % len(WORDS)] for i in range(8))


def ask_reward(prompt, completion):
    body = json.dumps({"prompt": prompt, "completion": completion}).encode()
    req = urllib.request.Request(REWARD_URL + "/score", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.load(resp)["score"]


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
            self._reply(200, {"status": "ok", "gpus": GPUS})
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/generate":
            self._reply(404, {"error": "not found"})
            return
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            prompt, step = str(req["prompt"]), int(req.get("step", 0))
        except (ValueError, KeyError) as e:
            self._reply(400, {"error": f"bad request: {e}"})
            return
        completion = generate(prompt, step)
        try:
            reward = ask_reward(prompt, completion)
        except OSError as e:
            log(f"reward service unreachable at {REWARD_URL}: {e}")
            self._reply(503, {"error": f"reward service unreachable: {e}"})
            return
        log(f"step={step} prompt={prompt[:24]!r} reward={reward}")
        self._reply(200, {"completion": completion, "reward": reward, "pod": NAME, "gpus": GPUS})


def main():
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)

    def on_term(signum, _frame):
        log(f"received signal {signum}: draining and stopping")
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    log(f"serving on port {PORT}, CUDA_VISIBLE_DEVICES={GPUS}, reward at {REWARD_URL}")
    server.serve_forever()
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
